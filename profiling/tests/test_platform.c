/* SPDX-License-Identifier: MIT */
/* The platform backend (src/platform), from the public API, in every build:
 * sessions work, reports decode, stacks are captured (libunwind or
 * backtrace()) and start at the application's frame, mappings are what the
 * backend promises (ELF: the loaded objects with build-ids; generic: none),
 * function names are right or absent (a static function is never given a
 * neighbour's exported name), and what the build cannot do answers
 * MP_PROF_E_UNSUPPORTED: symbolize=lines without libdw, heap images off
 * the ELF backend.
 *
 * Built with TEST_PLATFORM_ELF / TEST_PLATFORM_GENERIC / TEST_PLATFORM_DARWIN
 * and TEST_HAVE_LINES by tests/meson.build; linked with export_dynamic so
 * that dladdr() can name the exported sites. */
#include "helpers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/sys.h>

#include "profile.pb-c.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tpl, mp_sys_mimalloc);

#define NBLOCKS 100
#define BLOCK   64 /* >= 40 bytes: sampled with weight 1 at a 1-byte interval */

static void observe(void) { tpl_dealloc(tpl_alloc(16, 8), 16, 8); }

/* Exported sites (in the dynamic symbol table: export_dynamic). */
__attribute__((noinline)) void *platform_site_alloc(size_t n)
{
    void *p = tpl_alloc(n, 16);
    TEST_NO_TAIL(p);
    return p;
}

__attribute__((noinline)) void platform_caller(void **out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = platform_site_alloc(BLOCK);
    TEST_NO_TAIL(out);
}

/* A static site: not in the dynamic symbol table. Only a symbol table of
 * the file (ELF backend) can name it; dladdr() must not name it after the
 * exported function that precedes it. */
__attribute__((noinline)) static void *platform_static_site(size_t n)
{
    void *p = tpl_alloc(n, 16);
    TEST_NO_TAIL(p);
    return p;
}

static void free_all(void **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tpl_dealloc(v[i], BLOCK, 16);
}

static Perftools__Profiles__Profile *report(mp_profiler *p)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report(p, &buf, &len);
    cr_assert_eq(st, MP_PROF_OK, "report: %s", mp_prof_strerror(st));
    Perftools__Profiles__Profile *prof = perftools__profiles__profile__unpack(NULL, len, buf);
    cr_assert_not_null(prof, "the report decodes");
    mp_prof_buffer_free(buf);
    return prof;
}

static const Perftools__Profiles__Location *location(const Perftools__Profiles__Profile *p,
                                                     uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

/* The function name of a location's outermost line, "" when none. */
static const char *loc_name(const Perftools__Profiles__Profile *p, uint64_t id)
{
    const Perftools__Profiles__Location *l = location(p, id);
    cr_assert_not_null(l);
    if (l->n_line == 0)
        return "";
    uint64_t fid = l->line[l->n_line - 1]->function_id;
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == fid)
            return p->string_table[p->function[i]->name];
    return "";
}

static int value_index(const Perftools__Profiles__Profile *p, const char *type)
{
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (strcmp(p->string_table[p->sample_type[i]->type], type) == 0)
            return (int)i;
    return -1;
}

static mp_prof_config functions_config(void)
{
    mp_prof_config c = test_config(1, 7);
    c.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    return c;
}

/* A running session with symbolize=functions (the allocator observed). */
static mp_profiler *start_functions(void)
{
    observe();
    mp_prof_config c = functions_config();
    return test_start(&c);
}

/* Frees a decoded report, the test's blocks and the session. */
static void finish(Perftools__Profiles__Profile *prof, void **v, mp_profiler *p)
{
    perftools__profiles__profile__free_unpacked(prof, NULL);
    free_all(v, NBLOCKS);
    mp_profiler_free(p);
}

Test(platform, sessions_reports_and_stacks, .timeout = 60)
{
    mp_profiler *p = start_functions();
    void *v[NBLOCKS];
    platform_caller(v, NBLOCKS);
    Perftools__Profiles__Profile *prof = report(p);
    int inuse = value_index(prof, "inuse_objects");
    cr_assert_geq(inuse, 0);
    int64_t site_objects = 0;
    size_t site_samples = 0;
    for (size_t i = 0; i < prof->n_sample; i++) {
        const Perftools__Profiles__Sample *s = prof->sample[i];
        cr_assert_gt(s->n_location_id, 0, "every sample has a stack");
        const char *leaf = loc_name(prof, s->location_id[0]);
        /* The profiler's own frames (hooks, capture) are cut by address. */
        cr_assert(strncmp(leaf, "mp_", 3) != 0 && strncmp(leaf, "tpl_", 4) != 0 &&
                      strcmp(leaf, "backtrace") != 0 && strcmp(leaf, "unw_backtrace") != 0,
                  "profiler frame %s at the top of a stack", leaf);
        if (strcmp(leaf, "platform_site_alloc") != 0)
            continue;
        /* A real stack, not one frame: the caller is next. */
        cr_assert_geq(s->n_location_id, 2);
        cr_assert_str_eq(loc_name(prof, s->location_id[1]), "platform_caller");
        site_objects += s->value[inuse];
        site_samples++;
    }
    cr_assert_gt(site_samples, 0, "the exported site is named at the top of its stacks");
    cr_assert_eq(site_objects, NBLOCKS, "live objects of the site: %lld", (long long)site_objects);
    finish(prof, v, p);
}

