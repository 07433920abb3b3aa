/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command and its preload runtime: the entry
 * points of libmimprof-pyroscope, resolved with dlopen()/dlsym(), and
 * the line that sums up a process's uploads.
 *
 * The package graph is pyroscope -> profiling, never the reverse, so
 * neither `mimprof run` nor the preload objects link the adapter: both
 * load it at run time when an upload is asked for (see
 * pyroscope-adapter/INTEGRATION.md). Only its header is used at build
 * time, for the prototypes and mp_pyro_stats; without it
 * (MPT_HAVE_PYROSCOPE 0) this interface is empty and callers say that
 * Pyroscope support was not built.
 *
 * No allocation of its own; dlopen() allocates through the process's
 * malloc, so call it outside any allocation hook. */
#ifndef MIMPROF_TOOL_PYRO_API_H
#define MIMPROF_TOOL_PYRO_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef MPT_HAVE_PYROSCOPE
#define MPT_HAVE_PYROSCOPE 0
#endif

/* The file name of the library (its soname) and of its development link. */
#define MPT_PYRO_SONAME  "libmimprof-pyroscope.so.0"
#define MPT_PYRO_DEVNAME "libmimprof-pyroscope.so"

#if MPT_HAVE_PYROSCOPE
#include <mimprof/pyroscope.h>

/* One pointer per function used, typed from the header's prototypes. */
typedef struct mpt_pyro_api {
    void *lib; /* dlopen() handle; NULL when not loaded */
    void *dep; /* the sibling libmimprof-profiling, when loaded for it */
    __typeof__(mp_pyro_strerror) *strerror;
    __typeof__(mp_pyro_config_new) *config_new;
    __typeof__(mp_pyro_config_free) *config_free;
    __typeof__(mp_pyro_config_error) *config_error;
    __typeof__(mp_pyro_config_from_env) *config_from_env;
    __typeof__(mp_pyro_config_export_env) *config_export_env;
    __typeof__(mp_pyro_config_validate) *config_validate;
    __typeof__(mp_pyro_config_set_server) *config_set_server;
    __typeof__(mp_pyro_config_set_app_name) *config_set_app_name;
    __typeof__(mp_pyro_config_add_tags) *config_add_tags;
    __typeof__(mp_pyro_config_set_tenant) *config_set_tenant;
    __typeof__(mp_pyro_config_set_basic_auth) *config_set_basic_auth;
    __typeof__(mp_pyro_config_set_bearer_token) *config_set_bearer_token;
    __typeof__(mp_pyro_config_set_protocol) *config_set_protocol;
    __typeof__(mp_pyro_config_set_upload_interval_ms) *config_set_upload_interval_ms;
    __typeof__(mp_pyro_config_set_spool) *config_set_spool;
    __typeof__(mp_pyro_config_set_flush_deadline_ms) *config_set_flush_deadline_ms;
    __typeof__(mp_pyro_config_set_logger) *config_set_logger;
    __typeof__(mp_pyro_agent_start) *agent_start;
    __typeof__(mp_pyro_agent_submit) *agent_submit;
    __typeof__(mp_pyro_agent_submit_as) *agent_submit_as;
    __typeof__(mp_pyro_agent_stop) *agent_stop;
    __typeof__(mp_pyro_agent_free) *agent_free;
    __typeof__(mp_pyro_agent_stats) *agent_stats;
    __typeof__(mp_pyro_agent_last_error) *agent_last_error;
} mpt_pyro_api;

/* dlopen()s `path` (a file name with a '/', or a name for the dynamic
 * loader's search) and resolves every entry point into *api. On failure
 * writes a sentence (dlerror()'s, or the missing symbol) into err and
 * leaves nothing loaded.
 *
 * With `sibling_profiling`, a libmimprof-profiling.so.0 in the same
 * directory is loaded first, so that the adapter's NEEDED entry resolves
 * to it (an install prefix outside the loader's path). Only for a process
 * that has not loaded the profiling library already: in a preloaded
 * process the adapter must share the preload's copy (same soname). */
bool mpt_pyro_open(const char *path, bool sibling_profiling, mpt_pyro_api *api, char *err,
                   size_t errlen);

/* The file the loaded library came from (dladdr), or "" . */
void mpt_pyro_path(const mpt_pyro_api *api, char *out, size_t outlen);

/* dlclose()s the library. */
void mpt_pyro_close(mpt_pyro_api *api);

/* The upload summary of this process (the collector's, for all the
 * processes it uploads for; or a process's that uploads itself) from its
 * agent's counters `st`, plus `unsent` reports that never reached the
 * agent: into line[cap], one line ending in '\n'. When anything was
 * lost, spooled or failed, every counter, and `last_error` unless it is
 * ""; else, with `always`, how many profiles went to service `app`;
 * else "". One formatter, so that both say it in the same words. Returns
 * whether there is a line. */
bool mpt_pyro_summary(const mp_pyro_stats *st, uint64_t unsent, const char *last_error,
                      const char *app, bool always, char *line, size_t cap);
#endif

#endif
