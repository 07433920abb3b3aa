/* SPDX-License-Identifier: MIT */
/* Pyroscope's rules for application names, labels, tenants and headers,
 * checked when a value is set so that a bad configuration is a typed
 * error at start, never a 400 from the server later. */
#define _GNU_SOURCE
#include "labels.h"

#include <stdlib.h>
#include <string.h>

bool mp_pyro_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static bool is_alnum(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

mp_pyro_status mp_pyro_check_app_name(const char *s, char *err, size_t errlen)
{
    if (!s || !*s) {
        mp_pyro_fmt(err, errlen, "application name is empty");
        return MP_PYRO_E_INVALID_NAME;
    }
    size_t n = strlen(s);
    if (n > MP_PYRO_MAX_NAME_LEN) {
        mp_pyro_fmt(err, errlen, "application name is %zu bytes long; at most %d", n,
                    MP_PYRO_MAX_NAME_LEN);
        return MP_PYRO_E_INVALID_NAME;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_alnum(c) && c != '_' && c != '.' && c != '-' && c != '/') {
            mp_pyro_fmt(err, errlen,
                        "application name '%.64s': character %zu (0x%02x) is not one of "
                        "[A-Za-z0-9_.-/]",
                        s, i, c);
            return MP_PYRO_E_INVALID_NAME;
        }
    }
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_check_label_name(const char *s, char *err, size_t errlen)
{
    if (!s || !*s) {
        mp_pyro_fmt(err, errlen, "label name is empty");
        return MP_PYRO_E_INVALID_LABEL;
    }
    size_t n = strlen(s);
    if (n > MP_PYRO_MAX_NAME_LEN) {
        mp_pyro_fmt(err, errlen, "label name '%.32s...' is %zu bytes long; at most %d", s, n,
                    MP_PYRO_MAX_NAME_LEN);
        return MP_PYRO_E_INVALID_LABEL;
    }
    /* The rule every supported server keeps as written: 1.13 refuses a
     * leading digit and stores '.' as '_' (so `a.b` and `a_b` collide);
     * 2.0 keeps any UTF-8 name by default. */
    if (s[0] >= '0' && s[0] <= '9') {
        mp_pyro_fmt(err, errlen,
                    "label name '%.64s' starts with a digit, which Pyroscope 1.x refuses "
                    "(every upload would be rejected)",
                    s);
        return MP_PYRO_E_INVALID_LABEL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            mp_pyro_fmt(err, errlen,
                        "label name '%.64s': Pyroscope 1.x stores '.' as '_' and 2.x keeps it, "
                        "so the label would differ between servers; use '_'",
                        s);
            return MP_PYRO_E_INVALID_LABEL;
        }
        if (!is_alnum(c) && c != '_') {
            mp_pyro_fmt(err, errlen,
                        "label name '%.64s': character %zu (0x%02x) is not one of "
                        "[A-Za-z0-9_]",
                        s, i, c);
            return MP_PYRO_E_INVALID_LABEL;
        }
    }
    if (n >= 2 && s[0] == '_' && s[1] == '_') {
        mp_pyro_fmt(err, errlen,
                    "label name '%.64s' starts with '__', which the server reserves "
                    "(and drops)",
                    s);
        return MP_PYRO_E_INVALID_LABEL;
    }
    if (strcmp(s, "service_name") == 0) {
        mp_pyro_fmt(err, errlen, "label 'service_name' is the application name; set that instead");
        return MP_PYRO_E_INVALID_LABEL;
    }
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_check_label_value(const char *name, const char *v, char *err, size_t errlen)
{
    if (!v || !*v) {
        mp_pyro_fmt(err, errlen, "label '%.64s' has an empty value (the server would drop it)",
                    name ? name : "");
        return MP_PYRO_E_INVALID_LABEL;
    }
    size_t n = strlen(v);
    if (n > MP_PYRO_MAX_VALUE_LEN) {
        mp_pyro_fmt(err, errlen, "label '%.64s': value is %zu bytes long; at most %d", name, n,
                    MP_PYRO_MAX_VALUE_LEN);
        return MP_PYRO_E_INVALID_LABEL;
    }
    if (!mp_pyro_utf8_valid(v, n)) {
        mp_pyro_fmt(err, errlen, "label '%.64s': value is not valid UTF-8", name);
        return MP_PYRO_E_INVALID_LABEL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == ',' || c == '}') {
            mp_pyro_fmt(err, errlen,
                        "label '%.64s': value '%.64s' contains '%c', which ends a "
                        "value in Pyroscope's name syntax",
                        name, v, c);
            return MP_PYRO_E_INVALID_LABEL;
        }
        if (c < 0x20 || c == 0x7F) {
            mp_pyro_fmt(err, errlen, "label '%.64s': value contains control character 0x%02x", name,
                        c);
            return MP_PYRO_E_INVALID_LABEL;
        }
    }
    if (v[0] == ' ' || v[n - 1] == ' ') {
        mp_pyro_fmt(err, errlen,
                    "label '%.64s': value '%.64s' has leading or trailing blanks "
                    "(the server trims them)",
                    name, v);
        return MP_PYRO_E_INVALID_LABEL;
    }
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_check_tenant(const char *s, char *err, size_t errlen)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 150) {
        mp_pyro_fmt(err, errlen, "tenant id must be 1..150 characters");
        return MP_PYRO_E_INVALID_CONFIG;
    }
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
        mp_pyro_fmt(err, errlen, "tenant id may not be '.' or '..'");
        return MP_PYRO_E_INVALID_CONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_alnum(c) && !strchr("!-_.*'()", c)) {
            mp_pyro_fmt(err, errlen,
                        "tenant id '%.64s': character 0x%02x is not one of "
                        "[A-Za-z0-9!-_.*'()]",
                        s, c);
            return MP_PYRO_E_INVALID_CONFIG;
        }
    }
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_check_header(const char *name, const char *value, char *err, size_t errlen)
{
    static const char *const reserved[] = {"authorization",     "x-scope-orgid", "content-type",
                                           "content-length",    "host",          "content-encoding",
                                           "transfer-encoding", "expect",        "connection"};
    if (!name || !*name || !value) {
        mp_pyro_fmt(err, errlen, "header name and value are required");
        return MP_PYRO_E_INVALID_CONFIG;
    }
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (!is_alnum(*p) && !strchr("!#$%&'*+-.^_`|~", *p)) {
            mp_pyro_fmt(err, errlen, "header name '%.64s' is not an HTTP token", name);
            return MP_PYRO_E_INVALID_CONFIG;
        }
    }
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        if (strcasecmp(name, reserved[i]) == 0) {
            mp_pyro_fmt(err, errlen,
                        "header '%s' is set by the library; use the dedicated "
                        "setting",
                        name);
            return MP_PYRO_E_INVALID_CONFIG;
        }
    }
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7F) {
            mp_pyro_fmt(err, errlen, "header '%.64s': value contains a control character", name);
            return MP_PYRO_E_INVALID_CONFIG;
        }
    }
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_series_add_tag(mp_pyro_series *s, const char *name, const char *value,
                                      char *err, size_t errlen)
{
    mp_pyro_status st = mp_pyro_check_label_name(name, err, errlen);
    if (st == MP_PYRO_OK)
        st = mp_pyro_check_label_value(name, value, err, errlen);
    if (st != MP_PYRO_OK)
        return st;
    size_t pos = 0;
    while (pos < s->ntags && strcmp(s->tags[pos].name, name) < 0)
        pos++;
    if (pos < s->ntags && strcmp(s->tags[pos].name, name) == 0) {
        mp_pyro_fmt(err, errlen, "label '%.64s' is set twice", name);
        return MP_PYRO_E_INVALID_LABEL;
    }
    if (s->ntags >= MP_PYRO_MAX_TAGS) {
        mp_pyro_fmt(err, errlen,
                    "more than %d tags: Pyroscope accepts 30 label names per "
                    "series and adds 4 of its own",
                    MP_PYRO_MAX_TAGS);
        return MP_PYRO_E_TOO_MANY_LABELS;
    }
    char *k = strdup(name), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return MP_PYRO_E_NOMEM;
    }
    memmove(&s->tags[pos + 1], &s->tags[pos], (s->ntags - pos) * sizeof s->tags[0]);
    s->tags[pos].name = k;
    s->tags[pos].value = v;
    s->ntags++;
    return MP_PYRO_OK;
}

