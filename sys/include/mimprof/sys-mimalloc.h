/* SPDX-License-Identifier: MIT */
/**
 * @file sys-mimalloc.h
 * @brief The `mp_sys_mimalloc` provider: mimalloc behind the provider
 *        contract of <mimprof/sys.h>.
 *
 * Included by <mimprof/sys.h> when the package was built with mimalloc.
 * Mapping: alloc -> mi_malloc / mi_malloc_aligned, dealloc ->
 * mi_free_size_aligned (mimalloc's sized free), realloc -> mi_realloc /
 * mi_realloc_aligned (which return NULL and keep the block on failure;
 * mi_reallocf would free it), alloc_zeroed -> mi_zalloc / mi_zalloc_aligned.
 */
#ifndef MIMPROF_SYS_MIMALLOC_H
#define MIMPROF_SYS_MIMALLOC_H

#include <errno.h>
#include <mimalloc.h>
#include <mimprof/sys.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** "mimalloc". */
static inline const char *mp_sys_mimalloc_name(void) { return "mimalloc"; }

/** The linked mimalloc's version ("2.0.9"), written into `buf`. */
static inline const char *mp_sys_mimalloc_version(char buf[MP_SYS_VERSION_LEN])
{
    int v = mi_version(); /* major*100 + minor*10 + patch */
    snprintf(buf, MP_SYS_VERSION_LEN, "%d.%d.%d", v / 100, (v / 10) % 10, v % 10);
    return buf;
}

/**
 * mimalloc's error callback (mi_register_error) that gives the contract's
 * errno: ENOMEM for an allocation mimalloc could not serve (its ENOMEM)
 * or whose size overflows (its EOVERFLOW: a size above PTRDIFF_MAX; in
 * debug builds also calloc's product); every other report (EFAULT,
 * EAGAIN, EINVAL: a corrupt or double free) leaves errno alone, as
 * mimalloc's default does in its release builds (Debian's: secure level
 * 0; the default callback aborts on EFAULT only in debug or secure
 * builds). Debian's mimalloc 2.0.9 sets errno in none of malloc, calloc
 * and realloc itself: its malloc leaves what the last system call left
 * (ENOENT for malloc(SIZE_MAX) in a fresh process), its calloc nothing on
 * an overflowing product.
 */
static inline void mp_sys_mimalloc_on_error(int err, void *arg)
{
    (void)arg;
    if (err == ENOMEM || err == EOVERFLOW)
        errno = ENOMEM;
}

/**
 * Registers mp_sys_mimalloc_on_error with mimalloc, process-wide: from
 * then on mimalloc's own unaligned entry points (mi_malloc, mi_zalloc,
 * mi_realloc; and so its exported malloc and realloc) set errno to ENOMEM
 * on every failure, because each failure of theirs ends in mimalloc's
 * error report (`_mi_malloc_generic`: "unable to allocate memory",
 * "allocation request is too large"). Not covered: an overflowing
 * product in mi_calloc (reported only in debug builds: check it before
 * calling mi_zalloc, as the override's calloc does) and the aligned entry
 * points (a size above PTRDIFF_MAX returns NULL unreported). A consumer
 * that calls this in a constructor may define
 * MP_SYS_MIMALLOC_ERRNO_BY_HANDLER before including this header: the
 * provider's unaligned operations then return mimalloc's result as it
 * is (a tail call: no test of the result, no frame), as mimprof's
 * preload objects do; the allocator package's override registers it for
 * mimalloc's exported malloc, which it does not wrap. A program that
 * registers its own mimalloc error callback replaces this one (mimalloc
 * keeps one).
 */
static inline void mp_sys_mimalloc_errno_by_handler(void)
{
    mi_register_error(mp_sys_mimalloc_on_error, NULL);
}

/* mimalloc reports failure by NULL but does not promise errno; the
 * contract does, so the (cold) failure paths set it. */
static inline void *mp_sys_mimalloc_enomem_(void *p)
{
    if (__builtin_expect(p == NULL, 0))
        errno = ENOMEM;
    MP_SYS_TSAN_ACQUIRE_(p);
    return p;
}

/* The unaligned operations' result: as mimalloc returns it when its
 * error callback sets errno (and no TSan annotation is wanted). */
#if defined(MP_SYS_MIMALLOC_ERRNO_BY_HANDLER) && !defined(MP_SYS_TSAN_)
#define MP_SYS_MIMALLOC_UNALIGNED_(p) (p)
#else
#define MP_SYS_MIMALLOC_UNALIGNED_(p) mp_sys_mimalloc_enomem_(p)
#endif

/** Allocates `size` bytes aligned to `align` (a power of two). */
static inline void *mp_sys_mimalloc_alloc(size_t size, size_t align)
{
    if (align <= MP_SYS_NATURAL_ALIGN)
        return MP_SYS_MIMALLOC_UNALIGNED_(mi_malloc(size));
    return mp_sys_mimalloc_enomem_(mi_malloc_aligned(size, align));
}

/** Frees `p`, allocated with `size` (0 = unknown) and `align`. */
static inline void mp_sys_mimalloc_dealloc(void *p, size_t size, size_t align)
{
    MP_SYS_TSAN_RELEASE_(p);
    if (size == 0)
        mi_free(p);
    else
        mi_free_size_aligned(p, size, align);
}

