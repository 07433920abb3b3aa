/* Loaded objects and their executable segments (see maps.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "maps.h"

#if defined(__has_include)
#if __has_include(<link.h>)
#define MP_HAVE_DL_ITERATE_PHDR 1
#endif
#endif

#ifdef MP_HAVE_DL_ITERATE_PHDR
#include <elf.h>
#include <link.h>
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((unused)) static uintptr_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uintptr_t)p : 4096;
}

void mp_maps_init(mp_maps *m) { memset(m, 0, sizeof *m); }

static void obj_free(mp_obj *o)
{
    if (o == NULL)
        return;
    free(o->path);
    free(o->sym_path);
    free(o->segs);
    free(o);
}

static void drop(mp_maps *m, mp_obj *o)
{
    if (m->on_drop)
        m->on_drop(o, m->on_drop_arg);
    obj_free(o);
}

void mp_maps_destroy(mp_maps *m)
{
    for (size_t i = 0; i < m->nobjs; i++)
        drop(m, m->objs[i]);
    free(m->objs);
    free(m->index);
    memset(m, 0, sizeof *m);
}

static int ref_cmp(const void *a, const void *b)
{
    const mp_map_ref *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static bool rebuild_index(mp_maps *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nobjs; i++)
        n += m->objs[i]->nsegs;
    mp_map_ref *idx = malloc((n ? n : 1) * sizeof *idx);
    if (idx == NULL)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < m->nobjs; i++)
        for (size_t j = 0; j < m->objs[i]->nsegs; j++) {
            idx[k].start = m->objs[i]->segs[j].start;
            idx[k].limit = m->objs[i]->segs[j].limit;
            idx[k].obj = (uint32_t)i;
            idx[k].seg = (uint32_t)j;
            idx[k].id = (uint32_t)(k + 1);
            k++;
        }
    qsort(idx, n, sizeof *idx, ref_cmp);
    free(m->index);
    m->index = idx;
    m->nindex = n;
    return true;
}

#ifdef MP_HAVE_DL_ITERATE_PHDR
size_t mp_maps_image_build_id(uintptr_t base, const void *phdrs, size_t phnum,
                              uint8_t out[MP_ELF_BUILD_ID_MAX])
{
    const ElfW(Phdr) *ph = phdrs;
    for (size_t i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_memsz == 0)
            continue;
        /* Note segments lie inside a readable PT_LOAD of the loaded image. */
        size_t n = mp_elf_notes_build_id((const void *)(base + ph[i].p_vaddr),
                                         (size_t)ph[i].p_memsz, ph[i].p_align, out);
        if (n)
            return n;
    }
    return 0;
}

/* ---- reading the loader's list ---- */

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
        c[2] = 1;
    }
    return 1; /* the counters are the same in every entry: stop */
}

typedef struct scan {
    mp_obj **found;
    size_t n, cap;
    bool first;
    bool nomem;
    char exe[PATH_MAX];
} scan;

static mp_obj *make_obj(const struct dl_phdr_info *info, bool is_main, const char *exe)
{
    uintptr_t pg = page_size();
    size_t nexec = 0;
    for (size_t i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X))
            nexec++;
    if (nexec == 0)
        return NULL;
    mp_obj *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->segs = calloc(nexec, sizeof *o->segs);
    if (o->segs == NULL) {
        free(o);
        return NULL;
    }
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        uintptr_t limit = start + ph->p_memsz;
        mp_map_seg *s = &o->segs[o->nsegs++];
        s->start = start & ~(pg - 1);
        s->limit = (limit + pg - 1) & ~(pg - 1);
        s->file_offset = ph->p_offset & ~(uint64_t)(pg - 1);
    }
    o->base = info->dlpi_addr;
    o->is_main = is_main;
    o->loaded = true;

    const char *name = info->dlpi_name;
    char real[PATH_MAX];
    if (is_main && exe[0]) {
        o->path = strdup(exe);
        o->has_file = true;
    } else if (name != NULL && name[0] != '\0' && realpath(name, real) != NULL) {
        o->path = strdup(real);
        o->has_file = true;
    } else if (name != NULL && strstr(name, "vdso") != NULL) {
        o->path = strdup("[vdso]");
    } else {
        o->path = strdup(name != NULL && name[0] ? name : "[unknown]");
    }
    if (o->path == NULL) {
        obj_free(o);
        return NULL;
    }
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    size_t idlen = mp_maps_image_build_id(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, id);
    mp_elf_hex(id, idlen, o->build_id);
    return o;
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    scan *s = arg;
    bool is_main = s->first;
    s->first = false;
    if (s->nomem)
        return 1;
    mp_obj *o = make_obj(info, is_main, s->exe);
    if (o == NULL)
        return 0; /* no executable segment (or no memory: the object is missed) */
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 32;
        mp_obj **f = realloc(s->found, nc * sizeof *f);
        if (f == NULL) {
            obj_free(o);
            s->nomem = true;
            return 1;
        }
        s->found = f;
        s->cap = nc;
    }
    s->found[s->n++] = o;
    return 0;
}

