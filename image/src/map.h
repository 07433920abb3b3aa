/* SPDX-License-Identifier: MIT */
/* An open-addressing map from a two-word key to a word, for the writer's
 * foreign values and name de-duplication. Keys are compared exactly. */
#ifndef MP_IMG_MAP_H
#define MP_IMG_MAP_H

#include <stddef.h>
#include <stdint.h>

struct img_map_slot {
    uint64_t a, b; /* key */
    uint64_t val;
    int used;
};

struct img_map {
    struct img_map_slot *slots;
    size_t cap; /* a power of two; kept at least twice the entries */
    size_t n;
};

/* Returns the value slot for (a, b), inserting it (value `init`) if absent;
 * *inserted says which. NULL on ENOMEM. */
uint64_t *img_map_put(struct img_map *m, uint64_t a, uint64_t b, uint64_t init, int *inserted);
/* The value for (a, b), or NULL. */
uint64_t *img_map_get(const struct img_map *m, uint64_t a, uint64_t b);
void img_map_free(struct img_map *m);

#endif /* MP_IMG_MAP_H */
