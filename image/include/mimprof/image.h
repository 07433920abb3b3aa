/* SPDX-License-Identifier: MIT */
/**
 * @file image.h
 * @brief mimprof-image: typed object-graph images. Build a graph of typed
 *        objects on a heap, write it to a file, load it in another process.
 *
 * An *object* is a contiguous array of word-sized *units* allocated with
 * mp_img_alloc(), preceded by a hidden header (type, flags, metadata). Its
 * *type* declares a *shape*: how many units it has (a fixed count, or
 * "unit 0 holds the count of the units after it") and the *kind* of each
 * unit:
 *
 * | kind | code | a unit holds | the image stores |
 * |---|---|---|---|
 * | ::MP_IMG_REF | 0 | a pointer to an object of the same heap, or NULL | its object index (0 = nil) |
 * | ::MP_IMG_WORD | 1 | a machine value | the value |
 * | ::MP_IMG_BYTES | 2 | a pointer to bytes whose length the type knows | the bytes, in the byte blob |
 * | ::MP_IMG_FOREIGN | 3 | an address the program does not own | a name from the foreign vocabulary |
 *
 * The writer (mp_img_write()) is a mark phase that emits: it traces from the
 * named roots, stamps an index on every reachable object, resolves every unit
 * by its kind and writes the file under a temporary name, then renames it.
 * The loader (mp_img_load()) verifies the header against this process,
 * reacquires every foreign value by name, allocates every object and patches
 * every unit; references to one object load as references to one object.
 * The format is documented in image/FORMAT.md.
 *
 * Foreign values are named by a closed vocabulary: `nil`, `dlsym(library,
 * symbol)`, `fd(stdin|stdout|stderr)`, `code(build-id, path, offset)`, and
 * per-type externalise/internalise callbacks. A value the vocabulary cannot
 * name makes the write refuse; it is never written as something else.
 *
 * Every fallible call returns an ::mp_img_status and, when given an
 * ::mp_img_error, fills it with the status and a sentence saying what was
 * refused (for writer refusals: the type, object index and unit).
 *
 * Thread safety: a registry may be shared once its types are registered; a
 * heap is used by one thread at a time.
 */
#ifndef MIMPROF_IMAGE_H
#define MIMPROF_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the functions exported from libmimprof-image. */
#if defined(__GNUC__)
#define MP_IMG_API __attribute__((visibility("default")))
#else
#define MP_IMG_API
#endif

/** One unit of an object: a machine word. */
typedef uintptr_t mp_img_word;

/** The result of every fallible call. */
typedef enum mp_img_status {
    MP_IMG_OK = 0,        /**< success */
    MP_IMG_E_ARGUMENT,    /**< invalid argument (NULL, bad name, bad shape spelling, duplicate) */
    MP_IMG_E_NOMEM,       /**< out of memory */
    MP_IMG_E_IO,          /**< a system call on the file failed (errno in the detail) */
    MP_IMG_E_NO_SHAPE,    /**< write: a reachable object's type declares no shape */
    MP_IMG_E_SHAPE,       /**< write: an instance contradicts its shape (slot-0 count, callback) */
    MP_IMG_E_NOT_ON_HEAP, /**< write: a reference or root is not an object on the heap */
    MP_IMG_E_UNNAMEABLE,  /**< write: a foreign value the vocabulary cannot name */
    MP_IMG_E_LIMIT,       /**< more types, units or bytes than the format can carry */
    MP_IMG_E_NOT_IMAGE,   /**< load: too short for a header, or wrong magic */
    MP_IMG_E_MISMATCH,    /**< load: a header field differs from this process or registry */
    MP_IMG_E_INCOMPLETE,  /**< load: the writer never cleared the incomplete marker */
    MP_IMG_E_CHECKSUM,    /**< load: the checksum does not match the contents */
    MP_IMG_E_CORRUPT,     /**< load: sizes, offsets or indices are inconsistent */
    MP_IMG_E_FOREIGN,     /**< load: a foreign entry could not be reacquired */
} mp_img_status;

/** Size of mp_img_error::detail. */
#define MP_IMG_DETAIL_LEN 320

/** A status plus the sentence that explains it. */
typedef struct mp_img_error {
    mp_img_status status;           /**< the status the call returned */
    char detail[MP_IMG_DETAIL_LEN]; /**< what was refused and why; "" on success */
} mp_img_error;

