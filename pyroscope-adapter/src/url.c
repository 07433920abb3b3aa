/* SPDX-License-Identifier: MIT */
/* The server URL: parsed with libcurl's URL API, so that what is accepted
 * here is exactly what the transfer will use. */
#define _GNU_SOURCE
#include "url.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

mp_pyro_status mp_pyro_url_parse(const char *url, char **base, char **user, char **password,
                                 char *err, size_t errlen)
{
    *base = *user = *password = NULL;
    if (!url || !*url) {
        mp_pyro_fmt(err, errlen, "server URL is empty");
        return MP_PYRO_E_INVALID_URL;
    }
    CURLU *h = curl_url();
    if (!h)
        return MP_PYRO_E_NOMEM;
    mp_pyro_status st = MP_PYRO_E_INVALID_URL;
    char *scheme = NULL, *host = NULL, *frag = NULL, *out = NULL;
    CURLUcode rc = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (rc != CURLUE_OK) {
        mp_pyro_fmt(err, errlen, "server URL '%.200s': %s", url, curl_url_strerror(rc));
        goto out;
    }
    if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)) {
        mp_pyro_fmt(err, errlen, "server URL '%.200s': the scheme must be http or https", url);
        goto out;
    }
    if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
        mp_pyro_fmt(err, errlen, "server URL '%.200s' has no host", url);
        goto out;
    }
    if (curl_url_get(h, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
        mp_pyro_fmt(err, errlen, "server URL '%.200s' has a fragment", url);
        goto out;
    }
    char *u = NULL, *p = NULL;
    if (curl_url_get(h, CURLUPART_USER, &u, CURLU_URLDECODE) == CURLUE_OK) {
        *user = strdup(u);
        curl_free(u);
        if (!*user) {
            st = MP_PYRO_E_NOMEM;
            goto out;
        }
    }
    if (curl_url_get(h, CURLUPART_PASSWORD, &p, CURLU_URLDECODE) == CURLUE_OK) {
        *password = strdup(p);
        explicit_bzero(p, strlen(p));
        curl_free(p);
        if (!*password) {
            st = MP_PYRO_E_NOMEM;
            goto out;
        }
    }
    curl_url_set(h, CURLUPART_USER, NULL, 0);
    curl_url_set(h, CURLUPART_PASSWORD, NULL, 0);
    curl_url_set(h, CURLUPART_QUERY, NULL, 0);
    if (curl_url_get(h, CURLUPART_URL, &out, 0) != CURLUE_OK) {
        mp_pyro_fmt(err, errlen, "server URL '%.200s' cannot be normalised", url);
        goto out;
    }
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
    *base = strdup(out);
    st = *base ? MP_PYRO_OK : MP_PYRO_E_NOMEM;
out:
    if (st != MP_PYRO_OK) {
        free(*base);
        free(*user);
        mp_pyro_free_secret(*password);
        *base = *user = *password = NULL;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(frag);
    curl_free(out);
    curl_url_cleanup(h);
    return st;
}
