/* SPDX-License-Identifier: MIT */
/* The shared provider contract (see <mimprof/sys.h>), written against the
 * provider interface only. Compiled once per provider with
 *   -DCONTRACT_PROVIDER=<prefix>    e.g. mp_sys_mimalloc
 *   -DCONTRACT_INCLUDE="<header>"   the header that declares it
 * so the same suite runs over mimalloc, jemalloc and the sampling
 * allocator instantiated over each. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include CONTRACT_INCLUDE

#define CAT2(a, b) a##_##b
#define CAT(a, b)  CAT2(a, b)
#define P(op)      CAT(CONTRACT_PROVIDER, op)

/* Optional per-provider set-up (the sampling allocator starts a session). */
#ifdef CONTRACT_SETUP
void CONTRACT_SETUP(void);
void CONTRACT_TEARDOWN(void);
TestSuite(contract, .init = CONTRACT_SETUP, .fini = CONTRACT_TEARDOWN);
#endif

/* A size no allocator can serve, but small enough that it is not rejected
 * by an overflow check before reaching the OS: the failure path itself. */
#define IMPOSSIBLE_SIZE (SIZE_MAX / 2 - 4096)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31u + seed);
}

static int check_fill(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31u + seed))
            return 0;
    return 1;
}

Test(contract, alignments_1B_to_64KiB)
{
    static const size_t sizes[] = {0, 1, 7, 8, 24, 100, 4096, 70000};
    for (size_t align = 1; align <= 65536; align <<= 1) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            unsigned char *p = P(alloc)(n, align);
            cr_assert_not_null(p, "alloc(%zu, %zu)", n, align);
            cr_assert_eq((uintptr_t)p % align, 0, "alloc(%zu, %zu) = %p", n, align, (void *)p);
            cr_assert_geq(P(usable_size)(p), n);
            fill(p, n, (unsigned)align);
            cr_assert(check_fill(p, n, (unsigned)align));
            P(dealloc)(p, n, align);
        }
    }
}

Test(contract, zeroed_blocks_are_zero)
{
    static const size_t sizes[] = {1, 16, 1000, 65536, 1 << 20};
    for (size_t a = 8; a <= 4096; a <<= 3) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            /* dirty the allocator's free lists first */
            unsigned char *d = P(alloc)(sizes[i], a);
            memset(d, 0xff, sizes[i]);
            P(dealloc)(d, sizes[i], a);
            unsigned char *p = P(alloc_zeroed)(sizes[i], a);
            cr_assert_not_null(p);
            cr_assert_eq((uintptr_t)p % a, 0);
            for (size_t k = 0; k < sizes[i]; k++)
                cr_assert_eq(p[k], 0, "byte %zu of %zu", k, sizes[i]);
            P(dealloc)(p, sizes[i], a);
        }
    }
}

Test(contract, realloc_grow_and_shrink_keep_contents)
{
    for (size_t align = 8; align <= 4096; align <<= 2) {
        size_t n = 100;
        unsigned char *p = P(alloc)(n, align);
        fill(p, n, 5);
        static const size_t steps[] = {1000, 100000, 3000000, 50, 7, 4000};
        for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
            size_t keep = n < steps[i] ? n : steps[i];
            p = P(realloc)(p, n, align, steps[i]);
            cr_assert_not_null(p);
            cr_assert_eq((uintptr_t)p % align, 0, "realloc to %zu at align %zu", steps[i], align);
            cr_assert(check_fill(p, keep, 5), "contents lost at step %zu", i);
            n = steps[i];
            fill(p, n, 5);
        }
        P(dealloc)(p, n, align);
    }
}

Test(contract, realloc_failure_keeps_old_block)
{
    for (size_t align = 8; align <= 256; align <<= 5) {
        unsigned char *p = P(alloc)(64, align);
        fill(p, 64, 9);
        errno = 0;
        void *q = P(realloc)(p, 64, align, IMPOSSIBLE_SIZE);
        cr_assert_null(q);
        cr_assert_eq(errno, ENOMEM);
        cr_assert(check_fill(p, 64, 9), "old block changed");
        cr_assert_geq(P(usable_size)(p), 64);
        P(dealloc)(p, 64, align);
    }
}