/** A short, constant description of `status` (never NULL). */
MP_IMG_API const char *mp_img_strerror(mp_img_status status);

/** The version of the mimprof-image package, e.g. "0.1.0"; it is written
 *  into every image as the library release. */
MP_IMG_API const char *mp_img_version(void);

/* ------------------------------------------------------------------ */
/** @name Shapes */
/**@{*/

/** The kind of a unit (2 bits). */
typedef enum mp_img_kind {
    MP_IMG_REF = 0,     /**< an object of the same heap, or NULL */
    MP_IMG_WORD = 1,    /**< a machine value, copied */
    MP_IMG_BYTES = 2,   /**< a pointer to bytes whose length the type's bytes_length knows */
    MP_IMG_FOREIGN = 3, /**< an address named by the foreign vocabulary */
} mp_img_kind;

/** The most unit kinds a mask describes. */
#define MP_IMG_MASK_UNITS 32

/**
 * A shape: unit count plus a 2-bit kind per unit.
 *
 * Unit `i < described` has kind `(mask >> 2*i) & 3`; units at or past
 * `described` take the kind of unit `described - 1`; a zero mask means every
 * unit is a reference (whatever `described` says).
 */
typedef struct mp_img_shape {
    bool dynamic;       /**< true: unit 0 is a word holding the count of the units after it */
    uint32_t count;     /**< fixed unit count (ignored when dynamic) */
    uint32_t described; /**< how many units the mask describes, 0..MP_IMG_MASK_UNITS */
    uint64_t mask;      /**< 2 bits per unit, unit 0 in the low bits */
} mp_img_shape;

/**
 * Compiles a readable spelling to a shape.
 *
 * Grammar: `[N: | *:] kind...` where kind is `ref`, `word`, `bytes` or
 * `foreign`, separated by blanks. Without a prefix the count is the number
 * of kinds listed (`"word ref bytes"` = 3 units); `N:` fixes the count (the
 * units past the list take the last kind); `*:` makes the shape dynamic,
 * and then the first kind must be `word` (unit 0 holds the count).
 * `""` and `"0:"` are zero units.
 *
 * @return ::MP_IMG_OK, or ::MP_IMG_E_ARGUMENT naming the bad token.
 */
MP_IMG_API mp_img_status mp_img_shape_parse(const char *spelling, mp_img_shape *out,
                                            mp_img_error *err);

/** The kind of unit `unit` of shape `shape` (see ::mp_img_shape). */
MP_IMG_API mp_img_kind mp_img_shape_kind(const mp_img_shape *shape, size_t unit);

/**
 * Writes the canonical spelling of `shape` into `buf` (NUL-terminated,
 * truncated to `cap`), e.g. `"*: word ref"`. Returns the length the full
 * spelling needs, excluding the NUL (like snprintf).
 */
MP_IMG_API size_t mp_img_shape_format(const mp_img_shape *shape, char *buf, size_t cap);

/**@}*/
/* ------------------------------------------------------------------ */
/** @name Types and the registry */
/**@{*/

/** A set of types plus the metadata width of the heaps made from it (opaque). */
typedef struct mp_img_registry mp_img_registry;
/** A registered type (opaque; owned by its registry). */
typedef struct mp_img_type mp_img_type;

/** How the writer names a type's foreign units (part of the type table). */
typedef enum mp_img_foreign_policy {
    /** No declaration: a foreign unit holding anything but NULL refuses the write. */
    MP_IMG_FOREIGN_NONE = 0,
    /** The writer names the value: NULL is `nil`, the standard streams are
     *  `fd(role)`, the start of an exported symbol is `dlsym(library, symbol)`. */
    MP_IMG_FOREIGN_RESOLVE = 1,
    /** Instruction addresses: NULL is `nil`, otherwise `code(build-id, path,
     *  offset)` of the loaded module containing the address. */
    MP_IMG_FOREIGN_CODE = 2,
    /** Transient: every foreign unit is written as `nil` and loads as NULL. */
    MP_IMG_FOREIGN_DROP = 3,
    /** The type's externalise/internalise callbacks name and reacquire it. */
    MP_IMG_FOREIGN_CALLBACKS = 4,
} mp_img_foreign_policy;

/**
 * Length in bytes of the bytes at `obj[unit]` (a non-NULL bytes unit).
 * Return SIZE_MAX to refuse (the write fails with ::MP_IMG_E_SHAPE).
 */
