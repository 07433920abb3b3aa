/* SPDX-License-Identifier: MIT */
/* The macOS backend of the platform layer (platform.h): Mach-O images
 * through dyld's documented API (<mach-o/dyld.h>) and dladdr().
 *
 * Checked against the real declarations (cctools' <mach-o/loader.h>,
 * dyld's <mach-o/dyld.h> and <dlfcn.h>, xnu's <mach/vm_prot.h>) and the
 * behaviour of dyld's own sources (dladdr, MachOLoaded, the shared-cache
 * builder), compiled for arm64- and x86_64-apple-macos13; it cannot be
 * linked or run on the Linux machines where the rest is tested (the
 * generic backend is what `-Dplatform=generic` builds there). The macOS
 * job of the workflow builds it.
 *
 * - Objects: _dyld_image_count / _dyld_get_image_header /
 *   _dyld_get_image_vmaddr_slide / _dyld_get_image_name. The main program
 *   is the image whose filetype is MH_EXECUTE, not index 0: dyld4 lists
 *   DYLD_INSERT_LIBRARIES dylibs before it (it permutes index 0 back only
 *   for old x86_64 programs, normalizeImageIndex() in dyld's DyldAPIs.cpp);
 *   it is put first here. One mapping per executable LC_SEGMENT_64
 *   (initprot has VM_PROT_EXECUTE, i.e. __TEXT): start vmaddr + slide,
 *   limit start + vmsize, file offset fileoff; the build-id is the LC_UUID
 *   (its 16 bytes in order as lower-case hex; `dwarfdump --uuid` prints the
 *   same digits upper-case with dashes).
 *   Images of the dyld shared cache (MH_DYLIB_IN_CACHE in the header's
 *   flags, which dyld itself tests) have no file of their own: since
 *   macOS 11 none on disk, and the cache builder rewrites their segments'
 *   fileoff to offsets in the cache file. They keep their install name as
 *   path, has_file false, and as file offset the segment's offset in the
 *   image (vmaddr - __TEXT's vmaddr: 0 for __TEXT, as in the dylib).
 * - Change detection: the image count and a hash of the headers' addresses
 *   (no dyld add/remove callbacks: those cannot be unregistered).
 *   dyld's index-based calls are not atomic against a concurrent
 *   dlopen/dlclose; a header that vanished reads as NULL and is skipped,
 *   and the next report reads the list again (the fingerprint changed).
 * - Function names: dladdr() answers the nearest preceding nlist symbol
 *   of the address's section (external definitions, then local non-debug
 *   symbols; MachOLoaded::findClosestSymbol), without its leading
 *   underscore. In a stripped image, and in the shared cache (whose local
 *   symbols are moved out of the mapped symbol table), that is often
 *   another function's name. The name is kept only when the image's
 *   LC_FUNCTION_STARTS says the function containing the address starts
 *   exactly at dli_saddr; an image without function starts
 *   (ld -no_function_starts) gives no names.
 * - Not here: DWARF lines (no libdw on Mach-O: symbolize=lines is
 *   MP_PROF_E_UNSUPPORTED) and heap images (their code units are ELF
 *   build-id, path and offset, read back with the ELF reader:
 *   MP_PROF_E_UNSUPPORTED). */
#include "platform.h"

#include <dlfcn.h>
#include <limits.h>
#include <mach-o/dyld.h>
#include <mach-o/loader.h>
#include <stdlib.h>
#include <string.h>

#include "../report/maps.h"

static const mp_plat_caps caps = {
    .name = "darwin",
    .mappings = true,
    .build_ids = true,
    .elf_files = false,
    .heap_images = false,
    .whole_objects = true,
};

const mp_plat_caps *mp_plat_caps_get(void) { return &caps; }

/* ---- load commands ---- */

static const struct mach_header_64 *header64(const void *h)
{
    const struct mach_header_64 *m = h;
    return m != NULL && m->magic == MH_MAGIC_64 ? m : NULL;
}

/* The load command after `lc` (NULL: the first), or NULL at the end. */
static const struct load_command *next_command(const struct mach_header_64 *h,
                                               const struct load_command *lc, uint32_t *i)
{
    const uint8_t *first = (const uint8_t *)(h + 1);
    const uint8_t *end = first + h->sizeofcmds;
    const uint8_t *p;
    if (lc == NULL) {
        *i = 0;
        p = first;
    } else {
        p = (const uint8_t *)lc + lc->cmdsize;
        ++*i;
    }
    if (*i >= h->ncmds || p + sizeof(struct load_command) > end)
        return NULL;
    const struct load_command *c = (const struct load_command *)(const void *)p;
    if (c->cmdsize < sizeof *c || p + c->cmdsize > end)
        return NULL;
    return c;
}