static char *trim(char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return p;
}

mp_pyro_status mp_pyro_series_add_tags(mp_pyro_series *s, const char *list, char *err,
                                       size_t errlen)
{
    if (!list)
        return MP_PYRO_OK;
    char *copy = strdup(list);
    if (!copy)
        return MP_PYRO_E_NOMEM;
    mp_pyro_series tmp;
    mp_pyro_status st = mp_pyro_series_copy(s, &tmp);
    if (st != MP_PYRO_OK) {
        free(copy);
        return st;
    }
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && st == MP_PYRO_OK;
         item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (!*item)
            continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            mp_pyro_fmt(err, errlen, "tag '%.64s' is not written name=value", item);
            st = MP_PYRO_E_INVALID_LABEL;
            break;
        }
        *eq = '\0';
        st = mp_pyro_series_add_tag(&tmp, trim(item), trim(eq + 1), err, errlen);
    }
    free(copy);
    if (st != MP_PYRO_OK) {
        mp_pyro_series_clear(&tmp);
        return st;
    }
    mp_pyro_series_clear(s);
    *s = tmp;
    return MP_PYRO_OK;
}

void mp_pyro_series_name(const mp_pyro_series *s, mp_pyro_buf *out)
{
    mp_pyro_buf_puts(out, s->app ? s->app : "");
    if (s->ntags == 0)
        return;
    mp_pyro_buf_puts(out, "{");
    for (size_t i = 0; i < s->ntags; i++) {
        if (i)
            mp_pyro_buf_puts(out, ",");
        mp_pyro_buf_puts(out, s->tags[i].name);
        mp_pyro_buf_puts(out, "=");
        mp_pyro_buf_puts(out, s->tags[i].value);
    }
    mp_pyro_buf_puts(out, "}");
}

void mp_pyro_series_clear(mp_pyro_series *s)
{
    free(s->app);
    for (size_t i = 0; i < s->ntags; i++) {
        free(s->tags[i].name);
        free(s->tags[i].value);
    }
    memset(s, 0, sizeof *s);
}

mp_pyro_status mp_pyro_series_copy(const mp_pyro_series *src, mp_pyro_series *dst)
{
    memset(dst, 0, sizeof *dst);
    if (src->app && !(dst->app = strdup(src->app)))
        goto oom;
    for (size_t i = 0; i < src->ntags; i++) {
        dst->tags[i].name = strdup(src->tags[i].name);
        dst->tags[i].value = strdup(src->tags[i].value);
        dst->ntags = i + 1;
        if (!dst->tags[i].name || !dst->tags[i].value)
            goto oom;
    }
    return MP_PYRO_OK;
oom:
    mp_pyro_series_clear(dst);
    return MP_PYRO_E_NOMEM;
}
