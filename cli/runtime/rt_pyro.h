/* SPDX-License-Identifier: MIT */
/* Internal to the preload runtime: uploads to Pyroscope through the
 * dlopen()ed adapter (rt_pyro.c). */
#ifndef MIMPROF_CLI_RT_PYRO_H
#define MIMPROF_CLI_RT_PYRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PYROSCOPE_SERVER_ADDRESS is set: loads the adapter and builds, checks
 * and keeps the agents' configuration (PYROSCOPE_*, MIMPROF_PYROSCOPE_*).
 * At start, before the runtime's variables are removed. `quiet`: messages
 * only for errors. 1: uploading; -1: not (said why on stderr). */
int mpt_rt_pyro_setup(bool quiet);

/* Whether reports are uploaded (setup succeeded, not finished yet). */
bool mpt_rt_pyro_on(void);

/* Where the upload summary goes (mimprof run's MIMPROF_STATUS_DIR). */
void mpt_rt_pyro_set_status_dir(const char *dir);

/* Hands one report covering [from_ns, until_ns) (wall clock) to this
 * process's agent, started on first use; copied and gzipped there, never
 * blocks on the network. `peak`: the window's peak profile instead,
 * uploaded as its own profile types (peak_inuse_*, MP_PYRO_PEAK_PREFIX). */
void mpt_rt_pyro_submit(const uint8_t *buf, size_t len, int64_t from_ns, int64_t until_ns,
                        bool peak);

/* After the last report: stops the agent within its flush deadline and
 * says what was lost, spooled or failed. No more uploads. */
void mpt_rt_pyro_finish(void);

/* For `mimprof ctl status` (the control's state hook): service_name ("" when not
 * uploading), profiles uploaded and lost so far by this process's agent. */
const char *mpt_rt_pyro_progress(uint64_t *uploaded, uint64_t *lost);

/* In a forked child: forgets the parent's agent (its threads are not
 * here); the child starts its own at its first report. */
void mpt_rt_pyro_after_fork(void);

#endif
