/* SPDX-License-Identifier: MIT */
// A small C++ program that allocates through the kinds of functions
// C++ names are made of: a member of a class template in a namespace
// (shop::Cache<shop::Item>::put, into a std::map of std::unique_ptr), a
// free function template, a lambda, an anonymous namespace, a virtual
// function, operator new[] and std::vector growth (libstdc++ frames).
// Usage: shop ROUNDS
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shop {

struct Item {
    char payload[4000];
    int n;
};

template <class T> class Cache {
  public:
    __attribute__((noinline)) void put(const std::string &key)
    {
        items_[key] = std::unique_ptr<T>(new T());
    }
    std::size_t size() const { return items_.size(); }

  private:
    std::map<std::string, std::unique_ptr<T>> items_;
};

template <class T> __attribute__((noinline)) std::vector<T> *make_vector(std::size_t n)
{
    auto *v = new std::vector<T>();
    v->resize(n);
    return v;
}

__attribute__((noinline)) std::vector<char *> fill(std::size_t n)
{
    std::vector<char *> out;
    auto alloc = [](std::size_t size) __attribute__((noinline))
    {
        char *p = new char[size];
        __asm__ volatile("" : : "r"(p) : "memory");
        return p;
    };
    for (std::size_t i = 0; i < n; i++)
        out.push_back(alloc(3000 + i));
    return out;
}

struct Shape {
    virtual ~Shape() = default;
    virtual std::string *describe() const = 0;
};

struct Square : Shape {
    __attribute__((noinline)) std::string *describe() const override
    {
        return new std::string(5000, 'x');
    }
};

} // namespace shop

namespace {
__attribute__((noinline)) void *scratch(std::size_t n)
{
    void *p = std::malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory"); // no tail call: this frame stays
    return p;
}
} // namespace

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
    auto &cache = *new shop::Cache<shop::Item>(); // live at exit: never destroyed
    std::vector<void *> keep;
    shop::Square sq;
    const shop::Shape *shape = &sq;
    for (int r = 0; r < rounds; r++) {
        cache.put("key" + std::to_string(r));
        keep.push_back(shop::make_vector<int>(1000 + r));
        for (char *p : shop::fill(2))
            keep.push_back(p);
        keep.push_back(shape->describe());
        keep.push_back(scratch(4096));
    }
    std::printf("%zu items, %zu kept\n", cache.size(), keep.size());
    return 0;
}
