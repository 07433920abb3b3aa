/* SPDX-License-Identifier: MIT */
/* dlopen() of libmimprof-pyroscope and the upload summary (see pyro_api.h). */
#define _GNU_SOURCE
#include "pyro_api.h"

#if MPT_HAVE_PYROSCOPE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* dlsym() returns an object pointer; POSIX guarantees it converts to a
 * function pointer. memcpy keeps -Wpedantic quiet about the conversion. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym needs same-size pointers");

bool mpt_pyro_open(const char *path, bool sibling_profiling, mpt_pyro_api *api, char *err,
                   size_t errlen)
{
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(field) {"mp_pyro_" #field, offsetof(mpt_pyro_api, field)}
        SYM(strerror),
        SYM(config_new),
        SYM(config_free),
        SYM(config_error),
        SYM(config_from_env),
        SYM(config_export_env),
        SYM(config_validate),
        SYM(config_set_server),
        SYM(config_set_app_name),
        SYM(config_add_tags),
        SYM(config_set_tenant),
        SYM(config_set_basic_auth),
        SYM(config_set_bearer_token),
        SYM(config_set_protocol),
        SYM(config_set_upload_interval_ms),
        SYM(config_set_spool),
        SYM(config_set_flush_deadline_ms),
        SYM(config_set_logger),
        SYM(agent_start),
        SYM(agent_submit),
        SYM(agent_submit_as),
        SYM(agent_stop),
        SYM(agent_free),
        SYM(agent_stats),
        SYM(agent_last_error),
#undef SYM
    };
    memset(api, 0, sizeof *api);
    const char *slash = strrchr(path, '/');
    if (sibling_profiling && slash != NULL) {
        char dep[4200];
        snprintf(dep, sizeof dep, "%.*s/libmimprof-profiling.so.0", (int)(slash - path), path);
        if (access(dep, R_OK) == 0)
            api->dep = dlopen(dep, RTLD_NOW | RTLD_LOCAL);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(err, errlen, "%s", e != NULL ? e : "dlopen failed");
        mpt_pyro_close(api);
        return false;
    }
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(h, syms[i].name);
        if (p == NULL) {
            snprintf(err, errlen, "%s has no %s (not a compatible libmimprof-pyroscope)", path,
                     syms[i].name);
            dlclose(h);
            mpt_pyro_close(api);
            return false;
        }
        memcpy((char *)api + syms[i].off, &p, sizeof p);
    }
    api->lib = h;
    return true;
}

void mpt_pyro_path(const mpt_pyro_api *api, char *out, size_t outlen)
{
    Dl_info info;
    void *sym;
    out[0] = '\0';
    if (api->lib == NULL)
        return;
    memcpy(&sym, &api->strerror, sizeof sym);
    if (dladdr(sym, &info) != 0 && info.dli_fname != NULL)
        snprintf(out, outlen, "%s", info.dli_fname);
}

void mpt_pyro_close(mpt_pyro_api *api)
{
    if (api->lib != NULL)
        dlclose(api->lib);
    if (api->dep != NULL)
        dlclose(api->dep);
    memset(api, 0, sizeof *api);
}

bool mpt_pyro_summary(const mp_pyro_stats *st, uint64_t unsent, const char *last_error,
                      const char *app, bool always, char *line, size_t cap)
{
    typedef unsigned long long ull;
    ull lost = st->dropped_queue_full + st->dropped_rejected + st->dropped_retry_exhausted +
               st->dropped_stop_deadline + st->dropped_spool_io + st->reports_failed + unsent;
    ull total = st->reports_queued + st->reports_failed + unsent;
    ull failed = st->fail_connect + st->fail_timeout + st->fail_tls + st->fail_rate_limited +
                 st->fail_server + st->fail_rejected + st->fail_other;
    if (cap > 0)
        line[0] = '\0';
    if (lost > 0 || st->spooled > 0 || failed > 0)
        snprintf(line, cap,
                 "mimprof: pyroscope: pid %ld: %llu of %llu profiles uploaded, %llu lost (queue "
                 "full %llu, rejected %llu, retries exhausted %llu, stop deadline %llu, spool i/o "
                 "%llu, not queued %llu), %llu spooled; failed requests: connect %llu, timeout "
                 "%llu, tls %llu, 429 %llu, 5xx %llu, rejected %llu, other %llu%s%s\n",
                 (long)getpid(), (ull)st->uploaded, total, lost, (ull)st->dropped_queue_full,
                 (ull)st->dropped_rejected, (ull)st->dropped_retry_exhausted,
                 (ull)st->dropped_stop_deadline, (ull)st->dropped_spool_io,
                 (ull)(st->reports_failed + unsent), (ull)st->spooled, (ull)st->fail_connect,
                 (ull)st->fail_timeout, (ull)st->fail_tls, (ull)st->fail_rate_limited,
                 (ull)st->fail_server, (ull)st->fail_rejected, (ull)st->fail_other,
                 last_error[0] != '\0' ? "; last error: " : "", last_error);
    else if (always)
        snprintf(line, cap,
                 "mimprof: pyroscope: pid %ld: %llu profile%s uploaded (service_name=%s)\n",
                 (long)getpid(), (ull)st->uploaded, st->uploaded == 1 ? "" : "s", app);
    return cap > 0 && line[0] != '\0';
}
#else
typedef int mpt_pyro_api_unused; /* ISO C: a translation unit declares something */
#endif
