/* SPDX-License-Identifier: MIT */
/* An exit report of 2^BITS distinct stacks (default 17: 131,072): for each
 * counter value, a recursion BITS deep through a() or b() by each bit,
 * and at its bottom a 1 KiB block, kept (sampled surely at `-i 16`: 128
 * MiB live at 17 bits). The whole report is the process's last (run it with -e 0),
 * split by the adapter into parts of 16,000 samples.
 *
 *   mimprof-test-wide-exit [BITS] */
#include <stdlib.h>
#include <string.h>

static volatile size_t sink;

typedef void level(unsigned depth, unsigned long v);
static level a, b;

/* The bottom: a 1 KiB block, kept (live samples are held per stack up
 * to the live table's bound, 2^20; freed ones would pass through the
 * overflow shards, which hold 65,536 stacks). */
__attribute__((noinline)) static void leaf(unsigned long v)
{
    char *p = malloc(1024);
    if (p != NULL) {
        p[0] = (char)v;
        sink += (size_t)p[0];
    }
}

/* One frame per bit: a() or b(), each calling the next through one call
 * site, so the functions of the stack spell the counter (depth frames
 * plus two stay within the profiler's default depth). */
static inline __attribute__((always_inline)) void next(unsigned depth, unsigned long v)
{
    if (depth == 0)
        leaf(v);
    else
        ((v & 1) ? a : b)(depth - 1, v >> 1);
}

__attribute__((noinline)) static void a(unsigned depth, unsigned long v)
{
    next(depth, v);
    __asm__ volatile("" ::: "memory"); /* not a tail call: a frame of its own */
}

__attribute__((noinline)) static void b(unsigned depth, unsigned long v)
{
    next(depth, v);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    unsigned bits = argc > 1 ? (unsigned)atoi(argv[1]) : 17;
    if (bits > 24)
        return 2;
    for (unsigned long v = 0; v < (1ul << bits); v++)
        next(bits, v);
    return 0;
}
