/* SPDX-License-Identifier: MIT */
/* The stack depot never loops forever, even when its
 * chains hold a cycle -- what happens when the allocator hands out a block
 * the depot still uses (a program that allocates in a signal handler that
 * interrupted the allocator). Regression: mp_depot_clear at exit went
 * round such a cycle forever. Compiled with depot.c alone. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/* Runs fn in a child that has 20 s; true when it returned. */
static bool finishes(void (*fn)(void))
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(20);
        fn();
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static mp_stack *intern(uintptr_t pc)
{
    uintptr_t pcs[3] = {pc, pc + 1, pc + 2};
    return (mp_stack *)mp_depot_intern(pcs, 3, false);
}

static void self_cycle(void)
{
    mp_depot_init();
    mp_stack *a = intern(0x1000);
    a->next = a; /* the same block linked twice */
    mp_depot_clear();
    if (mp_depot_count() != 0)
        _exit(3);
}

static void two_cycle(void)
{
    mp_depot_init();
    mp_stack *a = intern(0x2000), *b = intern(0x3000);
    a->next = b;
    b->next = a;
    /* a lookup that lands in either chain, and a clear, both end */
    (void)intern(0x2000);
    (void)intern(0x3000);
    mp_depot_clear();
}

Test(depot, clear_ends_on_a_chain_with_a_cycle)
{
    cr_assert(finishes(self_cycle), "mp_depot_clear looped or crashed on a self-cycle");
    cr_assert(finishes(two_cycle), "intern or clear looped or crashed on a two-stack cycle");
}

Test(depot, interns_and_clears)
{
    mp_depot_init();
    const mp_stack *a = intern(0x4000), *b = intern(0x5000);
    cr_assert_eq(intern(0x4000), a);
    cr_assert_neq(a, b);
    cr_assert_eq(mp_depot_count(), 2);
    mp_depot_clear();
    cr_assert_eq(mp_depot_count(), 0);
}
