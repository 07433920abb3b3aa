/* SPDX-License-Identifier: MIT */
/* The content of one spool file (spool_file.h):
 *
 *   MPPYROSPOOL 2\n server <url>\n tenant <id or empty>\n
 *   owner <salt hex>:<sha256 hex>\n from <ns>\n until <ns>\n spy <s>\n
 *   app <s>\n (tag <k>=<v>\n)*  gz <len>\n  <len bytes of gzipped pprof>
 *
 * `owner` identifies the credentials (owner.h); a file whose server,
 * tenant or owner differ from the agent's is kept and never sent, as is
 * a version-1 file (written before the spool kept them; its name holds
 * the end time). Values cannot hold newlines (URL, tenant, names and
 * labels are validated, the spy name is sanitised by the writer). */
#define _GNU_SOURCE
#include "spool_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "owner.h"

#define MAGIC    "MPPYROSPOOL 2\n"
#define MAGIC_V1 "MPPYROSPOOL 1\n"

void mp_pyro_spool_header(const mp_pyro_config *owner, const uint8_t salt[MP_PYRO_SALT_LEN],
                          const mp_pyro_series *series, const char *spy, int64_t from_ns,
                          int64_t until_ns, size_t gz_len, mp_pyro_buf *h)
{
    char digest[65];
    mp_pyro_owner_digest(owner, salt, digest);
    mp_pyro_buf_puts(h, MAGIC);
    mp_pyro_buf_printf(h, "server %s\ntenant %s\nowner ", owner->server,
                       owner->tenant ? owner->tenant : "");
    for (size_t i = 0; i < MP_PYRO_SALT_LEN; i++)
        mp_pyro_buf_printf(h, "%02x", salt[i]);
    mp_pyro_buf_printf(h, ":%s\n", digest);
    mp_pyro_buf_printf(h, "from %" PRId64 "\nuntil %" PRId64 "\nspy %s\napp %s\n", from_ns,
                       until_ns, spy, series->app);
    for (size_t i = 0; i < series->ntags; i++)
        mp_pyro_buf_printf(h, "tag %s=%s\n", series->tags[i].name, series->tags[i].value);
    mp_pyro_buf_printf(h, "gz %zu\n", gz_len);
}

/* Reads one "key value\n" line starting at *pos. */
static int line(const uint8_t *buf, size_t len, size_t *pos, const char *key, char **value)
{
    size_t klen = strlen(key);
    if (len - *pos < klen + 1 || memcmp(buf + *pos, key, klen) != 0 || buf[*pos + klen] != ' ')
        return -1;
    const uint8_t *start = buf + *pos + klen + 1;
    const uint8_t *nl = memchr(start, '\n', len - (size_t)(start - buf));
    if (!nl)
        return -1;
    *value = strndup((const char *)start, (size_t)(nl - start));
    if (!*value)
        return -1;
    *pos = (size_t)(nl - buf) + 1;
    return 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* Whether the file's server, tenant and owner line are this agent's: 1
 * yes, 0 no, -1 unreadable. Moves *pos past the three lines. */
static int owned(const mp_pyro_config *agent, const uint8_t *buf, size_t len, size_t *pos)
{
    char *server = NULL, *tenant = NULL, *owner = NULL;
    int rc = -1;
    if (line(buf, len, pos, "server", &server) || line(buf, len, pos, "tenant", &tenant) ||
        line(buf, len, pos, "owner", &owner))
        goto out;
    uint8_t salt[MP_PYRO_SALT_LEN];
    const char *colon = strchr(owner, ':');
    if (!colon || colon - owner != 2 * MP_PYRO_SALT_LEN || strlen(colon + 1) != 64)
        goto out;
    for (size_t i = 0; i < MP_PYRO_SALT_LEN; i++) {
        unsigned x;
        if (sscanf(owner + 2 * i, "%2x", &x) != 1)
            goto out;
        salt[i] = (uint8_t)x;
    }
    char digest[65];
    mp_pyro_owner_digest(agent, salt, digest);
    rc = strcmp(server, agent->server) == 0 &&
         strcmp(tenant, agent->tenant ? agent->tenant : "") == 0 && strcmp(colon + 1, digest) == 0;
out:
    free(server);
    free(tenant);
    free(owner);
    return rc;
}

int mp_pyro_spool_parse(const mp_pyro_config *owner, const uint8_t *buf, size_t len,
                        mp_pyro_spool_entry *e)
{
    size_t pos = strlen(MAGIC);
    if (len >= pos && memcmp(buf, MAGIC_V1, pos) == 0)
        return 1;
    if (len < pos || memcmp(buf, MAGIC, pos) != 0)
        return -1;
    int own = owned(owner, buf, len, &pos);
    if (own <= 0)
        return own == 0 ? 1 : -1;
    char *v = NULL;
    int rc = -1;
    if (line(buf, len, &pos, "from", &v) || parse_i64(v, &e->from_ns))
        goto out;
    free(v);
    v = NULL;
    if (line(buf, len, &pos, "until", &v) || parse_i64(v, &e->until_ns))
        goto out;
    free(v);
    v = NULL;
    if (line(buf, len, &pos, "spy", &e->spy) || line(buf, len, &pos, "app", &e->series.app) ||
        mp_pyro_check_app_name(e->series.app, NULL, 0) != MP_PYRO_OK)
        goto out;
    while (line(buf, len, &pos, "tag", &v) == 0) {
        char *eq = strchr(v, '=');
        if (!eq)
            goto out;
        *eq = '\0';
        if (mp_pyro_series_add_tag(&e->series, v, eq + 1, NULL, 0) != MP_PYRO_OK)
            goto out;
        free(v);
        v = NULL;
    }
    int64_t gz_len;
    if (line(buf, len, &pos, "gz", &v) || parse_i64(v, &gz_len) || gz_len < 0 ||
        (uint64_t)gz_len != len - pos)
        goto out;
    e->gz = malloc(gz_len ? (size_t)gz_len : 1);
    if (!e->gz)
        goto out;
    memcpy(e->gz, buf + pos, (size_t)gz_len);
    e->gz_len = (size_t)gz_len;
    rc = 0;
out:
    free(v);
    return rc;
}
