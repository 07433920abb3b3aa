/* SPDX-License-Identifier: MIT */
/* The heap_v2 parser, jeprof's unbiasing rule and the pprof encoding of a
 * dump, on fixed inputs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "jeprof_parse.h"
#include "jeprof_pprof.h"

/* Shaped like a jemalloc 5.3 dump (values made up). */
static const char dump[] = "heap_v2/4096\n"
                           "  t*: 3: 12288 [0: 0]\n"
                           "  t0: 2: 8192 [0: 0]\n"
                           "  t1: 1: 4096 [0: 0] worker-1\n"
                           "@ 0x7f0000001000 0x7f0000001100 0x55000000a123 0x55000000b456\n"
                           "  t*: 2: 8192 [4: 16384]\n"
                           "  t0: 2: 8192 [4: 16384]\n"
                           "@ 0x7f0000001000 0x55000000c789\n"
                           "  t*: 1: 64 [0: 0]\n"
                           "  t1: 1: 64 [0: 0]\n"
                           "@ 0x55000000d000\n"
                           "  t*: 0: 0 [0: 0]\n"
                           "\n"
                           "MAPPED_LIBRARIES:\n"
                           "55000000a000-55000000f000 r-xp 00001000 fe:00 1 /usr/bin/app\n"
                           "this line is not parsed @ t*:\n";

Test(jeprof, parse_fixture)
{
    mp_jeprof_dump d;
    char err[200];
    cr_assert_eq(mp_jeprof_parse(dump, sizeof dump - 1, &d, err, sizeof err), 0, "%s", err);
    cr_expect_eq(d.period, 4096);
    cr_expect_eq(d.total_objs, 3);
    cr_expect_eq(d.total_bytes, 12288);
    cr_assert_eq(d.nstacks, 3);
    cr_expect_eq(d.stacks[0].depth, 4);
    cr_expect_eq(d.frames[d.stacks[0].frame_off + 2], 0x55000000a123);
    cr_expect_eq(d.stacks[0].objs, 2);
    cr_expect_eq(d.stacks[0].bytes, 8192);
    cr_expect_eq(d.stacks[0].accum_objs, 4);
    cr_expect_eq(d.stacks[0].accum_bytes, 16384);
    cr_expect_eq(d.stacks[1].bytes, 64);
    cr_expect_eq(d.stacks[2].objs, 0);
    cr_expect_eq(d.nframes, 7);
    mp_jeprof_dump_free(&d);
}

Test(jeprof, rejects_malformed)
{
    const char *bad[] = {
        "",
        "heap_v1/4096\n  t*: 0: 0 [0: 0]\n",
        "heap_v2/0\n  t*: 0: 0 [0: 0]\n",
        "heap_v2/4096\n",
        "heap_v2/4096\n@ 0x1\n  t*: 1: 1 [0: 0]\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\n@ 0x1\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\n@ 0x1\n  t0: 1: 1 [0: 0]\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\n@ 0xZZ\n  t*: 1: 1 [0: 0]\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\n@ 0x12345678901234567\n  t*: 1: 1 [0: 0]\n",
        "heap_v2/4096\n  t*: 99999999999999999999: 1 [0: 0]\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\ngarbage\n",
        "heap_v2/4096\n  t*: 1: 1 [0: 0]\n@ 0x1\n  t*: 1: 1 [0: 0]\n  t*: 1: 1 [0: 0]\n",
        NULL};
    for (int i = 0; bad[i]; i++) {
        mp_jeprof_dump d;
        char err[200] = "";
        cr_expect_eq(mp_jeprof_parse(bad[i], strlen(bad[i]), &d, err, sizeof err), -1, "case %d",
                     i);
        cr_expect_neq(err[0], '\0', "case %d has a message", i);
        cr_expect_null(d.stacks);
    }
}

Test(jeprof, depth_limit)
{
    tbuf b = {0};
    const char *h = "heap_v2/1\n  t*: 1: 1 [0: 0]\n@";
    tbuf_put(&b, h, strlen(h));
    for (int i = 0; i <= MP_JEPROF_MAX_DEPTH; i++)
        tbuf_put(&b, " 0x1", 4);
    tbuf_put(&b, "\n  t*: 1: 1 [0: 0]\n", 19);
    mp_jeprof_dump d;
    char err[200];
    cr_expect_eq(mp_jeprof_parse((char *)b.p, b.len, &d, err, sizeof err), -1);
    cr_expect(strstr(err, "too deep"), "%s", err);
    tbuf_free(&b);
}

Test(jeprof, unbias_rule)
{
    double o, b;
    /* 100 sampled 64-byte objects at R=4096: each stands for 1/(1-e^(-1/64)) */
    mp_jeprof_unbias(100, 6400, 4096, &o, &b);
    double scale = 1.0 / (1.0 - exp(-64.0 / 4096.0));
    cr_expect_float_eq(o, 100 * scale, 1e-6);
    cr_expect_float_eq(b, 6400 * scale, 1e-6);
    cr_expect_float_eq(b / o, 64.0, 1e-9, "the average size is kept");
    /* objects much larger than the period: scale ~ 1 */
    mp_jeprof_unbias(10, 10 * 1048576, 4096, &o, &b);
    cr_expect_float_eq(o, 10.0, 1e-9);
    /* period 1 (every byte sampled) */
    mp_jeprof_unbias(5, 500, 1, &o, &b);
    cr_expect_float_eq(o, 5.0, 1e-9);
    mp_jeprof_unbias(0, 0, 4096, &o, &b);
    cr_expect(o == 0 && b == 0);
}

