/* SPDX-License-Identifier: MIT */
/* What the writer refuses, with a sentence naming the type, object index
 * and unit; and that a refusal never leaves a file under the final name. */
#define _GNU_SOURCE
#include "fixture.h"

#include "internal.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct fx f;
static mp_img_heap *h;

static void setup(void)
{
    fx_init(&f, 0);
    cr_assert_eq(mp_img_heap_new(f.reg, &h, NULL), MP_IMG_OK);
}

static void teardown(void)
{
    mp_img_heap_free(h);
    fx_free(&f);
}

TestSuite(refusal, .init = setup, .fini = teardown);

static void no_trace_flag(void *obj, void *ctx)
{
    (void)ctx;
    cr_assert_eq(img_hdr(obj)->flags & IMG_TRACED, 0, "trace flag left behind");
}

/* Writes, expects `status`, and checks nothing was left under the name. */
static void refused(mp_img_status status, const char *expect)
{
    char *path = fx_path("refused.mpimg");
    unlink(path);
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, path, &err), status, "got: %s", err.detail);
    cr_assert_eq(err.status, status);
    if (expect)
        cr_assert_str_eq(err.detail, expect);
    cr_assert_neq(access(path, F_OK), 0, "a refused write left a file");
    img_chain_walk(h, no_trace_flag, NULL);
    free(path);
}

Test(refusal, unnameable_foreign_value_word_for_word)
{
    mp_img_word *list = mp_img_alloc(h, f.node, 2);
    mp_img_word *fn = mp_img_alloc(h, f.fn, 2);
    list[0] = (mp_img_word)fn;
    static int not_a_function;
    fn[0] = (mp_img_word)&not_a_function + 1; /* inside a variable: no symbol starts there */
    mp_img_root_set(h, "main", list, NULL);
    char expect[256];
    snprintf(expect, sizeof expect,
             "object 2 (type 'fn') unit 0: foreign value 0x%lx cannot be named: it is not nil, "
             "a standard stream or the start of an exported symbol",
             (unsigned long)fn[0]);
    refused(MP_IMG_E_UNNAMEABLE, expect);
}

Test(refusal, foreign_without_a_policy_word_for_word)
{
    mp_img_word *raw = mp_img_alloc(h, f.raw, 1);
    raw[0] = 0x1000;
    mp_img_root_set(h, "raw", raw, NULL);
    refused(MP_IMG_E_UNNAMEABLE, "object 1 (type 'raw') unit 0: foreign value 0x1000 cannot be "
                                 "named: the type declares no foreign policy");
}

Test(refusal, externalise_refusal_and_code_outside_modules)
{
    mp_img_word *hd = mp_img_alloc(h, f.handle, 1);
    hd[0] = 5000; /* the fixture names handles below 1000 only */
    mp_img_root_set(h, "h", hd, NULL);
    refused(MP_IMG_E_UNNAMEABLE, "object 1 (type 'handle') unit 0: foreign value 0x1388 cannot "
                                 "be named: the type's externalise callback refused it");
    hd[0] = 5;
    void *heap_mem = malloc(64);
    mp_img_word *code = mp_img_alloc(h, f.code, 2);
    code[0] = (mp_img_word)heap_mem;
    mp_img_root_set(h, "c", code, NULL);
    char expect[256];
    snprintf(expect, sizeof expect,
             "object 1 (type 'code') unit 0: foreign value 0x%lx cannot be named: no loaded "
             "module contains it",
             (unsigned long)code[0]);
    refused(MP_IMG_E_UNNAMEABLE, expect);
    free(heap_mem);
}

Test(refusal, missing_shape_word_for_word)
{
    mp_img_word *list = mp_img_alloc(h, f.node, 2);
    list[1] = (mp_img_word)mp_img_alloc(h, f.blob, 3);
    mp_img_root_set(h, "main", list, NULL);
    refused(MP_IMG_E_NO_SHAPE, "object 2 (type 'blob'): the type has no shape; declare one, or "
                               "a shape callback if its instances differ");
}

Test(refusal, references_not_on_the_heap)
{
    mp_img_word *a = mp_img_alloc(h, f.node, 2);
    mp_img_root_set(h, "a", a, NULL);
    /* memory the heap does not own */
    void *m = malloc(32);
    a[0] = (mp_img_word)m;
    char expect[256];
    snprintf(expect, sizeof expect,
             "object 1 (type 'node') unit 0: reference 0x%lx is not an object on this heap",
             (unsigned long)a[0]);
    refused(MP_IMG_E_NOT_ON_HEAP, expect);
    free(m);
    /* an interior pointer */
    a[0] = (mp_img_word)(a + 1);
    refused(MP_IMG_E_NOT_ON_HEAP, NULL);
    /* another heap's object */
    mp_img_heap *other;
    mp_img_heap_new(f.reg, &other, NULL);
    a[0] = (mp_img_word)mp_img_alloc(other, f.leaf, 1);
    refused(MP_IMG_E_NOT_ON_HEAP, NULL);
    mp_img_heap_free(other);
    /* a root */
    a[0] = 0;
    int local;
    mp_img_root_set(h, "b", &local, NULL);
    snprintf(expect, sizeof expect, "root 'b': 0x%lx is not an object on this heap",
             (unsigned long)(uintptr_t)&local);
    refused(MP_IMG_E_NOT_ON_HEAP, expect);
}

