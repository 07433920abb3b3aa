/* SPDX-License-Identifier: MIT */
/* A library that links libunwind: the graph checker must reject it. This
 * proves the allocator-graph test can fail. */
#include <libunwind.h>

int bad_unwind_depth(void)
{
    void *frames[8];
    return unw_backtrace(frames, 8);
}
