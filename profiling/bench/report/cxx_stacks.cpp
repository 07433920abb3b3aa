/* SPDX-License-Identifier: MIT */
// The C++ variant of bench_report.c's stacks (bench-report-cxx): the same
// shape (24 frames through 16 functions with 16 call sites each), but the
// functions are members of class templates in a namespace taking a
// std::string, so every frame has a long mangled name
// (_ZN4shop5CacheINS_4ItemILi3EEEE3putINSt7__cxx1112basic_string...).
#include <execinfo.h>

#include <cstdint>
#include <string>

extern "C" int bench_cxx_capture(int depth, void **frames, int max);

namespace {
std::uint64_t rng = 0x2545F4914F6CDD1Dull;
unsigned next_choice()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 40) & 15;
}
void **out_frames;
int out_max, out_n;
typedef void (*fn_t)(const std::string &, int);
fn_t table[16];
} // namespace

namespace shop {
template <int N> struct Item {
};

template <class T> class Cache {
  public:
    template <class K> __attribute__((noinline)) static void put(const K &key, int left);
};

#define CALL(k)                                                                                    \
    case k:                                                                                        \
        table[k](key, left - 1);                                                                   \
        break;

template <class T> template <class K> void Cache<T>::put(const K &key, int left)
{
    if (left == 0) {
        out_n = backtrace(out_frames, out_max);
        return;
    }
    switch (next_choice()) {
        CALL(0) CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7)
        CALL(8) CALL(9) CALL(10) CALL(11) CALL(12) CALL(13) CALL(14) CALL(15)
    }
    __asm__ volatile("" ::: "memory");
}
} // namespace shop

#define PUT(n) &shop::Cache<shop::Item<n>>::put<std::string>

extern "C" int bench_cxx_capture(int depth, void **frames, int max)
{
    static const fn_t fs[16] = {PUT(0),  PUT(1),  PUT(2),  PUT(3), PUT(4),  PUT(5),
                                PUT(6),  PUT(7),  PUT(8),  PUT(9), PUT(10), PUT(11),
                                PUT(12), PUT(13), PUT(14), PUT(15)};
    for (int i = 0; i < 16; i++)
        table[i] = fs[i];
    static const std::string key("key");
    out_frames = frames;
    out_max = max;
    out_n = 0;
    table[0](key, depth);
    return out_n;
}
