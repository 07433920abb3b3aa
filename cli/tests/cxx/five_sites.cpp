// SPDX-License-Identifier: MIT
// Five functions, five ways C++ allocates (test_alloc_sites.py): `new T`,
// `new T[]`, std::make_unique, a growing std::vector, a growing
// std::string. Everything allocated is kept until exit, so each site's
// memory is live in the exit report. noinline: each site is a frame.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

struct Node {
    Node *next;
    char payload[4088];
};

static std::vector<void *> keep;

__attribute__((noinline)) Node *site_new(Node *next)
{
    Node *n = new Node;
    n->next = next;
    return n;
}

__attribute__((noinline)) char *site_new_array(std::size_t n)
{
    char *p = new char[n];
    p[0] = 1;
    return p;
}

__attribute__((noinline)) std::unique_ptr<Node> site_make_unique()
{
    return std::make_unique<Node>();
}

__attribute__((noinline)) std::vector<int> *site_vector(int n)
{
    auto *v = new std::vector<int>;
    for (int i = 0; i < n; i++)
        v->push_back(i);
    return v;
}

__attribute__((noinline)) std::string *site_string(int n)
{
    auto *s = new std::string;
    for (int i = 0; i < n; i++)
        s->append("0123456789abcdef");
    return s;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
    Node *list = nullptr;
    std::size_t bytes = 0;
    for (int r = 0; r < rounds; r++) {
        list = site_new(list);
        keep.push_back(site_new_array(8192));
        keep.push_back(site_make_unique().release());
        keep.push_back(site_vector(1024));
        keep.push_back(site_string(128));
        bytes += sizeof(Node) * 2 + 8192;
    }
    std::printf("%d rounds, %zu bytes in the three direct sites\n", rounds, bytes);
    return list != nullptr && keep.size() == (std::size_t)rounds * 4 ? 0 : 1;
}
