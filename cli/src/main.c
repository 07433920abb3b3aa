/* SPDX-License-Identifier: MIT */
/* mimprof: profile any program's heap, read the result, see it as a flame
 * graph. Dispatches to the subcommands. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "views.h"

#ifndef MPT_VERSION
#define MPT_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        mpt_usage(stderr, NULL);
        return MPT_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        mpt_usage(stdout, NULL);
        return MPT_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("mimprof %s\n", MPT_VERSION);
        return MPT_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(argv[2], "image") == 0) {
            char *help[] = {argv[2], (char *)"--help", NULL};
            return mpt_cmd_image(2, help);
        }
        mpt_usage(stdout, argc > 2 ? argv[2] : NULL);
        return MPT_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return mpt_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "top") == 0)
        return mpt_cmd_top(argc - 1, argv + 1);
    if (strcmp(cmd, "flame") == 0)
        return mpt_cmd_flame(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return mpt_cmd_diff(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return mpt_cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "image") == 0)
        return mpt_cmd_image(argc - 1, argv + 1);
    if (strcmp(cmd, "ctl") == 0)
        return mpt_cmd_ctl(argc - 1, argv + 1);
    fprintf(stderr, "mimprof: unknown command '%s' (see mimprof --help)\n", cmd);
    return MPT_EXIT_USAGE;
}
