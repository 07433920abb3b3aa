/* SPDX-License-Identifier: MIT */
/* libFuzzer target: application name and tag validation. Oracle: whatever
 * the validator accepts, Pyroscope's own `name` parser (reference section
 * 1, reimplemented here from the rules) reads back unchanged. Input:
 * line 1 = application name, line 2 = tags "k=v,k2=v2", line 3 = a value. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *line(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl ? nl : end;
    char *s = strndup((const char *)*p, (size_t)(stop - *p));
    *p = nl ? nl + 1 : end;
    return s;
}

static char *trim(char *s, char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *e = '\0';
    return s;
}

/* The server's parse of `service{k=v,...}`: a value ends at the first ','
 * or '}', keys and values are trimmed. True and the pairs on success. */
static bool server_parse(char *name, char **app, char *keys[64], char *vals[64], size_t *n)
{
    *n = 0;
    char *brace = strchr(name, '{');
    *app = trim(name, brace ? brace : name + strlen(name));
    if (!brace)
        return true;
    char *p = brace + 1;
    for (;;) {
        if (*p == '}')
            return p[1] == '\0';
        char *eq = strchr(p, '=');
        if (!eq || *n >= 64)
            return false;
        char *v = eq + 1, *end = v + strcspn(v, ",}");
        char term = *end;
        if (!term)
            return false; /* unterminated '{' */
        bool last = term == '}' && end[1] == '\0';
        if (term == '}' && !last)
            return false; /* text after '}' */
        keys[*n] = trim(p, eq);
        vals[*n] = trim(v, end);
        (*n)++;
        if (last)
            return true;
        p = end + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *app = line(&p, end), *tags = line(&p, end), *value = line(&p, end);
    char err[512];
    if (mp_pyro_check_label_value("k", value, err, sizeof err) == MP_PYRO_OK &&
        (strpbrk(value, ",}") || !mp_pyro_utf8_valid(value, strlen(value))))
        abort();
    mp_pyro_series s = {0};
    if (mp_pyro_check_app_name(app, err, sizeof err) == MP_PYRO_OK &&
        mp_pyro_series_add_tags(&s, tags, err, sizeof err) == MP_PYRO_OK) {
        s.app = strdup(app);
        mp_pyro_buf b = {0};
        mp_pyro_series_name(&s, &b);
        char *name = mp_pyro_buf_cstr(&b);
        char *papp, *keys[64], *vals[64];
        size_t n;
        if (!name || !server_parse(name, &papp, keys, vals, &n) || strcmp(papp, app) != 0 ||
            n != s.ntags)
            abort();
        for (size_t i = 0; i < n; i++)
            if (strcmp(keys[i], s.tags[i].name) != 0 || strcmp(vals[i], s.tags[i].value) != 0)
                abort();
        mp_pyro_buf_free(&b);
    }
    mp_pyro_series_clear(&s);
    free(app);
    free(tags);
    free(value);
    return 0;
}