Test(contract, impossible_allocations_fail_with_enomem)
{
    volatile size_t max = SIZE_MAX; /* hidden from -Walloc-size-larger-than */
    errno = 0;
    cr_assert_null(P(alloc)(IMPOSSIBLE_SIZE, 8));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(P(alloc)(max, 64));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(P(alloc_zeroed)(IMPOSSIBLE_SIZE, 8));
    cr_assert_eq(errno, ENOMEM);
}

Test(contract, zero_size_is_unique_and_freeable)
{
    void *a = P(alloc)(0, 8);
    void *b = P(alloc)(0, 8);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_assert_neq(a, b);
    P(dealloc)(a, 0, 8);
    P(dealloc)(b, 0, 8);
    P(dealloc)(NULL, 0, 8);
    cr_assert_eq(P(usable_size)(NULL), 0);
}

Test(contract, usable_size_covers_request)
{
    for (size_t n = 1; n < (1u << 22); n = n * 3 + 1) {
        unsigned char *p = P(alloc)(n, 8);
        size_t u = P(usable_size)(p);
        cr_assert_geq(u, n);
        memset(p, 1, u);     /* the whole usable area is writable */
        P(dealloc)(p, 0, 8); /* size unknown */
    }
}

/* 8 threads: each allocates blocks and hands them to its neighbour, which
 * checks and frees them: every free is a cross-thread free. */
#define THREADS    8
#define PER_THREAD 20000
#define SLOTS      64

struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *slot[SLOTS];
    size_t size[SLOTS];
    unsigned head, count;
    unsigned done_producers;
};

static struct mailbox boxes[THREADS];

static void post(struct mailbox *m, void *p, size_t n)
{
    pthread_mutex_lock(&m->lock);
    while (m->count == SLOTS)
        pthread_cond_wait(&m->cond, &m->lock);
    unsigned tail = (m->head + m->count) % SLOTS;
    m->slot[tail] = p;
    m->size[tail] = n;
    m->count++;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

static int take(struct mailbox *m, void **p, size_t *n)
{
    pthread_mutex_lock(&m->lock);
    while (m->count == 0 && m->done_producers == 0)
        pthread_cond_wait(&m->cond, &m->lock);
    if (m->count == 0) {
        pthread_mutex_unlock(&m->lock);
        return 0;
    }
    *p = m->slot[m->head];
    *n = m->size[m->head];
    m->head = (m->head + 1) % SLOTS;
    m->count--;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    return 1;
}

struct worker {
    unsigned id;
    pthread_t producer, consumer;
    unsigned long freed, bad;
};

static void *produce(void *arg)
{
    struct worker *w = arg;
    struct mailbox *out = &boxes[(w->id + 1) % THREADS];
    for (unsigned i = 0; i < PER_THREAD; i++) {
        size_t n = 16 + (i * 2654435761u + w->id) % 3000;
        unsigned char *p = P(alloc)(n, i % 4 == 0 ? 64 : 8);
        p[0] = (unsigned char)w->id;
        p[n - 1] = (unsigned char)i;
        post(out, p, n);
    }
    pthread_mutex_lock(&out->lock);
    out->done_producers = 1;
    pthread_cond_broadcast(&out->cond);
    pthread_mutex_unlock(&out->lock);
    return NULL;
}

static void *consume(void *arg)
{
    struct worker *w = arg;
    struct mailbox *in = &boxes[w->id];
    unsigned from = (w->id + THREADS - 1) % THREADS;
    void *p;
    size_t n;
    while (take(in, &p, &n)) {
        unsigned char *b = p;
        if (b[0] != (unsigned char)from)
            w->bad++;
        P(dealloc)(p, w->freed % 2 ? n : 0, 8);
        w->freed++;
    }
    return NULL;
}

Test(contract, eight_threads_cross_thread_frees, .timeout = 120)
{
    struct worker w[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        boxes[i] = (struct mailbox){.head = 0};
        pthread_mutex_init(&boxes[i].lock, NULL);
        pthread_cond_init(&boxes[i].cond, NULL);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.id = i};
        pthread_create(&w[i].consumer, NULL, consume, &w[i]);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_create(&w[i].producer, NULL, produce, &w[i]);
    unsigned long freed = 0, bad = 0;
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(w[i].producer, NULL);
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(w[i].consumer, NULL);
        freed += w[i].freed;
        bad += w[i].bad;
    }
    cr_assert_eq(freed, (unsigned long)THREADS * PER_THREAD);
    cr_assert_eq(bad, 0);
}
