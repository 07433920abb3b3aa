/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command: reading any pprof file (gzip-compressed
 * or not; mimprof's, Go's, or another producer's) into a flat model the
 * top / flame / diff views work on.
 *
 * The input is untrusted: every index and id is checked, sizes are bounded
 * (mpt_limits), and a malformed file yields an error message, never a
 * crash. Frame names are sanitized for terminals and XML by the views, not
 * here: names are kept byte-exact.
 *
 * Names: a function's Function.name, demangled when it is still a
 * linkage name (mp_prof_demangle's rule: a profile from another tool, or
 * written without a demangler), else its system_name when the name is
 * empty; with mpt_limits.raw_names, its system_name (the linkage name as
 * written) when set.
 *
 * Stacks are lists of *frames*: one per pprof Line (an inlined call
 * becomes its own frame, innermost first, as pprof shows them), or one per
 * Location without lines, named "<object basename>+0x<file offset>" when
 * the location has a mapping with a file name, else "0x<address>".
 */
#ifndef MIMPROF_TOOL_PPROF_READER_H
#define MIMPROF_TOOL_PPROF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a file is read: bounds, and how functions are named. */
typedef struct mpt_limits {
    size_t max_inflated; /* bound on the input and its decompressed size; default
                            mpt_read_limit() */
    size_t max_frames;   /* bound on the total frames over all samples; default 1/8 of it */
    size_t max_decoded;  /* bound on the memory the protobuf decoder would allocate
                            (pprof_bound.h; counts of samples, locations, lines,
                            strings...); default 3/2 of it */
    bool raw_names;      /* linkage names as written, nothing demangled (--no-demangle);
                            default false */
    /* Age filters (--older-than / --younger-than, ages.h): only samples
     * whose `age` label is >= older_than_ns and < younger_than_ns are
     * kept, for those >= 0; with either set, samples without an age (all
     * allocation samples) are dropped. Default -1 (off). */
    int64_t older_than_ns;
    int64_t younger_than_ns;
} mpt_limits;

typedef struct mpt_profile {
    size_t ntypes;
    char **type_name;    /* sample type names, e.g. "inuse_space" */
    char **type_unit;    /* their units, e.g. "bytes" */
    size_t default_type; /* default_sample_type if set, else the last type */

    size_t nnames;
    char **names; /* interned frame names (distinct strings) */

    size_t nsamples;
    size_t *stack_off; /* nsamples + 1 offsets into frames[] */
    uint32_t *frames;  /* frame name ids, leaf (innermost) first */
    int64_t *values;   /* nsamples * ntypes, row-major */
    int64_t *age_ns;   /* per sample: its numeric label `age` in ns, -1 if none */

    int64_t period;
    char *period_type; /* may be "" */
    char *period_unit;
    int64_t time_nanos;
    int64_t duration_nanos;
    size_t ncomments;
    char **comments; /* the profile's comments, in order (mimprof's: the RSS reconciliation) */
    char *program;   /* base name of the first mapping's file (the main binary), or "" */
} mpt_profile;

/* The bound on a reader's input and on what it inflates
 * (MIMPROF_READ_LIMIT, a size; cli/README.md "Bounds"): 64 MiB unless
 * set. The decoder's and the frames' bounds follow from it, so that a
 * reader holds about three times it at most, whatever the input (a gzip
 * bomb, /dev/zero). */
#define MPT_READ_LIMIT_DEFAULT ((size_t)64 << 20)
size_t mpt_read_limit(void);

/* Default limits (from mpt_read_limit()). */
void mpt_limits_init(mpt_limits *lim);

/* Reads `path` ("-": standard input) whole into a malloc()ed buffer of
 * at most `max` bytes; a longer input (an endless one) is refused after
 * max + 1 bytes. 0, or -1 with the reason in err. */
int mpt_read_bounded(const char *path, size_t max, uint8_t **out, size_t *outlen, char *err,
                     size_t errlen);

/* Parses `len` bytes (gzip or raw pprof). On failure returns -1 and
 * writes a one-line reason into err. `lim` may be NULL (defaults). */
int mpt_profile_parse(const uint8_t *data, size_t len, const mpt_limits *lim, mpt_profile **out,
                      char *err, size_t errlen);

/* Reads and parses a file ("-" is standard input). */
int mpt_profile_load(const char *path, const mpt_limits *lim, mpt_profile **out, char *err,
                     size_t errlen);

void mpt_profile_free(mpt_profile *p);

/* Index of the sample type named `name`, or -1. */
int mpt_profile_find_type(const mpt_profile *p, const char *name);

/* Picks the sample type for a view: `name` (NULL = the default). On failure
 * writes "no sample type X (have: a, b, c)" into err and returns -1. */
int mpt_profile_pick_type(const mpt_profile *p, const char *name, char *err, size_t errlen);

/* Sum of type `t` over all samples. */
int64_t mpt_profile_total(const mpt_profile *p, size_t t);

/* a + b and a - b, saturated at INT64_MIN / INT64_MAX: sums of values
 * from a file never wrap (a wrapped total printed "-4096.00PiB"). */
static inline int64_t mpt_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static inline int64_t mpt_sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}

/* Per-function totals for one sample type: flat (the function is the
 * innermost frame) and cum (the function appears in the stack; once per
 * sample even under recursion). Arrays of p->nnames entries, malloc()ed. */
typedef struct mpt_func_totals {
    int64_t *flat;
    int64_t *cum;
} mpt_func_totals;

int mpt_func_totals_compute(const mpt_profile *p, size_t t, mpt_func_totals *out);
void mpt_func_totals_free(mpt_func_totals *ft);

/* Copies `s` into buf for display: control characters and invalid UTF-8
 * become '?'; when longer than `max_chars` characters it is cut and ends
 * with "..". Returns buf. */
char *mpt_display_name(const char *s, char *buf, size_t n, size_t max_chars);

#endif
