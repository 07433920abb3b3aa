/* SPDX-License-Identifier: MIT */
/* The bounded FIFO of profiles waiting for upload, and the spool that
 * keeps undeliverable ones on disk. Not installed. */
#ifndef MP_PYRO_QUEUE_H
#define MP_PYRO_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_internal.h"

/* One profile on its way: gzipped pprof and its window. */
typedef struct mp_pyro_item {
    uint8_t *gz;
    size_t gz_len;
    int64_t from_ns, until_ns; /* wall clock */
    uint32_t attempts;         /* requests made for it */
    int64_t first_attempt_ns;  /* monotonic, set at the first attempt */
    int64_t next_attempt_ns;   /* monotonic; 0 = now */
    bool last_chance;          /* stop: already moved ahead of its backoff once */
} mp_pyro_item;

void mp_pyro_item_free(mp_pyro_item *it);

/* A ring of `cap` waiting items (plus one slot so a failed in-flight item
 * can always be put back at the front). Not thread-safe: the agent holds
 * its mutex. */
typedef struct mp_pyro_queue {
    mp_pyro_item *slots;
    size_t nslots, head, len, cap;
} mp_pyro_queue;

mp_pyro_status mp_pyro_queue_init(mp_pyro_queue *q, size_t cap);
void mp_pyro_queue_destroy(mp_pyro_queue *q); /* frees the items left */
bool mp_pyro_queue_full(const mp_pyro_queue *q);
/* Appends; the caller has made room (len < cap). */
void mp_pyro_queue_push_back(mp_pyro_queue *q, mp_pyro_item it);
/* Puts `it` back at the front; the caller checked len < cap. */
void mp_pyro_queue_push_front(mp_pyro_queue *q, mp_pyro_item it);
bool mp_pyro_queue_pop_front(mp_pyro_queue *q, mp_pyro_item *out);
const mp_pyro_item *mp_pyro_queue_front(const mp_pyro_queue *q);

/* --- spool (spool.c) ----------------------------------------------------- */

typedef struct mp_pyro_spool mp_pyro_spool;

typedef struct mp_pyro_spool_entry {
    char *path;            /* NULL when the spool is empty */
    mp_pyro_series series; /* as it was when the profile was spooled */
    char *spy;
    uint8_t *gz;
    size_t gz_len;
    int64_t from_ns, until_ns;
} mp_pyro_spool_entry;

/* Creates `dir` (0700) if needed, takes its lock, indexes its files.
 * `owner` (borrowed, outlives the spool) is the agent's configuration:
 * files are written for its server, tenant and credentials, and only
 * files written for the same are read back; the others are kept. */
mp_pyro_status mp_pyro_spool_open(const char *dir, uint64_t max_bytes, uint32_t max_age_s,
                                  const mp_pyro_config *owner, mp_pyro_spool **out, char *err,
                                  size_t errlen);
void mp_pyro_spool_close(mp_pyro_spool *sp);
/* Writes one profile (atomically: temporary file + rename), first evicting
 * the oldest files beyond max_bytes (counted in *evicted). */
mp_pyro_status mp_pyro_spool_put(mp_pyro_spool *sp, const mp_pyro_series *series, const char *spy,
                                 const mp_pyro_item *it, uint64_t *evicted, char *err,
                                 size_t errlen);
/* Loads the oldest profile of this owner; deletes expired (*expired,
 * measured from the profile's start) and unreadable (*corrupt) files on
 * the way. e->path is NULL when none is left. */
mp_pyro_status mp_pyro_spool_peek(mp_pyro_spool *sp, mp_pyro_spool_entry *e, uint64_t *expired,
                                  uint64_t *corrupt);
/* Deletes the file of `e` (after delivery or rejection). */
void mp_pyro_spool_remove(mp_pyro_spool *sp, const mp_pyro_spool_entry *e);
void mp_pyro_spool_entry_free(mp_pyro_spool_entry *e);
/* Files and bytes in the spool, and of them the files of other owners. */
void mp_pyro_spool_counts(mp_pyro_spool *sp, uint64_t *files, uint64_t *bytes, uint64_t *foreign);

#endif
