/* SPDX-License-Identifier: MIT */
/* Log lines through the configured sink, stderr by default. */
#define _GNU_SOURCE
#include <stdio.h>

#include "config_internal.h"

static const char *level_name(mp_pyro_log_level l)
{
    switch (l) {
    case MP_PYRO_LOG_ERROR:
        return "error";
    case MP_PYRO_LOG_WARN:
        return "warning";
    case MP_PYRO_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

void mp_pyro_log(const mp_pyro_config *cfg, mp_pyro_log_level level, const char *fmt, ...)
{
    if (!cfg || level > cfg->log_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cfg->log_fn)
        cfg->log_fn(cfg->log_user, level, msg);
    else
        fprintf(stderr, "mimprof-pyroscope: %s: %s\n", level_name(level), msg);
}