typedef size_t (*mp_img_bytes_length_fn)(void *ctx, const mp_img_word *obj, size_t unit);

/**
 * The shape of one instance of a type whose instances differ. `units` is the
 * count the object was allocated with; the returned shape must be fixed with
 * `count <= units`. Return false to refuse (::MP_IMG_E_SHAPE).
 */
typedef bool (*mp_img_shape_fn)(void *ctx, const mp_img_word *obj, size_t units, mp_img_shape *out);

/**
 * Names a foreign value: writes at most `cap` bytes of its name into `buf`
 * and returns the full length of the name, or a negative value if it cannot
 * be named (the write refuses). Called again with a larger buffer when the
 * name did not fit. Runs after the trace, never during it, and must not
 * allocate on or modify the heap being written.
 */
typedef long (*mp_img_externalise_fn)(void *ctx, uintptr_t value, unsigned char *buf, size_t cap);

/**
 * Reacquires a foreign value from its name, in the loading process, before
 * any object is allocated. Returns false to refuse the load (::MP_IMG_E_FOREIGN).
 */
typedef bool (*mp_img_internalise_fn)(void *ctx, const unsigned char *name, size_t len,
                                      uintptr_t *value);

/** Everything a type declares; zero-initialise and set what applies. */
typedef struct mp_img_type_options {
    /** Readable shape spelling (mp_img_shape_parse()); NULL if `shape` or
     *  `shape_of` is used instead, or if the type has no shape. */
    const char *spelling;
    /** Compiled shape; used when non-NULL (exclusive with `spelling`). */
    const mp_img_shape *shape;
    /** Per-instance shape, for a type whose instances differ (exclusive
     *  with a shape). A type with none of the three has no shape: it can be
     *  allocated, but the writer refuses its instances. */
    mp_img_shape_fn shape_of;
    /** Required when the shape has bytes units (mp_img_bytes_cstring and
     *  mp_img_bytes_prev_word are ready-made). */
    mp_img_bytes_length_fn bytes_length;
    /** How foreign units are named. */
    mp_img_foreign_policy foreign;
    /** With ::MP_IMG_FOREIGN_CALLBACKS: names a value at write time. */
    mp_img_externalise_fn externalise;
    /** With ::MP_IMG_FOREIGN_CALLBACKS: reacquires a value at load time. */
    mp_img_internalise_fn internalise;
    /** Passed to every callback of the type. */
    void *ctx;
} mp_img_type_options;

/** A bytes_length for NUL-terminated strings: strlen + 1 (the NUL is kept). */
MP_IMG_API size_t mp_img_bytes_cstring(void *ctx, const mp_img_word *obj, size_t unit);

/** A bytes_length reading the length from the unit before the bytes unit
 *  (which must be a word); refuses a bytes unit at position 0. */
MP_IMG_API size_t mp_img_bytes_prev_word(void *ctx, const mp_img_word *obj, size_t unit);

/** The most metadata words an object may carry. */
#define MP_IMG_META_MAX 8

/**
 * Creates an empty registry whose heaps give every object `meta_width`
 * metadata words (0..MP_IMG_META_MAX). The width is written into images and
 * a loader with another width refuses them.
 */
MP_IMG_API mp_img_status mp_img_registry_new(size_t meta_width, mp_img_registry **out,
                                             mp_img_error *err);

/** Frees a registry and its types. Heaps made from it must be freed first. */
MP_IMG_API void mp_img_registry_free(mp_img_registry *reg);

/** Foreign entry kinds an image loaded with a registry may hold (bits for
 *  mp_img_registry_allow_foreign()); `nil` is always allowed. */
enum {
    MP_IMG_ALLOW_DLSYM = 1u << 1, /**< dlsym(library, symbol): the loader dlopen()s the library */
    MP_IMG_ALLOW_FD = 1u << 2,    /**< fd(stdin|stdout|stderr) */
    MP_IMG_ALLOW_CODE = 1u << 3,  /**< code(build-id, path, offset) */
    MP_IMG_ALLOW_CALLBACKS = 1u << 4, /**< values of types with internalise callbacks */
    MP_IMG_ALLOW_ALL = MP_IMG_ALLOW_DLSYM | MP_IMG_ALLOW_FD | MP_IMG_ALLOW_CODE |
                       MP_IMG_ALLOW_CALLBACKS /**< the default */
};

