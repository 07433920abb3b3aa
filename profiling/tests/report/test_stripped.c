/* SPDX-License-Identifier: MIT */
/* A stripped build (strip --strip-all copy of the probe): exported
 * functions are named from .dynsym, the others are addresses whose
 * mapping carries the build-id `readelf -n` prints, and the classifier
 * reports the drop in quality. */
#include <criterion/criterion.h>

#include <mimprof/profiling.h>

#include "util.h"

typedef struct run {
    ut_prof *p;
    uint8_t *raw;
    size_t len;
    unsigned long alpha, gamma, hook;
    int quality;
} run;

/* Runs `exe` with the environment assignments `env` (a shell prefix, may
 * be "") and symbolization `mode` ("lines" or "functions"). */
static run run_probe_with(const char *env, const char *exe, const char *mode)
{
    run r = {0};
    char *dir = ut_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/probe.pb", dir);
    int st;
    char *out = ut_run(&st, "%s '%s' '%s' %s", env, exe, path, mode);
    cr_assert_eq(st, 0, "%s failed: %s", exe, out ? out : "");
    cr_assert_eq(sscanf(out, "alpha=%lx gamma=%lx hook=%lx quality=%d", &r.alpha, &r.gamma, &r.hook,
                        &r.quality),
                 4, "%s", out);
    free(out);
    r.raw = ut_read(path, &r.len);
    cr_assert_not_null(r.raw);
    r.p = ut_decode(r.raw, r.len);
    cr_assert_not_null(r.p);
    free(ut_run(&st, "rm -rf '%s'", dir));
    free(dir);
    return r;
}

static run run_probe(const char *exe) { return run_probe_with("", exe, "lines"); }

static const Perftools__Profiles__Location *at(const ut_prof *p, unsigned long pc)
{
    const Perftools__Profiles__Location *l = ut_loc_at(p, pc - 1);
    cr_assert_not_null(l);
    return l;
}

static void build_id_of(const char *path, char *out, size_t cap)
{
    int st;
    char *o = ut_run(&st, "'%s' -n '%s' | sed -n 's/.*Build ID: *\\([0-9a-f]*\\).*/\\1/p'", READELF,
                     path);
    o[strcspn(o, "\n")] = '\0';
    snprintf(out, cap, "%s", o);
    free(o);
}

Test(report_stripped, names_drop_to_dynsym_and_addresses)
{
    run full = run_probe(PROBE_PATH);
    run bare = run_probe(PROBE_STRIPPED_PATH);

    /* Unstripped: every site named. */
    cr_assert_str_eq(ut_line_fn(full.p, at(full.p, full.alpha), 0), "report_site_alpha");
    cr_assert_str_eq(ut_line_fn(full.p, at(full.p, full.hook), 0), "mp_prof_sample_hook");

    /* Stripped: the exported function from .dynsym; the others none. */
    const Perftools__Profiles__Location *a = at(bare.p, bare.alpha);
    cr_assert_str_eq(ut_line_fn(bare.p, a, 0), "report_site_alpha");
    const Perftools__Profiles__Location *g = at(bare.p, bare.gamma);
    const Perftools__Profiles__Location *h = at(bare.p, bare.hook);
    cr_assert_eq(g->n_line, 0, "no name for an unexported function");
    cr_assert_eq(h->n_line, 0);
    /* ... but an address inside a mapping with the file's build-id. */
    const Perftools__Profiles__Mapping *m = ut_map(bare.p, h->mapping_id);
    cr_assert_not_null(m);
    cr_assert(h->address >= m->memory_start && h->address < m->memory_limit);
    char want[256];
    build_id_of(PROBE_STRIPPED_PATH, want, sizeof want);
    cr_assert_gt(strlen(want), 0);
    cr_assert_str_eq(ut_str(bare.p, m->build_id), want);
    cr_assert_not(m->has_functions);
    cr_assert_not(m->has_filenames);
    /* strip keeps the build-id: same as the unstripped binary's. */
    char want_full[256];
    build_id_of(PROBE_PATH, want_full, sizeof want_full);
    cr_assert_str_eq(want, want_full);

    /* The classifier sees the drop. */
    mp_prof_symbol_quality qf, qb;
    cr_assert_eq(mp_prof_classify_symbols(full.raw, full.len, &qf), MP_PROF_OK);
    cr_assert_eq(mp_prof_classify_symbols(bare.raw, bare.len, &qb), MP_PROF_OK);
#if MP_HAVE_LIBDW
    cr_assert_eq(qf, MP_PROF_QUALITY_FULL);
#else
    cr_assert_eq(qf, MP_PROF_QUALITY_FUNCTIONS);
#endif
    cr_assert_eq(qb, MP_PROF_QUALITY_PARTIAL, "1 of 3 frames named");
    cr_assert_lt(qb, qf);
    /* The encoder's own count agrees with the classifier. */
    cr_assert_eq(full.quality, (int)qf);
    cr_assert_eq(bare.quality, (int)qb);
    ut_free(full.p);
    ut_free(bare.p);
    free(full.raw);
    free(bare.raw);
}

/* A stripped binary whose separate debug file (objcopy --only-keep-debug)
 * sits under MIMPROF_DEBUG_ROOT/.build-id/xx/yyyy.debug, as Debian's -dbg
 * packages install them under /usr/lib/debug: its .symtab names the
 * unexported functions again, in `functions` mode too. */
Test(report_stripped, debug_file_by_build_id_restores_names)
{
    char id[256];
    build_id_of(PROBE_PATH, id, sizeof id);
    cr_assert_gt(strlen(id), 4);
    char *root = ut_tmpdir();
    int st;
    char *o = ut_run(&st,
                     "mkdir -p '%s/.build-id/%.2s' && '%s' --only-keep-debug '%s' "
                     "'%s/.build-id/%.2s/%s.debug'",
                     root, id, OBJCOPY, PROBE_PATH, root, id, id + 2);
    cr_assert_eq(st, 0, "%s", o);
    free(o);
    char env[4200];
    snprintf(env, sizeof env, "MIMPROF_DEBUG_ROOT='%s'", root);
    const char *modes[] = {"functions", "lines"};
    for (int i = 0; i < (MP_HAVE_LIBDW ? 2 : 1); i++) {
        run bare = run_probe_with("", PROBE_STRIPPED_PATH, modes[i]);
        run dbg = run_probe_with(env, PROBE_STRIPPED_PATH, modes[i]);
        cr_assert_eq(at(bare.p, bare.gamma)->n_line, 0, "%s: no debug file, no name", modes[i]);
        /* gamma's location: in `lines` mode the DWARF of the debug file adds
         * the inlined report_inlined_beta before it. */
        const Perftools__Profiles__Location *g = at(dbg.p, dbg.gamma);
        cr_assert_eq(g->n_line, i == 0 ? 1 : 2, "%s", modes[i]);
        cr_assert_str_eq(ut_line_fn(dbg.p, g, g->n_line - 1), "report_outer_gamma", "%s", modes[i]);
        if (i == 1)
            cr_assert_str_eq(ut_line_fn(dbg.p, g, 0), "report_inlined_beta");
        cr_assert_str_eq(ut_line_fn(dbg.p, at(dbg.p, dbg.hook), 0), "mp_prof_sample_hook", "%s",
                         modes[i]);
        cr_assert_gt(dbg.quality, bare.quality, "%s: the classifier sees the names", modes[i]);
        ut_free(bare.p);
        ut_free(dbg.p);
        free(bare.raw);
        free(dbg.raw);
    }
    free(ut_run(&st, "rm -rf '%s'", root));
    free(root);
}
