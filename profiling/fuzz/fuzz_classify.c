/* SPDX-License-Identifier: MIT */
/* libFuzzer target: mp_prof_classify_symbols' decoder on arbitrary bytes:
 * either a typed refusal or a valid class, never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <mimprof/profiling.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mp_prof_symbol_quality q = MP_PROF_QUALITY_ADDRESSES_ONLY;
    mp_prof_status st = mp_prof_classify_symbols(data, size, &q);
    if (st != MP_PROF_OK && st != MP_PROF_E_INVALID_CONFIG && st != MP_PROF_E_NOMEM)
        abort();
    if (st == MP_PROF_OK && (q < MP_PROF_QUALITY_ADDRESSES_ONLY || q > MP_PROF_QUALITY_FULL))
        abort();
    return 0;
}