Test(refusal, contradicted_shapes)
{
    mp_img_word *v = mp_img_alloc(h, f.vec, 3);
    v[0] = 3; /* claims 3 units after slot 0, has 2 */
    mp_img_root_set(h, "v", v, NULL);
    refused(MP_IMG_E_SHAPE,
            "object 1 (type 'vec'): its slot-0 count 3 exceeds the 2 units allocated after it");
    v[0] = 2;
    mp_img_word *var = mp_img_alloc(h, f.var, 2);
    var[0] = 9; /* the per-object shape callback refuses it */
    v[1] = (mp_img_word)var;
    refused(MP_IMG_E_SHAPE, "object 2 (type 'var'): its shape callback refused the instance");
}

Test(refusal, failed_write_keeps_the_existing_file)
{
    char *path = fx_path("keep.mpimg");
    cr_assert_eq(fx_write(path, "previous", 8), 0);
    mp_img_word *b = mp_img_alloc(h, f.blob, 1);
    mp_img_root_set(h, "b", b, NULL);
    cr_assert_eq(mp_img_write(h, path, NULL), MP_IMG_E_NO_SHAPE);
    size_t len;
    unsigned char *data = fx_read(path, &len);
    cr_assert_eq(len, 8);
    cr_assert_eq(memcmp(data, "previous", 8), 0);
    free(data);
    /* And no temporary is left in the directory. */
    DIR *d = opendir(fx_tmpdir());
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert_neq(strncmp(e->d_name, "keep.mpimg.", 11), 0, "left %s", e->d_name);
    closedir(d);
    free(path);
}

Test(refusal, io_errors_are_reported)
{
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, "/nonexistent-dir/x.mpimg", &err), MP_IMG_E_IO);
    cr_assert(strstr(err.detail, "/nonexistent-dir/x.mpimg") != NULL, "%s", err.detail);
    mp_img_heap *out;
    cr_assert_eq(mp_img_load(f.reg, "/nonexistent-dir/x.mpimg", &out, &err), MP_IMG_E_IO);
    cr_assert_null(out);
}

Test(refusal, a_write_failing_midway_leaves_nothing)
{
    /* I/O fault injection: a child whose files may not exceed 64 KiB writes
     * a 2 MiB image; write(2) fails with EFBIG part way through. */
    mp_img_root_set(h, "list", fx_list(h, &f, 50000), NULL);
    char *path = fx_path("midway.mpimg");
    cr_assert_eq(fx_write(path, "previous", 8), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {65536, 65536};
        setrlimit(RLIMIT_FSIZE, &lim);
        mp_img_error err;
        mp_img_status st = mp_img_write(h, path, &err);
        _exit(st == MP_IMG_E_IO && strstr(err.detail, "File too large") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the write did not fail with EFBIG");
    size_t len;
    unsigned char *data = fx_read(path, &len);
    cr_assert_eq(len, 8, "the previous file was replaced");
    free(data);
    DIR *d = opendir(fx_tmpdir());
    for (struct dirent *e; (e = readdir(d));)
        cr_assert_neq(strncmp(e->d_name, "midway.mpimg.", 13), 0, "left %s", e->d_name);
    closedir(d);
    free(path);
}

/* A shape callback that breaks the rules: it allocates on the heap being
 * written and links the new object in. The write must refuse, not follow a
 * reference the trace's tables do not cover. */
static mp_img_heap *rogue_heap;
static const mp_img_type *rogue_type;
static bool rogue_shape(void *ctx, const mp_img_word *obj, size_t units, mp_img_shape *out)
{
    (void)ctx;
    mp_img_word *fresh = mp_img_alloc(rogue_heap, rogue_type, 2);
    ((mp_img_word *)obj)[1] = (mp_img_word)fresh;
    *out = (mp_img_shape){false, (uint32_t)units, 0, 0};
    return true;
}

Test(refusal, objects_allocated_during_the_write)
{
    mp_img_registry *reg;
    mp_img_registry_new(0, &reg, NULL);
    mp_img_type_register(reg, "rogue", &(mp_img_type_options){.shape_of = rogue_shape}, &rogue_type,
                         NULL);
    mp_img_heap_new(reg, &rogue_heap, NULL);
    mp_img_word *a = mp_img_alloc(rogue_heap, rogue_type, 2);
    mp_img_root_set(rogue_heap, "a", a, NULL);
    char *path = fx_path("rogue.mpimg");
    mp_img_error err;
    cr_assert_eq(mp_img_write(rogue_heap, path, &err), MP_IMG_E_ARGUMENT, "%s", err.detail);
    cr_assert_str_eq(err.detail,
                     "object 1 unit 1: references an object allocated during the write");
    cr_assert_neq(access(path, F_OK), 0);
    free(path);
    mp_img_heap_free(rogue_heap);
    mp_img_registry_free(reg);
}