Test(platform, mappings_are_what_the_backend_promises, .timeout = 60)
{
    mp_profiler *p = start_functions();
    void *v[NBLOCKS];
    platform_caller(v, NBLOCKS);
    Perftools__Profiles__Profile *prof = report(p);
#if TEST_PLATFORM_GENERIC
    /* No loader enumeration: no mapping, and no location claims one. */
    cr_assert_eq(prof->n_mapping, 0);
    for (size_t i = 0; i < prof->n_location; i++)
        cr_assert_eq(prof->location[i]->mapping_id, 0);
#else
    /* mapping[0] is the main program, with its build-id (GNU note or
     * LC_UUID) when it has one; every sampled address lies in its mapping. */
    cr_assert_geq(prof->n_mapping, 1);
    cr_assert_eq(prof->mapping[0]->id, 1);
    for (size_t i = 0; i < prof->n_location; i++) {
        const Perftools__Profiles__Location *l = prof->location[i];
        if (l->mapping_id == 0)
            continue;
        cr_assert_leq(l->mapping_id, prof->n_mapping);
        const Perftools__Profiles__Mapping *m = prof->mapping[l->mapping_id - 1];
        cr_assert(l->address >= m->memory_start && l->address < m->memory_limit);
    }
#if TEST_PLATFORM_DARWIN
    cr_assert_eq(strlen(prof->string_table[prof->mapping[0]->build_id]), 32, "LC_UUID");
#endif
#endif
    finish(prof, v, p);
}

Test(platform, names_are_right_or_absent, .timeout = 60)
{
    mp_profiler *p = start_functions();
    void *v[NBLOCKS];
    for (size_t i = 0; i < NBLOCKS; i++)
        v[i] = platform_static_site(BLOCK);
    Perftools__Profiles__Profile *prof = report(p);
    size_t seen = 0;
    for (size_t i = 0; i < prof->n_sample; i++) {
        const Perftools__Profiles__Sample *s = prof->sample[i];
        const Perftools__Profiles__Location *l = location(prof, s->location_id[0]);
        cr_assert_not_null(l);
        uintptr_t a = (uintptr_t)l->address;
        if (a <= (uintptr_t)&platform_static_site || a > (uintptr_t)&platform_static_site + 256)
            continue; /* not (obviously) inside the static site */
        const char *name = loc_name(prof, l->id);
#if TEST_PLATFORM_ELF
        cr_assert_str_eq(name, "platform_static_site");
#else
        cr_assert(name[0] == '\0' || strcmp(name, "platform_static_site") == 0,
                  "a static function was named %s", name);
#endif
        seen++;
    }
    cr_assert_gt(seen, 0, "the static site's samples were found by address");
    finish(prof, v, p);
}

Test(platform, lines_supported_or_refused, .timeout = 60)
{
    observe();
    mp_prof_config c = functions_config();
    c.symbolize = MP_PROF_SYMBOLIZE_LINES;
    mp_profiler *p = (mp_profiler *)0x1;
    mp_prof_status st = mp_profiler_start(&c, &p);
#if TEST_HAVE_LINES
    cr_assert_eq(st, MP_PROF_OK);
    mp_profiler_free(p);
#else
    cr_assert_eq(st, MP_PROF_E_UNSUPPORTED, "%s", mp_prof_strerror(st));
    cr_assert_eq(p, (mp_profiler *)0x1, "*out untouched");
    cr_assert_not_null(strstr(mp_prof_strerror(st), "not supported"));
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    cr_assert_not(s.active, "a refused start claims nothing");
#endif
    /* The defaults never ask for what the build cannot do. */
    p = NULL;
    cr_assert_eq(mp_profiler_start(NULL, &p), MP_PROF_OK);
    mp_profiler_free(p);
}

Test(platform, heap_images_supported_or_refused, .timeout = 60)
{
    mp_profiler *p = start_functions();
    void *v[NBLOCKS];
    platform_caller(v, NBLOCKS);
    char path[] = "/tmp/mimprof-platform-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    mp_prof_status st = mp_profiler_write_image(p, path);
    struct stat sb;
#if TEST_PLATFORM_ELF
    cr_assert_eq(st, MP_PROF_OK, "%s", mp_prof_strerror(st));
    cr_assert_eq(stat(path, &sb), 0);
    unlink(path);
#else
    cr_assert_eq(st, MP_PROF_E_UNSUPPORTED, "%s", mp_prof_strerror(st));
    cr_assert_neq(stat(path, &sb), 0, "nothing written");
#endif
    /* The session is unaffected either way. */
    Perftools__Profiles__Profile *prof = report(p);
    cr_assert_gt(prof->n_sample, 0);
    finish(prof, v, p);
}