static const struct segment_command_64 *segment(const struct mach_header_64 *h, const char *name)
{
    uint32_t i = 0;
    for (const struct load_command *lc = next_command(h, NULL, &i); lc != NULL;
         lc = next_command(h, lc, &i)) {
        if (lc->cmd != LC_SEGMENT_64 || lc->cmdsize < sizeof(struct segment_command_64))
            continue;
        const struct segment_command_64 *s = (const struct segment_command_64 *)(const void *)lc;
        if (strncmp(s->segname, name, sizeof s->segname) == 0)
            return s;
    }
    return NULL;
}

static const struct load_command *command(const struct mach_header_64 *h, uint32_t cmd,
                                          size_t min_size)
{
    uint32_t i = 0;
    for (const struct load_command *lc = next_command(h, NULL, &i); lc != NULL;
         lc = next_command(h, lc, &i))
        if (lc->cmd == cmd && lc->cmdsize >= min_size)
            return lc;
    return NULL;
}

/* The image's slide: its header sits at __TEXT's vmaddr + slide (also for
 * images of the shared cache). */
static bool image_slide(const struct mach_header_64 *h, intptr_t *slide)
{
    const struct segment_command_64 *text = segment(h, SEG_TEXT);
    if (text == NULL)
        return false;
    *slide = (intptr_t)((uintptr_t)h - (uintptr_t)text->vmaddr);
    return true;
}

/* MH_DYLIB_IN_CACHE: <mach-o/loader.h> of the macOS 11 SDK and later. */
#ifndef MH_DYLIB_IN_CACHE
#define MH_DYLIB_IN_CACHE 0x80000000u
#endif

/* Whether the image is part of the dyld shared cache (no file of its own;
 * segment fileoff values are offsets in the cache file). */
static bool in_shared_cache(const struct mach_header_64 *h)
{
    return (h->flags & MH_DYLIB_IN_CACHE) != 0;
}

/* ---- change detection ---- */

bool mp_plat_loader_counters(unsigned long long *adds, unsigned long long *subs)
{
    uint32_t n = _dyld_image_count();
    unsigned long long h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (unsigned long long)(uintptr_t)_dyld_get_image_header(i)) * 1099511628211ull;
    *adds = n;
    *subs = h;
    return true;
}

/* ---- the image list ---- */

static size_t exec_segments(const struct mach_header_64 *h, intptr_t slide, mp_map_seg *out,
                            size_t cap)
{
    const struct segment_command_64 *text = segment(h, SEG_TEXT);
    bool cached = in_shared_cache(h) && text != NULL;
    size_t n = 0;
    uint32_t i = 0;
    for (const struct load_command *lc = next_command(h, NULL, &i); lc != NULL;
         lc = next_command(h, lc, &i)) {
        if (lc->cmd != LC_SEGMENT_64 || lc->cmdsize < sizeof(struct segment_command_64))
            continue;
        const struct segment_command_64 *s = (const struct segment_command_64 *)(const void *)lc;
        if (!(s->initprot & VM_PROT_EXECUTE) || s->vmsize == 0)
            continue;
        if (out != NULL && n < cap) {
            out[n].start = (uintptr_t)s->vmaddr + (uintptr_t)slide;
            out[n].limit = out[n].start + (uintptr_t)s->vmsize;
            out[n].file_offset = cached ? s->vmaddr - text->vmaddr : s->fileoff;
        }
        n++;
    }
    return n;
}

static mp_obj *make_obj(uint32_t index)
{
    const struct mach_header_64 *h = header64(_dyld_get_image_header(index));
    if (h == NULL)
        return NULL; /* gone (a concurrent dlclose) or not a 64-bit image */
    intptr_t slide = _dyld_get_image_vmaddr_slide(index);
    size_t nexec = exec_segments(h, slide, NULL, 0);
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
    o->nsegs = exec_segments(h, slide, o->segs, nexec);
    o->base = (uintptr_t)slide;
    o->is_main = h->filetype == MH_EXECUTE;
    o->loaded = true;
    o->native_names = true;

    const char *name = _dyld_get_image_name(index);
    char real[PATH_MAX];
    if (!in_shared_cache(h) && name != NULL && name[0] != '\0' && realpath(name, real) != NULL) {
        o->path = strdup(real);
        o->has_file = true;
    } else {
        o->path = strdup(name != NULL && name[0] != '\0' ? name : "[unknown]");
    }
    if (o->path == NULL) {
        mp_obj_free(o);
        return NULL;
    }
    const struct uuid_command *u =
        (const struct uuid_command *)(const void *)command(h, LC_UUID, sizeof(struct uuid_command));
    if (u != NULL)
        mp_elf_hex(u->uuid, sizeof u->uuid, o->build_id);
    return o;
}

