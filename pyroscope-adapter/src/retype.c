/* SPDX-License-Identifier: MIT */
/* Renaming a pprof's sample types (retype.h). */
#define _GNU_SOURCE
#include "retype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;

bool mp_pyro_retype_prefix_ok(const char *prefix)
{
    size_t n = prefix != NULL ? strlen(prefix) : 0;
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((prefix[i] >= 'a' && prefix[i] <= 'z') || (prefix[i] >= '0' && prefix[i] <= '9') ||
              prefix[i] == '_'))
            return false;
    return true;
}

mp_pyro_status mp_pyro_retype(const uint8_t *in, size_t len, const char *prefix, uint8_t **out,
                              size_t *out_len)
{
    Profile *p = perftools__profiles__profile__unpack(NULL, len, in);
    if (p == NULL)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = MP_PYRO_E_NOMEM;
    size_t n0 = p->n_string_table, nt = p->n_sample_type;
    char **orig = p->string_table;
    char **strs = calloc(n0 + nt + 1, sizeof *strs);
    int64_t *old_type = calloc(nt + 1, sizeof *old_type);
    size_t made = 0;
    if (strs == NULL || old_type == NULL)
        goto done;
    memcpy(strs, orig, n0 * sizeof *strs);
    for (size_t i = 0; i < nt; i++) {
        int64_t t = p->sample_type[i]->type;
        if (t < 0 || (uint64_t)t >= n0) {
            st = MP_PYRO_E_INVALID_ARGUMENT;
            goto restore;
        }
        if (asprintf(&strs[n0 + i], "%s%s", prefix, orig[t]) < 0) {
            strs[n0 + i] = NULL;
            goto restore;
        }
        made++;
        old_type[i] = t;
        p->sample_type[i]->type = (int64_t)(n0 + i);
    }
    p->string_table = strs;
    p->n_string_table = n0 + nt;
    size_t n = perftools__profiles__profile__get_packed_size(p);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf != NULL) {
        perftools__profiles__profile__pack(p, buf);
        *out = buf;
        *out_len = n;
        st = MP_PYRO_OK;
    }
restore: /* free_unpacked must see the table it allocated */
    for (size_t i = 0; i < made; i++)
        p->sample_type[i]->type = old_type[i];
    p->string_table = orig;
    p->n_string_table = n0;
    for (size_t i = 0; i < made; i++)
        free(strs[n0 + i]);
done:
    free(strs);
    free(old_type);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return st;
}
