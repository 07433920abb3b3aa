/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the control socket's request parser
 * (src/control/proto.h), which reads what any local process of the
 * network namespace may send. Every input must be refused or parsed into
 * a request whose values are in range, with a reason when refused. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes: the parser must not read past it
     * (ASan catches a read of the next byte). */
    char *line = malloc(size ? size : 1);
    if (line == NULL)
        return 0;
    memcpy(line, data, size);
    mpc_ctl_req req;
    char why[512];
    why[0] = '\0';
    if (mpc_ctl_parse(line, size, &req, why, sizeof why) != 0) {
        if (why[0] == '\0')
            abort(); /* a refusal always says why */
    } else if (req.cmd > MPC_CTL_SET || req.interval > MP_PROF_MAX_INTERVAL ||
               (req.cmd == MPC_CTL_SET && req.interval == 0)) {
        abort();
    }
    free(line);
    return 0;
}
