// SPDX-License-Identifier: MIT
// A C++ allocation site (a class template's member in a namespace) for
// test_backend_names.c: both backends must give its frames the same names.
#include <cstddef>
#include <string>

extern "C" void *pyro_names_alloc(std::size_t size);
extern "C" void pyro_names_run(void);

namespace shop
{
struct Item {
    std::string name;
};

template <class T> class Cache
{
  public:
    __attribute__((noinline)) void put(const std::string &key)
    {
        last_ = pyro_names_alloc(sizeof(T) + key.size());
        __asm__ volatile("" ::: "memory");
    }
    void *last_ = nullptr;
};

template class Cache<Item>;
} // namespace shop

extern "C" __attribute__((noinline)) void pyro_names_run(void)
{
    static shop::Cache<shop::Item> cache;
    cache.put("a key longer than the small-string buffer");
    __asm__ volatile("" ::: "memory");
}
