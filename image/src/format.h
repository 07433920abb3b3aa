/* SPDX-License-Identifier: MIT */
/* The on-disk layout of an image (image/FORMAT.md is the prose version).
 *
 * Every integer is in the writer's byte order, every table entry is a 64-bit
 * file word, and every section starts and ends on a word boundary. Sections
 * follow the header back to back, in this order, with nothing between them:
 *
 *   header | type table | foreign table | root table |
 *   object region | shape table | byte blob
 *
 * The object region is the heap as the loader will hold it: per object its
 * metadata words, its header word and its units, back to back, so that a
 * load is one copy of the region with every unit relocated by its kind.
 * Nil is 0 in every reference space (word offsets into the region, foreign
 * entries, byte blob offsets), so a unit of value 0 needs no tag. */
#ifndef MP_IMG_FORMAT_H
#define MP_IMG_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* "MPIMG\r\n\x1a": the CR/LF pair and ^Z catch text-mode mangling. */
#define IMG_MAGIC     "MPIMG\r\n\x1a"
#define IMG_MAGIC_LEN 8

/* Format version. Not equal to its own byte swap (0x02000000), so a
 * byte-swapped header can never pass as a valid version. */
#define IMG_VERSION         UINT32_C(3)
#define IMG_VERSION_SWAPPED UINT32_C(0x03000000)
_Static_assert(IMG_VERSION != IMG_VERSION_SWAPPED, "format version must not be swap-invariant");

/* Read as a native word: reveals the writer's byte order. */
#define IMG_BYTE_ORDER         UINT64_C(0x0102030405060708)
#define IMG_BYTE_ORDER_SWAPPED UINT64_C(0x0807060504030201)

/* The incomplete marker while the writer is busy ("INCOMPLE" as text);
 * cleared to 0 by the writer's very last write. Anything else is corrupt.
 * It precedes both checksums, which cover everything after their own
 * fields. */
#define IMG_INCOMPLETE UINT64_C(0x454C504D4F434E49)

/* The checksum covers every byte from this offset to the end of the file;
 * the head checksum every byte from IMG_HEAD_FROM to the object region. */
#define IMG_CHECKSUM_FROM 32
#define IMG_HEAD_FROM     40

#define IMG_TEXT_FIELD 16 /* release, os, arch: NUL-padded text */

struct img_header {
    char magic[IMG_MAGIC_LEN];    /*   0 */
    uint32_t version;             /*   8 */
    uint32_t header_size;         /*  12 sizeof(struct img_header) */
    uint64_t incomplete;          /*  16 IMG_INCOMPLETE, then 0 */
    uint64_t checksum;            /*  24 XXH3-64 of [32, end) */
    uint64_t head_checksum;       /*  32 XXH3-64 of [40, object region) */
    uint64_t byte_order;          /*  40 IMG_BYTE_ORDER */
    uint32_t word_size;           /*  48 sizeof(mp_img_word) of the writer */
    uint32_t meta_width;          /*  52 metadata words per object */
    char release[IMG_TEXT_FIELD]; /*  56 library release, e.g. "0.1.0" */
    char os[IMG_TEXT_FIELD];      /*  72 e.g. "linux" */
    char arch[IMG_TEXT_FIELD];    /*  88 e.g. "x86_64" */
    uint64_t type_digest;         /* 104 XXH3-64 of the type table section */
    uint64_t n_types;             /* 112 */
    uint64_t n_foreign;           /* 120 entries, index 0 (nil) not stored */
    uint64_t n_roots;             /* 128 */
    uint64_t n_objects;           /* 136 objects in the region */
    uint64_t n_bytes;             /* 144 size of the byte blob */
    uint64_t types_size;          /* 152 bytes of the type table */
    uint64_t foreign_size;        /* 160 bytes of the foreign table */
    uint64_t roots_size;          /* 168 bytes of the root table */
    uint64_t objects_size;        /* 176 bytes of the object region */
    uint64_t shapes_size;         /* 184 bytes of the shape table */
    uint64_t region_words;        /* 192 words the region takes in memory */
    uint64_t reserved;            /* 200 zero */
};                                /* 208 */
_Static_assert(sizeof(struct img_header) == 208, "header layout");
_Static_assert(offsetof(struct img_header, checksum) + 8 == IMG_CHECKSUM_FROM, "checksum start");
_Static_assert(offsetof(struct img_header, head_checksum) + 8 == IMG_HEAD_FROM, "head start");