/**
 * Restricts the foreign entries that images loaded with `reg` may hold to
 * `kinds` (MP_IMG_ALLOW_* bits; the default is ::MP_IMG_ALLOW_ALL). The
 * loader refuses an image holding an entry of another kind with
 * ::MP_IMG_E_FOREIGN and a detail naming the entry, after verifying the
 * file and before it reacquires any entry or allocates any object. A program
 * that loads images it did not write itself excludes ::MP_IMG_ALLOW_DLSYM:
 * a `dlsym` entry makes the loader dlopen() the library it names.
 * ::MP_IMG_E_ARGUMENT for a NULL registry or a bit outside
 * ::MP_IMG_ALLOW_ALL.
 */
MP_IMG_API mp_img_status mp_img_registry_allow_foreign(mp_img_registry *reg, unsigned kinds,
                                                       mp_img_error *err);

/**
 * Registers a type. Names are 1..255 bytes without NUL; a name may be
 * registered once. The registration order is part of the type table, so the
 * writer and the loader must register the same types in the same order.
 *
 * Refused (::MP_IMG_E_ARGUMENT): two of spelling/shape/shape_of; a dynamic
 * shape whose unit 0 is not a word; bytes units without bytes_length;
 * ::MP_IMG_FOREIGN_CALLBACKS without both callbacks; more than 65535 types.
 */
MP_IMG_API mp_img_status mp_img_type_register(mp_img_registry *reg, const char *name,
                                              const mp_img_type_options *opts,
                                              const mp_img_type **out, mp_img_error *err);

/** The type registered under `name`, or NULL. */
MP_IMG_API const mp_img_type *mp_img_type_find(const mp_img_registry *reg, const char *name);

/** The name of a type. */
MP_IMG_API const char *mp_img_type_name(const mp_img_type *type);

/** Copies the declared shape into `out` and returns true; false (and `out`
 *  untouched) for a shapeless type or one with a shape callback. */
MP_IMG_API bool mp_img_type_shape(const mp_img_type *type, mp_img_shape *out);

/**@}*/
/* ------------------------------------------------------------------ */
/** @name Heaps and objects */
/**@{*/

/** A heap: objects, their chain, and named roots (opaque). */
typedef struct mp_img_heap mp_img_heap;

/** Flags an object carries in the image (15 bits; the header's 16th is the
 *  library's trace flag, which is never imaged and never visible here). */
#define MP_IMG_USER_FLAGS 0x7FFFu

/** Creates an empty heap whose objects are typed by `reg`. */
MP_IMG_API mp_img_status mp_img_heap_new(mp_img_registry *reg, mp_img_heap **out,
                                         mp_img_error *err);

/** Frees a heap: every object, loaded byte strings, and the libraries its
 *  foreign values were reacquired from. NULL is a no-op. */
MP_IMG_API void mp_img_heap_free(mp_img_heap *heap);

/** The registry a heap was made from. */
MP_IMG_API mp_img_registry *mp_img_heap_registry(const mp_img_heap *heap);

/**
 * Allocates an object of `type` with `units` units, all zero (nil / 0 / NULL).
 * For a fixed shape `units` must equal its count; for a dynamic shape it must
 * be at least 1, and unit 0 is set to `units - 1`. Objects live until the
 * heap is freed. Returns NULL with errno EINVAL (bad count, foreign type) or
 * ENOMEM.
 */
MP_IMG_API void *mp_img_alloc(mp_img_heap *heap, const mp_img_type *type, size_t units);

/** The type of an object of `heap`. */
MP_IMG_API const mp_img_type *mp_img_type_of(const mp_img_heap *heap, const void *obj);

/** The number of units `obj` was allocated (or loaded) with. */
MP_IMG_API size_t mp_img_units(const void *obj);

/** The user flags of an object (imaged with it). */
MP_IMG_API unsigned mp_img_flags(const void *obj);

/** Sets the user flags of an object; bits outside MP_IMG_USER_FLAGS are ignored. */
MP_IMG_API void mp_img_set_flags(void *obj, unsigned flags);

/** The metadata words of `obj` (the registry's meta width of them; imaged as
 *  words), or NULL when the width is 0. */
MP_IMG_API mp_img_word *mp_img_meta(const mp_img_heap *heap, void *obj);

/** The number of objects on the heap's chain. */
MP_IMG_API size_t mp_img_heap_count(const mp_img_heap *heap);

