/* SPDX-License-Identifier: MIT */
/* Example: a program that allocates through libmimprof-allocator.
 * Builds a word-frequency table from generated text with the four
 * operations and says what the provider did. */
#include <mimprof/allocator.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct entry {
    char *word;
    size_t count;
};

int main(void)
{
    size_t cap = 16, used = 0, bytes = 0, calls = 0;
    struct entry *table = mp_alloc_alloc(cap * sizeof *table, _Alignof(struct entry));
    calls++;
    uint32_t x = 7;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        char word[16];
        int len = snprintf(word, sizeof word, "w%u", (x >> 20) % 5000);
        size_t k = 0;
        while (k < used && strcmp(table[k].word, word) != 0)
            k++;
        if (k == used) {
            if (used == cap) {
                table = mp_alloc_realloc(table, cap * sizeof *table, _Alignof(struct entry),
                                         2 * cap * sizeof *table);
                cap *= 2;
                calls++;
            }
            table[used].word = mp_alloc_alloc((size_t)len + 1, 1);
            memcpy(table[used].word, word, (size_t)len + 1);
            table[used].count = 0;
            bytes += (size_t)len + 1;
            calls++;
            used++;
        }
        table[k].count++;
    }
    size_t best = 0;
    for (size_t k = 1; k < used; k++)
        if (table[k].count > table[best].count)
            best = k;
    printf("alloc-demo: %zu distinct words, most frequent %s (%zu times)\n", used, table[best].word,
           table[best].count);
    printf("alloc-demo: %zu allocations (%zu bytes of words, table of %zu slots, %zu usable "
           "bytes) served by %s through libmimprof-allocator %s\n",
           calls, bytes, cap, mp_alloc_usable_size(table), mp_alloc_provider_name(),
           mp_alloc_version());
    for (size_t k = 0; k < used; k++)
        mp_alloc_dealloc(table[k].word, strlen(table[k].word) + 1, 1);
    mp_alloc_dealloc(table, cap * sizeof *table, _Alignof(struct entry));
    return 0;
}