bool mp_plat_scan_objects(mp_obj ***out, size_t *n)
{
    uint32_t count = _dyld_image_count();
    mp_obj **found = calloc(count ? count : 1, sizeof *found);
    if (found == NULL)
        return false;
    size_t k = 0;
    bool have_main = false;
    for (uint32_t i = 0; i < count; i++) {
        mp_obj *o = make_obj(i);
        if (o == NULL)
            continue;
        if (o->is_main && have_main)
            o->is_main = false; /* a dlopen()ed executable: not the program */
        if (o->is_main) {       /* the main program first (maps.h) */
            have_main = true;
            memmove(found + 1, found, k * sizeof *found);
            found[0] = o;
            k++;
        } else {
            found[k++] = o;
        }
    }
    *out = found;
    *n = k;
    return true;
}

/* ---- the image holding an address ---- */

size_t mp_plat_object_code(uintptr_t addr, uintptr_t *starts, uintptr_t *ends, size_t cap,
                           bool *is_main)
{
    *is_main = false;
    Dl_info info;
    if (dladdr((const void *)addr, &info) == 0 || info.dli_fbase == NULL)
        return 0;
    const struct mach_header_64 *h = header64(info.dli_fbase);
    intptr_t slide;
    if (h == NULL || !image_slide(h, &slide))
        return 0;
    mp_map_seg segs[16];
    size_t n = exec_segments(h, slide, segs, 16);
    if (n > cap)
        n = cap;
    if (n > 16)
        n = 16;
    for (size_t i = 0; i < n; i++) {
        starts[i] = segs[i].start;
        ends[i] = segs[i].limit;
    }
    *is_main = h->filetype == MH_EXECUTE;
    return n;
}

/* ---- function names ---- */

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end && shift < 64) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
        shift += 7;
    }
    return false;
}

/* The start of the function containing `addr` in image `h`, from
 * LC_FUNCTION_STARTS: ULEB128 deltas ended by 0, the first from the image's
 * mach header (which is where __TEXT's vmaddr + slide lands), as dyld's
 * MachOLoaded::findClosestFunctionStart reads them. The table is
 * linkedit_data_command.dataoff, a file offset into __LINKEDIT; in memory
 * it is at __LINKEDIT's vmaddr + slide + (dataoff - __LINKEDIT's fileoff)
 * (MachOLoaded::getLinkEditContent). That also holds in the shared cache,
 * whose builder keeps the function starts and points every dylib's
 * __LINKEDIT at the merged one with offsets rewritten to match. False when
 * the image has none or `addr` precedes them. */
static bool function_start(const struct mach_header_64 *h, uintptr_t addr, uintptr_t *start)
{
    const struct segment_command_64 *linkedit = segment(h, SEG_LINKEDIT);
    const struct linkedit_data_command *fs =
        (const struct linkedit_data_command *)(const void *)command(
            h, LC_FUNCTION_STARTS, sizeof(struct linkedit_data_command));
    intptr_t slide;
    if (linkedit == NULL || fs == NULL || fs->datasize == 0 || fs->dataoff < linkedit->fileoff ||
        !image_slide(h, &slide))
        return false;
    uint64_t rel = (uint64_t)fs->dataoff - linkedit->fileoff;
    if (rel + fs->datasize > linkedit->filesize)
        return false;
    const uint8_t *p = (const uint8_t *)(uintptr_t)(linkedit->vmaddr + (uint64_t)slide + rel);
    const uint8_t *end = p + fs->datasize;
    uintptr_t fn = (uintptr_t)h;
    uintptr_t best = 0;
    uint64_t delta;
    while (read_uleb(&p, end, &delta) && delta != 0) {
        fn += (uintptr_t)delta;
        if (fn > addr)
            break;
        best = fn;
    }
    *start = best;
    return best != 0;
}

const char *mp_plat_function_name(uintptr_t addr)
{
    Dl_info info;
    if (dladdr((const void *)addr, &info) == 0 || info.dli_sname == NULL ||
        info.dli_saddr == NULL || info.dli_fbase == NULL || (uintptr_t)info.dli_saddr > addr)
        return NULL;
    const struct mach_header_64 *h = header64(info.dli_fbase);
    uintptr_t start;
    if (h == NULL || !function_start(h, addr, &start))
        return NULL;
    return start == (uintptr_t)info.dli_saddr ? info.dli_sname : NULL;
}
