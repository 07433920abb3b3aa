/* SPDX-License-Identifier: MIT */
/* A program that profiles itself and saves a heap image and, at the same
 * instant, its own report (test_image.py compares the two; it also
 * symbolizes the image after this process has exited, stripped, moved or
 * replaced).
 *
 *   himg-target IMAGE REPORT [SYMBOLIZE [COPIES]]
 *
 * Allocates through the sampling allocator (mimalloc) at a 4 KiB interval
 * with a fixed seed from three known sites: himg_site_keep (2,000 x
 * 16 KiB, kept live), himg_site_churn (20,000 x 1,000 B, freed) and
 * himg_site_deep (a recursion 6 deep, 300 x 64 KiB kept live). Then it
 * writes IMAGE with mp_profiler_write_image() and REPORT (uncompressed
 * pprof) with mp_profiler_report(), with no allocation in between, and
 * exits. SYMBOLIZE is none|functions|lines (default functions); COPIES
 * writes IMAGE that many more times as IMAGE.N (for diff tests), each
 * after another round of himg_site_keep. HIMG_SCALE=N divides every count
 * by N (small images: the fuzzer's seeds). Prints "pid=<pid>". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR(himg, mp_sys_mimalloc);

#define NO_TAIL(x) __asm__ volatile("" : : "g"(x) : "memory")

static void *kept[8192];
static size_t nkept;

void himg_site_keep(unsigned n);
__attribute__((noinline)) void himg_site_keep(unsigned n)
{
    for (unsigned i = 0; i < n && nkept < sizeof kept / sizeof kept[0]; i++) {
        void *p = himg_alloc(16384, 16);
        if (p == NULL)
            exit(3);
        memset(p, 1, 64);
        kept[nkept++] = p;
    }
    NO_TAIL(n);
}

void himg_site_churn(unsigned n);
__attribute__((noinline)) void himg_site_churn(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        char *p = himg_alloc(1000, 8);
        if (p == NULL)
            exit(3);
        p[0] = (char)i;
        himg_dealloc(p, 1000, 8);
    }
    NO_TAIL(n);
}

void himg_site_deep(unsigned depth, unsigned n);
__attribute__((noinline)) void himg_site_deep(unsigned depth, unsigned n)
{
    if (depth > 0) {
        himg_site_deep(depth - 1, n);
        NO_TAIL(depth);
        return;
    }
    for (unsigned i = 0; i < n && nkept < sizeof kept / sizeof kept[0]; i++) {
        void *p = himg_alloc(65536, 64);
        if (p == NULL)
            exit(3);
        kept[nkept++] = p;
    }
    NO_TAIL(n);
}

static int save(mp_profiler *prof, const char *image)
{
    mp_prof_status st = mp_profiler_write_image(prof, image);
    if (st != MP_PROF_OK) {
        fprintf(stderr, "himg-target: write_image %s: %s\n", image, mp_prof_strerror(st));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: himg-target IMAGE REPORT [SYMBOLIZE [COPIES]]\n");
        return 2;
    }
    himg_dealloc(himg_alloc(64, 8), 64, 8); /* observed */
    mp_prof_config cfg;
    mp_prof_config_init(&cfg);
    cfg.sample_interval_bytes = 4096;
    cfg.seed = 42;
    cfg.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    if (argc > 3 && strcmp(argv[3], "none") == 0)
        cfg.symbolize = MP_PROF_SYMBOLIZE_NONE;
    else if (argc > 3 && strcmp(argv[3], "lines") == 0)
        cfg.symbolize = MP_PROF_SYMBOLIZE_LINES;
    unsigned copies = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
    mp_profiler *prof;
    mp_prof_status st = mp_profiler_start(&cfg, &prof);
    if (st != MP_PROF_OK) {
        fprintf(stderr, "himg-target: start: %s\n", mp_prof_strerror(st));
        return 1;
    }
    printf("pid=%ld\n", (long)getpid());
    fflush(stdout);
    const char *sc = getenv("HIMG_SCALE");
    unsigned scale = sc != NULL && atoi(sc) > 0 ? (unsigned)atoi(sc) : 1;
    himg_site_keep(2000 / scale);
    himg_site_churn(20000 / scale);
    himg_site_deep(6, 300 / scale);

    /* The image and the report of one state: nothing allocates between
     * them (both run under the profiler's guard). */
    if (save(prof, argv[1]) != 0)
        return 1;
    uint8_t *buf;
    size_t len;
    if ((st = mp_profiler_report(prof, &buf, &len)) != MP_PROF_OK) {
        fprintf(stderr, "himg-target: report: %s\n", mp_prof_strerror(st));
        return 1;
    }
    FILE *f = fopen(argv[2], "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "himg-target: cannot write %s\n", argv[2]);
        return 1;
    }
    mp_prof_buffer_free(buf);

    for (unsigned i = 1; i <= copies; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%u", argv[1], i);
        himg_site_keep(500 / scale);
        if (save(prof, path) != 0)
            return 1;
    }
    mp_profiler_free(prof);
    return 0; /* the kept blocks go with the process */
}