Test(jeprof, pprof_encoding)
{
    mp_jeprof_dump d;
    cr_assert_eq(mp_jeprof_parse(dump, sizeof dump - 1, &d, NULL, 0), 0);
    mp_prof_mapping maps[2] = {
        {.start = 0x550000000000,
         .limit = 0x560000000000,
         .file_offset = 0x1000,
         .path = "/usr/bin/app",
         .build_id = "abcd"},
        {.start = 0x7f0000000000,
         .limit = 0x7f0000100000,
         .file_offset = 0,
         .path = "/lib/libjemalloc.so.2",
         .build_id = ""},
    };
    mp_prof_symbolizer *s;
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(mp_prof_symbolizer_add_mapping(s, &maps[i]), MP_PROF_OK);
    mp_jeprof_pprof_options o = {.allocator_code = 0x7f0000000010,
                                 .symbolize = MP_PROF_SYMBOLIZE_NONE,
                                 .time_nanos = 123,
                                 .duration_nanos = 456,
                                 .comment = "test"};
    uint8_t *out;
    size_t len;
    cr_assert_eq(mp_jeprof_pprof(&d, s, &o, &out, &len), MP_PROF_OK);
    tp_profile p;
    cr_assert(tp_decode(out, len, &p));
    cr_expect_eq(p.nsample_types, 2);
    cr_expect_str_eq(tp_str(&p, p.sample_types[0].type), "inuse_objects");
    cr_expect_str_eq(tp_str(&p, p.sample_types[1].type), "inuse_space");
    cr_expect_str_eq(tp_str(&p, p.period_type.type), "space");
    cr_expect_eq(p.period, 4096);
    cr_expect_eq(p.time_nanos, 123);
    cr_expect_eq(p.duration_nanos, 456);
    cr_expect_eq(p.nmappings, 2);
    cr_expect_str_eq(tp_str(&p, p.mappings[0].build_id), "abcd");
    cr_assert_eq(p.nsamples, 2, "the empty stack is dropped");
    /* jemalloc's own leading frames are cut: sample 0 starts in the app,
     * addresses moved back into the call instruction */
    cr_expect_eq(p.samples[0].nlocations, 2);
    uint64_t leaf = p.samples[0].location_ids[0];
    for (size_t i = 0; i < p.nlocations; i++)
        if (p.locations[i].id == leaf) {
            cr_expect_eq(p.locations[i].address, 0x55000000a122);
            cr_expect_eq(p.locations[i].mapping_id, 1);
        }
    double uo, ub;
    mp_jeprof_unbias(2, 8192, 4096, &uo, &ub);
    cr_expect_eq(p.samples[0].values[0], llround(uo));
    cr_expect_eq(p.samples[0].values[1], llround(ub));
    tp_free(&p);
    mp_prof_buffer_free(out);
    mp_prof_symbolizer_free(s);
    mp_jeprof_dump_free(&d);
}

/* Frames named from the dynamic symbol table carry the human name the
 * mimprof backend gives (mp_prof_demangle): libstdc++'s operator new,
 * not _Znwm; a C function keeps its name. */
Test(jeprof, pprof_names_are_demangled)
{
    void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (cxx == NULL)
        cr_skip_test("no libstdc++.so.6 to take C++ names from");
    uintptr_t nw = (uintptr_t)dlsym(cxx, "_Znwm");
    /* libc's own strerror: under AddressSanitizer RTLD_DEFAULT finds the
     * runtime's interceptor, a weak alias of __interceptor_strerror. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    uintptr_t sl = (uintptr_t)dlsym(libc ? libc : RTLD_DEFAULT, "strerror");
    cr_assert(nw != 0 && sl != 0);
    char text[256];
    /* return addresses: one past a byte inside each function */
    snprintf(text, sizeof text,
             "heap_v2/4096\n  t*: 1: 64 [0: 0]\n@ 0x%lx 0x%lx\n  t*: 1: 64 [0: 0]\n",
             (unsigned long)(nw + 2), (unsigned long)(sl + 2));
    mp_prof_symbolizer *s;
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    mp_jeprof_pprof_options o = {.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS};
    uint8_t *out;
    size_t len;
    tp_profile p;
    /* By default operator new, the allocator's entry, leaves the stack
     * (mp_prof_set_drop_frames): strerror is the leaf. */
    cr_assert_eq(mp_jeprof_pprof_text(text, strlen(text), s, &o, &out, &len, NULL, 0), MP_PROF_OK);
    cr_assert(tp_decode(out, len, &p));
    cr_assert_eq(p.nsamples, 1);
    cr_assert_eq(p.samples[0].nlocations, 1, "operator new dropped from the leaf end");
    tp_free(&p);
    mp_prof_buffer_free(out);
    /* Kept, to see its name. */
    cr_assert_eq(mp_prof_set_drop_frames(NULL, MP_PROF_DROP_NOTHING), MP_PROF_OK);
    cr_assert_eq(mp_jeprof_pprof_text(text, strlen(text), s, &o, &out, &len, NULL, 0), MP_PROF_OK);
    cr_assert(tp_decode(out, len, &p));
    bool saw_new = false, saw_c = false;
    for (size_t i = 0; i < p.nfunctions; i++) {
        const char *n = tp_str(&p, p.functions[i].name);
        cr_expect_str_neq(n, "_Znwm");
        saw_new |= strcmp(n, "operator new") == 0;
        saw_c |= strcmp(n, "strerror") == 0;
    }
    cr_expect(saw_new, "operator new is named");
    cr_expect(saw_c, "strerror keeps its name");
    tp_free(&p);
    mp_prof_buffer_free(out);
    mp_prof_symbolizer_free(s);
    dlclose(cxx);
    if (libc)
        dlclose(libc);
}