/** Resizes `p`; NULL on failure with `p` intact. */
static inline void *mp_sys_mimalloc_realloc(void *p, size_t old_size, size_t align, size_t new_size)
{
    (void)old_size; /* mimalloc finds the block's size itself */
    MP_SYS_TSAN_RELEASE_(p);
    if (align <= MP_SYS_NATURAL_ALIGN)
        return MP_SYS_MIMALLOC_UNALIGNED_(mi_realloc(p, new_size));
    return mp_sys_mimalloc_enomem_(mi_realloc_aligned(p, new_size, align));
}

/** Allocates `size` zeroed bytes aligned to `align`. */
static inline void *mp_sys_mimalloc_alloc_zeroed(size_t size, size_t align)
{
    if (align <= MP_SYS_NATURAL_ALIGN)
        return MP_SYS_MIMALLOC_UNALIGNED_(mi_zalloc(size));
    return mp_sys_mimalloc_enomem_(mi_zalloc_aligned(size, align));
}

/** Usable bytes at `p`. */
static inline size_t mp_sys_mimalloc_usable_size(const void *p) { return mi_usable_size(p); }

/** Returns to the OS the pages the calling thread's heap holds empty.
 *  mimalloc keeps a freed page committed (and so dirty: private memory
 *  in every forked process) until its decommit delay has passed *and* a
 *  later allocation in that segment looks at it, which a thread that
 *  allocates once a period never does. The delay is 0 for this one call
 *  (a global option: a free on another thread meanwhile may decommit at
 *  once, which costs it time, never correctness), then restored. Not
 *  forced: a forced collection would also adopt other threads' abandoned
 *  segments and purge the process-wide caches, none of them the
 *  caller's. For a thread whose allocations are the profiler's own (the reporter, after
 *  each report; tests/test_mimalloc_trim.c shows it on such a thread,
 *  not the main one); never call it from an allocation path. */
static inline void mp_sys_mimalloc_trim_thread(void)
{
    long delay = mi_option_get(mi_option_decommit_delay);
    mi_option_set(mi_option_decommit_delay, 0);
    mi_collect(false);
    mi_option_set(mi_option_decommit_delay, delay);
}

/** Internal to mp_sys_mimalloc_stats: the "reserved:" line of
 *  mi_stats_print_out's text, collected across its output calls. */
typedef struct mp_sys_mimalloc_text {
    char line[256];              /**< the line being collected */
    size_t len;                  /**< its length so far */
    unsigned long long reserved; /**< MP_SYS_STAT_NONE until the line is read */
} mp_sys_mimalloc_text;

/** Internal: "32.0 MiB" or "0", a value of mimalloc's stats table, in
 *  bytes; `*s` moves past it. False when no number is there. */
static inline bool mp_sys_mimalloc_value(const char **s, unsigned long long *out)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    char *end;
    while (**s == ' ')
        (*s)++;
    double v = strtod(*s, &end);
    if (end == *s)
        return false;
    *s = end;
    while (**s == ' ')
        (*s)++;
    double scale = 1;
    for (int i = 0; i < 5; i++, scale *= 1024) {
        size_t n = strlen(units[i]);
        if (strncmp(*s, units[i], n) == 0 && ((*s)[n] == ' ' || (*s)[n] == '\0')) {
            *s += n;
            v *= scale;
            break;
        }
    }
    *out = (unsigned long long)(v + 0.5);
    return true;
}

/** Internal: reads the reserved figure (current column) from a whole line. */
static inline void mp_sys_mimalloc_text_line(mp_sys_mimalloc_text *t)
{
    t->line[t->len] = '\0';
    const char *s = t->line;
    while (*s == ' ')
        s++;
    unsigned long long v[4];
    if (strncmp(s, "reserved:", 9) != 0)
        return;
    s += 9;
    for (int i = 0; i < 4; i++) /* peak, total, freed, current */
        if (!mp_sys_mimalloc_value(&s, &v[i]))
            return;
    t->reserved = v[3];
}

/** Internal: mi_stats_print_out's output function (`arg`: the text state). */
static inline void mp_sys_mimalloc_text_out(const char *msg, void *arg)
{
    mp_sys_mimalloc_text *t = (mp_sys_mimalloc_text *)arg;
    for (; *msg != '\0'; msg++) {
        if (*msg == '\n') {
            mp_sys_mimalloc_text_line(t);
            t->len = 0;
        } else if (t->len + 1 < sizeof t->line) {
            t->line[t->len++] = *msg;
        }
    }
}

/**
 * The statistics hook (mp_sys_stats): mimalloc's committed bytes, from
 * mi_process_info() (its process-wide statistics, kept with atomic updates
 * by the operating-system layer, so exact at any moment; no lock), and its
 * reserved address space, read from the "reserved:" line of
 * mi_stats_print_out (mimalloc 2.0 has no numeric call for it: the text
 * is rounded to three significant digits, e.g. "32.0 MiB"; no allocation,
 * the text goes through a stack buffer). Resident, allocated, active and
 * mapped are MP_SYS_STAT_NONE: mimalloc 2.0 keeps no such figure (its
 * "touched" counts pages ever touched, not pages resident now; the
 * process's RSS is in the report's comments). Always true.
 */
static inline bool mp_sys_mimalloc_stats(mp_sys_stats *out)
{
    size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
    mp_sys_stats_init(out);
    mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
    out->committed = commit;
    mp_sys_mimalloc_text t = {.len = 0, .reserved = MP_SYS_STAT_NONE};
    mi_stats_print_out(mp_sys_mimalloc_text_out, &t);
    out->reserved = t.reserved;
    return true;
}

#endif /* MIMPROF_SYS_MIMALLOC_H */
