/* SPDX-License-Identifier: MIT */
/* Checks and exports the Pyroscope upload configuration of `mimprof run`.
 *
 * The flags (--pyroscope URL --app NAME ...), applied over the PYROSCOPE_*
 * variables already set, are checked here with libmimprof-pyroscope's own
 * rules (dlopen()ed: nothing in this package links it) before the command
 * starts, then exported as PYROSCOPE_* with MIMPROF_PYROSCOPE_LIB naming
 * the library, which the preload runtime loads to upload every report
 * (preload_runtime.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "units.h"

#if MPT_HAVE_PYROSCOPE
/* Whether a K=V[,K2=V2...] list names the label `key`. */
static bool names_label(const char *list, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = list; p != NULL && *p != '\0';) {
        p += strspn(p, " \t");
        if (strncmp(p, key, klen) == 0 && (p[klen] == '=' || p[klen] == ' ' || p[klen] == '\t'))
            return true;
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    return false;
}

/* The instance label (README, "Pyroscope": replicas): hostname=<this
 * host's name> unless --instance says otherwise or the user's own tags
 * name one. Pyroscope keeps one profile per series and millisecond, and
 * replicas of a service (containers, pods, hosts) whose pids and windows
 * coincide would otherwise share both: the server would keep one. One
 * series per replica, which Pyroscope's own clients recommend. */
static int instance_tag(const run_opts *o, char *tag, size_t cap)
{
    tag[0] = '\0';
    if (o->pyro_instance != NULL && strcmp(o->pyro_instance, "none") == 0)
        return 0;
    for (int i = 0; i < o->pyro_ntags; i++)
        if (names_label(o->pyro_tags[i], MPT_INSTANCE_LABEL))
            return 0;
    if (names_label(getenv("PYROSCOPE_TAGS"), MPT_INSTANCE_LABEL))
        return 0;
    char host[256];
    const char *name = o->pyro_instance;
    if (name == NULL) {
        if (gethostname(host, sizeof host) != 0)
            return 0; /* no name: no label (said nowhere; the default only) */
        host[sizeof host - 1] = '\0';
        name = host;
    }
    if ((size_t)snprintf(tag, cap, "%s=%s", MPT_INSTANCE_LABEL, name) >= cap)
        return -1;
    return 0;
}

