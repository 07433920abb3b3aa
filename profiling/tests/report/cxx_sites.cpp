/* SPDX-License-Identifier: MIT */
// C++ call sites with known names (see cxx_sites.h). Compiled -O2 -g.
#include "cxx_sites.h"

#include <cstddef>
#include <map>
#include <memory>
#include <new>
#include <string>

extern "C" void sites_capture(int line);

namespace shop {

struct Item {
    int n;
};

template <class T> class Cache {
  public:
    __attribute__((noinline)) void put(const std::string &key);
    __attribute__((noinline)) void put(int key);

  private:
    inline __attribute__((always_inline)) void touch()
    {
        sites_capture(__LINE__);
        __asm__ volatile("" ::: "memory");
    }
    std::map<std::string, std::unique_ptr<T>> items_;
};

template <class T> void Cache<T>::put(const std::string &key)
{
    touch();
    __asm__ volatile("" ::: "memory");
    (void)key;
}

template <class T> void Cache<T>::put(int key)
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory");
    (void)key;
}

template <class T> __attribute__((noinline)) T make()
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory");
    return T{1};
}

__attribute__((noinline)) void fill(std::size_t n)
{
    auto each = [](std::size_t i) __attribute__((noinline))
    {
        sites_capture(__LINE__);
        __asm__ volatile("" ::: "memory");
        return i;
    };
    volatile std::size_t sink = each(n);
    (void)sink;
}

struct Base {
    virtual ~Base() = default;
    virtual std::size_t size() const = 0;
};

struct Derived : Base {
    __attribute__((noinline)) std::size_t size() const override
    {
        sites_capture(__LINE__);
        __asm__ volatile("" ::: "memory");
        return 1;
    }
};

} // namespace shop

namespace {
__attribute__((noinline)) void work()
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory");
}
} // namespace

template class shop::Cache<shop::Item>;

extern "C" {

void cxx_site_member_template(void) { shop::Cache<shop::Item>().put(std::string("key")); }

void cxx_site_overload(void) { shop::Cache<shop::Item>().put(7); }

void cxx_site_function_template(void)
{
    volatile int n = shop::make<shop::Item>().n;
    (void)n;
}

void cxx_site_lambda(void) { shop::fill(3); }

void cxx_site_anonymous(void) { work(); }

void cxx_site_virtual(void)
{
    static shop::Derived d;
    const shop::Base *volatile b = &d;
    volatile std::size_t n = b->size();
    (void)n;
}

uintptr_t cxx_operator_new_address(void)
{
    void *(*f)(std::size_t) = &::operator new;
    return reinterpret_cast<uintptr_t>(f);
}

uintptr_t cxx_operator_new_array_address(void)
{
    void *(*f)(std::size_t) = &::operator new[];
    return reinterpret_cast<uintptr_t>(f);
}
}