/* Type table entry:
 *   str name | u64 shape class | u64 count | u64 described | u64 mask |
 *   u64 foreign policy
 * A "str" is a u64 length followed by the bytes, zero-padded to a word. */
enum img_shape_class {
    IMG_SHAPE_NONE = 0,    /* no shape: the writer refuses instances */
    IMG_SHAPE_FIXED = 1,   /* count units */
    IMG_SHAPE_DYNAMIC = 2, /* unit 0 is a word holding the count after it */
    IMG_SHAPE_CUSTOM = 3,  /* per object: its shape in the shape table */
};

/* Foreign table entry: u64 kind, then per kind:
 *   DLSYM: str library ("" = the main program) | str symbol
 *   FD:    u64 role (0 stdin, 1 stdout, 2 stderr)
 *   CODE:  str build-id | str path | u64 offset from the load bias
 *   EXT:   u64 type index | str name from the type's externalise */
enum img_foreign_kind {
    IMG_FOREIGN_NIL = 0, /* reserved: nil is index 0 and never stored */
    IMG_FOREIGN_DLSYM = 1,
    IMG_FOREIGN_FD = 2,
    IMG_FOREIGN_CODE = 3,
    IMG_FOREIGN_EXT = 4,
};

/* Root table entry: u64 object (word offset of its unit 0 in the region,
 * 0 = nil) | str name. Sorted by name, names unique. */

/* Object region: per object, type by type (breadth first within a type):
 *   [meta_width words] [header word] [units]
 * The header word is the heap's object header (struct img_obj) as the
 * writer's memory holds it: u32 unit count, u16 type index, u16 user
 * flags. On a little-endian writer that is the word
 *   bits 0..31 unit count | bits 32..47 type | bits 48..63 user flags.
 * A unit is written per its kind:
 *   ref:     word offset of the target's unit 0 in the region as loaded
 *            (every object with its header word; 0 = nil)
 *   word:    the value
 *   bytes:   0 for NULL, else the blob offset of the data; the u64 length
 *            sits in the word before it
 *   foreign: foreign index (0 = nil)
 *
 * A run (metadata width 0 only): N >= 2 consecutive objects of one
 * fixed-shape type of at least one unit with one header word are stored as
 *   [header word | IMG_RUN] [N] [units of object 1] ... [units of object N]
 * and load as N objects, each with its header word. The region as loaded
 * (what references and roots count in) takes region_words words; the file
 * holds objects_size / 8 words, at least half as many.
 *
 * Shape table: u64 described | u64 mask per object of a per-object-shape
 * type, in region order.
 *
 * Byte blob: per bytes unit, in unit order: u64 length | data | zero
 * padding, at least one byte, to the next word. */
/* The run mark: the header flag bit that is never a user flag (the trace
 * bit in memory, which is never imaged). */
#define IMG_RUN 0x8000u

#define IMG_MAX_UNITS UINT32_MAX
#define IMG_MAX_TYPES 0xFFFFu

/* The region is addressed by 32-bit word offsets on the writer's side
 * (stamps): at most 2^32 - 1 words. */
#define IMG_MAX_REGION_WORDS ((uint64_t)UINT32_MAX)

#define IMG_NAME_MAX 255u

/* Bounds a str may not exceed (a build-id, a path, a symbol, an
 * externalised name). */
#define IMG_STR_MAX (1u << 20)

static inline uint64_t img_pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

#endif /* MP_IMG_FORMAT_H */
