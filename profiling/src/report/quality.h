/* SPDX-License-Identifier: MIT */
/* Internal: the symbol quality rule shared by the encoder (diagnostics)
 * and mp_prof_classify_symbols (decoded profiles). */
#ifndef MIMPROF_PROFILING_REPORT_QUALITY_H
#define MIMPROF_PROFILING_REPORT_QUALITY_H

#include <stdint.h>

#include <mimprof/profiling.h>

/* The thresholds documented in <mimprof/profiling.h>, in percent. */
#define MP_QUALITY_FULL_FUNCTIONS_PCT    95u
#define MP_QUALITY_FULL_LINES_PCT        80u
#define MP_QUALITY_PARTIAL_FUNCTIONS_PCT 20u

/* Name of the synthetic frame that marks a truncated stack; it is not
 * counted by the classifier. */
#define MP_TRUNCATED_FRAME "[truncated]"

/* `frames` frames in all, `with_function` of them named, `with_line` of
 * them with a file name and a line > 0. Exact integer arithmetic. */
mp_prof_symbol_quality mp_quality_from_counts(uint64_t frames, uint64_t with_function,
                                              uint64_t with_line);

#endif
