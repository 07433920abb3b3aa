/* SPDX-License-Identifier: MIT */
// Accuracy helper for the peer table: preloaded after libtcmalloc.so.4, it
// writes tcmalloc's sampled heap profile (MallocExtension::GetHeapSample,
// the data behind gperftools' /pprof/heap) at process exit to the file
// named by MIMPROF_BENCH_TCMALLOC_SAMPLE. tcmalloc exposes the sample only
// through this C++ API, hence a separate object; the workload stays C.
#include <gperftools/malloc_extension.h>

#include <cstdio>
#include <cstdlib>
#include <string>

__attribute__((destructor)) static void mimprof_bench_tcmalloc_dump()
{
    const char *path = std::getenv("MIMPROF_BENCH_TCMALLOC_SAMPLE");
    if (!path || !*path)
        return;
    std::string sample;
    MallocExtension::instance()->GetHeapSample(&sample);
    std::FILE *f = std::fopen(path, "w");
    if (!f) {
        std::perror(path);
        return;
    }
    std::fwrite(sample.data(), 1, sample.size(), f);
    if (std::fclose(f) != 0)
        std::perror(path);
}