/** True when `p` is the address of an object of `heap` (never dereferences `p`). */
MP_IMG_API bool mp_img_heap_contains(const mp_img_heap *heap, const void *p);

/**
 * Names a root: `obj` (an object of the heap, or NULL for a nil root) under
 * `name` (1..255 bytes). Setting an existing name replaces its value.
 */
MP_IMG_API mp_img_status mp_img_root_set(mp_img_heap *heap, const char *name, void *obj,
                                         mp_img_error *err);

/** The value of root `name`, or NULL (absent or nil; see mp_img_root_find()). */
MP_IMG_API void *mp_img_root_get(const mp_img_heap *heap, const char *name);

/** True when root `name` exists; its value (possibly NULL) goes to `*obj`. */
MP_IMG_API bool mp_img_root_find(const mp_img_heap *heap, const char *name, void **obj);

/** The number of roots. */
MP_IMG_API size_t mp_img_root_count(const mp_img_heap *heap);

/** Root `i` (0-based, in name order): its name, and its value in `*obj`. */
MP_IMG_API const char *mp_img_root_at(const mp_img_heap *heap, size_t i, void **obj);

/**
 * Traces from the roots and counts the reachable objects into `*count`,
 * exactly as the writer does (the trace flag is set by the trace and cleared
 * by a chain walk; user flags are untouched). Refuses like the writer's trace:
 * ::MP_IMG_E_NOT_ON_HEAP, ::MP_IMG_E_NO_SHAPE, ::MP_IMG_E_SHAPE.
 */
MP_IMG_API mp_img_status mp_img_heap_reachable(mp_img_heap *heap, size_t *count, mp_img_error *err);

/**@}*/
/* ------------------------------------------------------------------ */
/** @name Writing and loading */
/**@{*/

/**
 * Writes the graph reachable from the heap's roots to `path`.
 *
 * The file is written to a temporary in the same directory, flushed to disk
 * (fdatasync, before and after the incomplete marker is cleared) and
 * renamed over `path`; on any refusal or error nothing is left under `path`
 * (an existing file there is untouched). The same graph gives the same
 * bytes, whatever the allocation order or addresses.
 *
 * Refusals name the type, object index and unit: ::MP_IMG_E_NOT_ON_HEAP,
 * ::MP_IMG_E_NO_SHAPE, ::MP_IMG_E_SHAPE, ::MP_IMG_E_UNNAMEABLE,
 * ::MP_IMG_E_LIMIT; system failures are ::MP_IMG_E_IO.
 */
MP_IMG_API mp_img_status mp_img_write(mp_img_heap *heap, const char *path, mp_img_error *err);

/**
 * Loads the image at `path` into a new heap of `reg` (`*out`).
 *
 * Verify and arm: every header field is checked against this process and
 * `reg` (magic, format version, byte order, word size, metadata width,
 * release, OS, arch, type-table digest, incomplete marker, sizes, checksum);
 * a mismatch is refused with the field named, before anything is allocated.
 * Then every foreign entry is reacquired, every object allocated, every unit
 * patched. The roots come back by name (mp_img_root_get()). Bytes units point
 * into memory the heap owns, NUL-terminated after the stored length.
 * `dlsym` entries make the loader dlopen() the libraries they name (running
 * their constructors): load only images you trust as you would a plugin, or
 * refuse them with mp_img_registry_allow_foreign().
 */
MP_IMG_API mp_img_status mp_img_load(mp_img_registry *reg, const char *path, mp_img_heap **out,
                                     mp_img_error *err);

/** mp_img_load() from `len` bytes at `data` (copied where needed; `data`
 *  may be freed afterwards). */
MP_IMG_API mp_img_status mp_img_load_memory(mp_img_registry *reg, const void *data, size_t len,
                                            mp_img_heap **out, mp_img_error *err);

/**
 * Verifies an image without a registry: header fields that do not depend on
 * the loading program (magic, version, byte order, word size, incomplete
 * marker), sizes, checksum, and every table and unit against the image's own
 * type table. Allocates no objects and reacquires nothing.
 */
MP_IMG_API mp_img_status mp_img_verify(const char *path, mp_img_error *err);

/**@}*/
/* ------------------------------------------------------------------ */
/** @name Code locations */
/**@{*/