int mpt_run_setup_pyroscope(run_opts *o, const char *preload)
{
    mpt_pyro_api api;
    char looked[4096], err[1024];
    /* Uploading was asked for by the flag, or by the environment alone. */
    const char *who = o->pyro_url != NULL ? "--pyroscope" : "PYROSCOPE_SERVER_ADDRESS";
    if (mpt_run_find_pyroscope(preload, &api, looked, sizeof looked, err, sizeof err) != 0) {
        fprintf(stderr,
                "mimprof run: %s needs libmimprof-pyroscope (looked in: %s%s%s; "
                "set MIMPROF_PYROSCOPE_LIB, or build the workspace with -Dpyroscope=enabled)\n",
                who, looked, err[0] ? "; " : "", err);
        return -1;
    }
    /* --basic-auth USER[:PASS]: without PASS, PYROSCOPE_BASIC_AUTH_PASSWORD;
     * the flag's user goes with it (the environment is read first). */
    const char *basic_pass = NULL;
    if (o->pyro_basic != NULL) {
        char *colon = strchr(o->pyro_basic, ':');
        if (colon != NULL)
            *colon = '\0';
        basic_pass = colon != NULL ? colon + 1 : getenv("PYROSCOPE_BASIC_AUTH_PASSWORD");
        if (basic_pass == NULL || basic_pass[0] == '\0') {
            fprintf(stderr,
                    "mimprof run: --basic-auth %s has no password (USER:PASS, or USER and "
                    "PYROSCOPE_BASIC_AUTH_PASSWORD)\n",
                    o->pyro_basic);
            mpt_pyro_close(&api);
            return -1;
        }
        if (setenv("PYROSCOPE_BASIC_AUTH_USER", o->pyro_basic, 1) != 0) {
            fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
            mpt_pyro_close(&api);
            return -1;
        }
    }
    mp_pyro_config *cfg = NULL;
    const char *what = NULL; /* the flag being applied */
    mp_pyro_status st = api.config_new(&cfg);
    if (st == MP_PYRO_OK)
        st = api.config_from_env(cfg);
    if (st == MP_PYRO_OK && o->pyro_url != NULL) {
        what = "--pyroscope";
        st = api.config_set_server(cfg, o->pyro_url);
    }
    if (st == MP_PYRO_OK && o->pyro_app != NULL) {
        what = "--app";
        st = api.config_set_app_name(cfg, o->pyro_app);
    }
    for (int i = 0; st == MP_PYRO_OK && i < o->pyro_ntags; i++) {
        what = "--tag";
        st = api.config_add_tags(cfg, o->pyro_tags[i]);
    }
    char instance[300];
    if (st == MP_PYRO_OK && instance_tag(o, instance, sizeof instance) != 0) {
        what = "--instance";
        st = MP_PYRO_E_INVALID_ARGUMENT;
    }
    if (st == MP_PYRO_OK && instance[0] != '\0') {
        what = o->pyro_instance != NULL ? "--instance" : "the host name as hostname label";
        st = api.config_add_tags(cfg, instance);
    }
    if (st == MP_PYRO_OK && o->pyro_tenant != NULL) {
        what = "--tenant";
        st = api.config_set_tenant(cfg, o->pyro_tenant);
    }
    if (st == MP_PYRO_OK && o->pyro_protocol != NULL)
        st = api.config_set_protocol(cfg, strcmp(o->pyro_protocol, "push") == 0
                                              ? MP_PYRO_PROTOCOL_PUSH
                                              : MP_PYRO_PROTOCOL_INGEST);
    if (st == MP_PYRO_OK && o->pyro_basic != NULL) {
        /* The flag replaces any credentials from the environment. */
        what = "--basic-auth";
        st = api.config_set_bearer_token(cfg, NULL);
        if (st == MP_PYRO_OK)
            st = api.config_set_basic_auth(cfg, o->pyro_basic, basic_pass);
    }
    if (st == MP_PYRO_OK && o->pyro_bearer != NULL) {
        what = "--bearer-token";
        st = api.config_set_basic_auth(cfg, NULL, NULL);
        if (st == MP_PYRO_OK)
            st = api.config_set_bearer_token(cfg, o->pyro_bearer);
    }
    if (st == MP_PYRO_OK) {
        what = NULL;
        st = api.config_validate(cfg);
    }
    if (st != MP_PYRO_OK) {
        const char *why = cfg != NULL ? api.config_error(cfg) : "";
        const char *app = getenv("PYROSCOPE_APPLICATION_NAME");
        if (st == MP_PYRO_E_NOT_CONFIGURED && o->pyro_app == NULL &&
            (app == NULL || app[0] == '\0'))
            fprintf(stderr, "mimprof run: %s needs --app NAME (or PYROSCOPE_APPLICATION_NAME)\n",
                    who);
        else
            fprintf(stderr, "mimprof run: %s%s%s\n", what != NULL ? what : "",
                    what != NULL ? ": " : "", why != NULL && why[0] ? why : api.strerror(st));
        goto fail;
    }
    char path[PATH_MAX];
    mpt_pyro_path(&api, path, sizeof path);
    char real[PATH_MAX];
    if (api.config_export_env(cfg) != MP_PYRO_OK ||
        setenv("MIMPROF_PYROSCOPE_LIB", realpath(path, real) != NULL ? real : path, 1) != 0) {
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
        goto fail;
    }
    const char *exit_dl = getenv("MIMPROF_PYROSCOPE_EXIT_DEADLINE");
    uint64_t exit_ms;
    if (exit_dl != NULL &&
        (!mpt_parse_duration_ms(exit_dl, &exit_ms) || exit_ms > MPT_EXIT_DEADLINE_MAX_MS)) {
        fprintf(stderr,
                "mimprof run: MIMPROF_PYROSCOPE_EXIT_DEADLINE: '%s' is not a duration of at "
                "most 10m\n",
                exit_dl);
        goto fail;
    }
    if (o->quiet)
        unsetenv("MIMPROF_PYROSCOPE_SUMMARY");
    else
        setenv("MIMPROF_PYROSCOPE_SUMMARY", "1", 1);
    /* Without --every, a report per upload interval (PYROSCOPE_UPLOAD_INTERVAL,
     * default 10 s, exported as "<ms>ms"). */
    const char *ui = getenv("PYROSCOPE_UPLOAD_INTERVAL");
    uint64_t ms;
    if (!o->every_given && ui != NULL && mpt_parse_duration_ms(ui, &ms) && ms > 0)
        o->every_ms = ms;
    api.config_free(cfg);
    mpt_pyro_close(&api);
    return 0;
fail:
    api.config_free(cfg);
    mpt_pyro_close(&api);
    return -1;
}
#else
int mpt_run_setup_pyroscope(run_opts *o, const char *preload)
{
    (void)o;
    (void)preload;
    fprintf(stderr, "mimprof run: --pyroscope: this mimprof was built without Pyroscope support "
                    "(<mimprof/pyroscope.h> was not found at build time)\n");
    return -1;
}
#endif