static bool same_obj(const mp_obj *a, const mp_obj *b)
{
    return a->base == b->base && a->nsegs == b->nsegs && a->segs[0].start == b->segs[0].start &&
           strcmp(a->path, b->path) == 0 && strcmp(a->build_id, b->build_id) == 0;
}

static bool overlaps(const mp_obj *a, const mp_obj *b)
{
    for (size_t i = 0; i < a->nsegs; i++)
        for (size_t j = 0; j < b->nsegs; j++)
            if (a->segs[i].start < b->segs[j].limit && b->segs[j].start < a->segs[i].limit)
                return true;
    return false;
}

bool mp_maps_refresh(mp_maps *m)
{
    if (m->fixed)
        return true;
    unsigned long long c[3] = {0, 0, 0};
    dl_iterate_phdr(counters_cb, c);
    if (m->valid && c[2] && c[0] == m->adds && c[1] == m->subs)
        return true;

    scan s;
    memset(&s, 0, sizeof s);
    s.first = true;
    ssize_t len = readlink("/proc/self/exe", s.exe, sizeof s.exe - 1);
    s.exe[len > 0 ? (size_t)len : 0] = '\0';
    dl_iterate_phdr(scan_cb, &s);
    if (s.nomem || s.n == 0) {
        for (size_t i = 0; i < s.n; i++)
            obj_free(s.found[i]);
        free(s.found);
        return s.n == 0 && !s.nomem && m->valid; /* keep the old state */
    }

    size_t total = s.n + m->nobjs;
    mp_obj **next = malloc(total * sizeof *next);
    bool *kept = calloc(m->nobjs ? m->nobjs : 1, sizeof *kept);
    if (next == NULL || kept == NULL) {
        free(next);
        free(kept);
        for (size_t i = 0; i < s.n; i++)
            obj_free(s.found[i]);
        free(s.found);
        return false;
    }
    m->refreshes++;
    size_t n = 0;
    /* Loaded objects, in the loader's order (the main binary first). */
    for (size_t i = 0; i < s.n; i++) {
        mp_obj *o = s.found[i];
        for (size_t j = 0; j < m->nobjs; j++) {
            if (!kept[j] && same_obj(m->objs[j], o)) {
                kept[j] = true;
                obj_free(o);
                o = m->objs[j];
                o->loaded = true;
                break;
            }
        }
        o->seen_refresh = m->refreshes;
        next[n++] = o;
    }
    size_t nloaded = n;
    /* Objects that went away: retained unless a loaded object now overlaps
     * them (the addresses mean something else now) or too many are kept. */
    size_t retained = 0;
    for (size_t j = 0; j < m->nobjs; j++) {
        if (kept[j])
            continue;
        mp_obj *o = m->objs[j];
        if (o->loaded)
            m->unloads++;
        o->loaded = false;
        bool clash = false;
        for (size_t i = 0; i < nloaded && !clash; i++)
            clash = overlaps(o, next[i]);
        for (size_t i = nloaded; i < n && !clash; i++)
            clash = overlaps(o, next[i]);
        if (clash || retained >= MP_MAPS_MAX_RETAINED) {
            drop(m, o);
            continue;
        }
        next[n++] = o;
        retained++;
    }
    free(kept);
    free(s.found);
    free(m->objs);
    m->objs = next;
    m->nobjs = n;
    m->cap = total;
    m->adds = c[0];
    m->subs = c[1];
    m->valid = c[2] != 0;
    if (!rebuild_index(m)) {
        m->valid = false; /* retried at the next report */
        free(m->index);
        m->index = NULL;
        m->nindex = 0;
        return false;
    }
    return true;
}

#else /* no dl_iterate_phdr (macOS): no mappings; reports carry addresses only */

size_t mp_maps_image_build_id(uintptr_t base, const void *phdrs, size_t phnum,
                              uint8_t out[MP_ELF_BUILD_ID_MAX])
{
    (void)base;
    (void)phdrs;
    (void)phnum;
    (void)out;
    return 0;
}

bool mp_maps_refresh(mp_maps *m)
{
    m->valid = true;
    return true;
}

#endif

bool mp_maps_add(mp_maps *m, mp_obj *o)
{
    if (m->nobjs == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        mp_obj **v = realloc(m->objs, nc * sizeof *v);
        if (v == NULL)
            return false;
        m->objs = v;
        m->cap = nc;
    }
    m->objs[m->nobjs++] = o;
    if (!rebuild_index(m)) {
        m->nobjs--;
        return false;
    }
    m->fixed = true;
    m->valid = true;
    return true;
}

const mp_map_ref *mp_maps_lookup(const mp_maps *m, uintptr_t addr)
{
    size_t lo = 0, hi = m->nindex;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const mp_map_ref *r = &m->index[mid];
        if (addr < r->start)
            hi = mid;
        else if (addr >= r->limit)
            lo = mid + 1;
        else
            return r;
    }
    return NULL;
}

size_t mp_maps_count(const mp_maps *m) { return m->nindex; }