/** Where an instruction address is, independently of where it was loaded. */
typedef struct mp_img_code {
    const unsigned char *build_id; /**< the module's GNU build-id */
    size_t build_id_len;           /**< its length in bytes (0 if the module has none) */
    const char *path;              /**< the module's path when it was named ("" if unknown) */
    uintptr_t offset;              /**< the address minus the module's load bias */
    uintptr_t address;             /**< the address in this process, or 0 if the module is absent */
} mp_img_code;

/**
 * Describes a `code` foreign value as loaded into `heap` (which may be NULL).
 *
 * When the image's module was not loaded in this process, the unit holds
 * the address of a named location owned by `heap` rather than code: this
 * returns true with `address == 0`. Otherwise, when `value` lies in a module
 * of this process, returns true with that module's build-id, path and
 * offset and `address == value`. Returns false for anything else. The
 * strings stay valid while the heap (or the module) does. Writing the heap
 * again names such a location by the same `code` entry it was loaded from.
 */
MP_IMG_API bool mp_img_code_lookup(const mp_img_heap *heap, uintptr_t value, mp_img_code *out);

/**@}*/
/* ------------------------------------------------------------------ */
/** @name Loaded modules
 * The one scan of this process's loaded modules (dl_iterate_phdr) in the
 * workspace: `code` values are named and reacquired against it, and the
 * profiling library builds its pprof mappings from it. It takes the
 * loader's lock and allocates: never call it from an allocation hook. */
/**@{*/

/** One PT_LOAD segment of a loaded module. */
typedef struct mp_img_segment {
    uintptr_t start;      /**< its first byte in this process (bias + p_vaddr) */
    uintptr_t limit;      /**< one past its last byte (start + p_memsz) */
    uint64_t file_offset; /**< p_offset: where `start` comes from in the file */
    bool exec;            /**< PF_X: it holds code */
} mp_img_segment;

/** A module (the main program, a shared object, the vDSO) loaded in this
 *  process. Its strings and build-id point into the loader's data and the
 *  module's mapped notes: valid while the module stays loaded. */
typedef struct mp_img_module {
    const char *name;              /**< the loader's name (dlpi_name): "" for the main program */
    const char *path;              /**< `name`, or for the main program the file it was
                                        run as (AT_EXECFN); "" when unknown */
    uintptr_t bias;                /**< dlpi_addr: address in this process minus the
                                        ELF virtual address */
    uintptr_t lo;                  /**< lowest address of its PT_LOAD segments */
    uintptr_t hi;                  /**< one past the highest */
    const unsigned char *build_id; /**< its GNU build-id (NT_GNU_BUILD_ID), NULL if none */
    size_t build_id_len;           /**< its length in bytes (0 if none) */
    const mp_img_segment *segs;    /**< its PT_LOAD segments, in program-header order */
    size_t nsegs;                  /**< how many */
    bool is_main;                  /**< the main program (first in the loader's list) */
} mp_img_module;

/** A snapshot of the modules loaded in this process (opaque). */
typedef struct mp_img_modules mp_img_modules;

/**
 * Takes a snapshot of the loaded modules, in the loader's order (the main
 * program first). Modules without a PT_LOAD segment are left out.
 * @param out receives the snapshot (free it with mp_img_modules_free())
 * @return MP_IMG_OK; MP_IMG_E_ARGUMENT (NULL `out`), MP_IMG_E_NOMEM.
 */
MP_IMG_API mp_img_status mp_img_modules_load(mp_img_modules **out);

/** How many modules the snapshot holds (0 for NULL). */
MP_IMG_API size_t mp_img_modules_count(const mp_img_modules *mods);

/** Module `i` (0-based, < mp_img_modules_count()), or NULL. */
MP_IMG_API const mp_img_module *mp_img_modules_at(const mp_img_modules *mods, size_t i);

/** The module whose PT_LOAD span [lo, hi) holds `addr`, or NULL. */
MP_IMG_API const mp_img_module *mp_img_modules_find_addr(const mp_img_modules *mods,
                                                         uintptr_t addr);

/** The module with build-id `id` (`len` bytes), or NULL (also for len 0). */
MP_IMG_API const mp_img_module *mp_img_modules_find_build_id(const mp_img_modules *mods,
                                                             const unsigned char *id, size_t len);

/** Frees a snapshot (NULL is ignored). */
MP_IMG_API void mp_img_modules_free(mp_img_modules *mods);

/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_IMAGE_H */
