/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the spool file reader (src/spool_file.c) on any
 * bytes. The first byte picks the input's shape: even, the file as it is
 * (the magic line and owner check reject most of it); odd, the rest after
 * a valid header prefix for this agent (magic, server, tenant and an
 * owner line whose digest matches the salt taken from the input), so
 * that the fields after the owner are fuzzed too.
 *
 * Oracle: no crash, leak or overread (ASan, exactly sized copies); a file
 * accepted as this agent's has a valid application name and exactly the
 * gzipped bytes it declares, and writing its fields back with
 * mp_pyro_spool_header gives a file that reads back the same. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "spool_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mp_pyro_config *owner(void)
{
    static mp_pyro_config cfg;
    static char server[] = "http://pyroscope.example:4040", tenant[] = "team-a",
                token[] = "secret-token";
    cfg.server = server;
    cfg.tenant = tenant;
    cfg.bearer = token;
    return &cfg;
}

/* Parses buf[0..len) from an exactly sized heap copy. */
static int parse(const uint8_t *buf, size_t len, mp_pyro_spool_entry *e)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return -2;
    memcpy(copy, buf, len);
    int rc = mp_pyro_spool_parse(owner(), copy, len, e);
    free(copy);
    return rc;
}

static void check_round_trip(const mp_pyro_spool_entry *e)
{
    static const uint8_t salt[MP_PYRO_SALT_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    mp_pyro_buf h = {0};
    mp_pyro_spool_header(owner(), salt, &e->series, e->spy, e->from_ns, e->until_ns, e->gz_len, &h);
    mp_pyro_buf_put(&h, e->gz, e->gz_len);
    if (h.oom) {
        mp_pyro_buf_free(&h);
        return;
    }
    mp_pyro_spool_entry f = {0};
    int rc = parse((const uint8_t *)h.data, h.len, &f);
    if (rc != 0 || f.from_ns != e->from_ns || f.until_ns != e->until_ns ||
        strcmp(f.spy, e->spy) != 0 || strcmp(f.series.app, e->series.app) != 0 ||
        f.series.ntags != e->series.ntags || f.gz_len != e->gz_len ||
        memcmp(f.gz, e->gz, e->gz_len) != 0)
        abort();
    for (size_t i = 0; i < f.series.ntags; i++)
        if (strcmp(f.series.tags[i].name, e->series.tags[i].name) != 0 ||
            strcmp(f.series.tags[i].value, e->series.tags[i].value) != 0)
            abort();
    mp_pyro_spool_entry_free(&f);
    mp_pyro_buf_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool owned = data[0] & 1;
    data++;
    size--;
    mp_pyro_buf file = {0};
    if (owned) {
        uint8_t salt[MP_PYRO_SALT_LEN] = {0};
        size_t n = size < sizeof salt ? size : sizeof salt;
        memcpy(salt, data, n);
        data += n;
        size -= n;
        char digest[65];
        mp_pyro_owner_digest(owner(), salt, digest);
        mp_pyro_buf_printf(&file, "MPPYROSPOOL 2\nserver %s\ntenant %s\nowner ", owner()->server,
                           owner()->tenant);
        for (size_t i = 0; i < sizeof salt; i++)
            mp_pyro_buf_printf(&file, "%02x", salt[i]);
        mp_pyro_buf_printf(&file, ":%s\n", digest);
    }
    mp_pyro_buf_put(&file, data, size);
    if (file.oom) {
        mp_pyro_buf_free(&file);
        return 0;
    }
    mp_pyro_spool_entry e = {0};
    int rc = parse((const uint8_t *)file.data, file.len, &e);
    if (rc == 0) {
        if (e.series.app == NULL || e.spy == NULL ||
            mp_pyro_check_app_name(e.series.app, NULL, 0) != MP_PYRO_OK || e.gz_len > file.len ||
            (e.gz_len > 0 && e.gz == NULL) ||
            memcmp(e.gz, file.data + file.len - e.gz_len, e.gz_len) != 0)
            abort();
        check_round_trip(&e);
    }
    mp_pyro_spool_entry_free(&e);
    mp_pyro_buf_free(&file);
    return 0;
}
