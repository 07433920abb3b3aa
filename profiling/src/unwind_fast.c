/* SPDX-License-Identifier: MIT */
/* The sampling path's stack walk (unwind_fast.h): a cache of each return
 * address's frame rule in front of libunwind.
 *
 * Why. unw_backtrace costs ~180 instructions before its first frame
 * (a register context saved, a cursor initialized) and ~100 per frame
 * (its per-thread trace cache looked up, the frame decoded), about 700
 * of a sample's ~1,700 on a five-frame stack (BENCHMARKS.md, "One
 * sample"). Almost every x86-64 frame follows one of two rules, which
 * this file caches per return address in one 64-bit word:
 *   CFA = RSP + k   or   CFA = RBP + k;
 *   the return address at CFA - 8;
 *   RBP unchanged, or saved at CFA - m.
 * Stepping such a frame is a table load and two memory reads.
 *
 * Where the rules come from: libunwind itself. A return address seen for
 * the first time is stepped by libunwind three times over a synthetic
 * stack (a static buffer whose every word is the address of another word
 * of it, a permutation, so that any value read back names the slot it was
 * read from), with RSP and RBP moved between the steps. The rule is kept
 * only if all three results fit one of the forms above exactly (same k,
 * same return-address slot, same RBP slot, whatever RSP and RBP were);
 * anything else (a signal frame, a DWARF expression such as a realigned
 * stack's CFA = *(RBP - 8), a rule on another register, a frame without
 * unwind information, whose step libunwind only guesses) is cached as
 * "not handled", and a walk meeting it returns -1: the caller captures
 * that stack with unw_backtrace. Never wrong, only sometimes not faster.
 * tests/test_unwind_fast.c compares both walks on real stacks.
 *
 * The buffer is shared: learning takes its lock by one exchange and never
 * waits (another thread learning: not learned now, that capture goes to
 * libunwind); a fork child frees it (mp_unwind_fast_fork_child). Readers of the table take no lock: a
 * slot is one word, stored whole.
 *
 * Like libunwind's own trace cache, a rule is kept for a return address
 * until mp_unwind_fast_flush: code unloaded (dlclose) and other code
 * loaded at the same address would reuse it; the session start flushes. */
#include "unwind_fast.h"

#include <stdbool.h>

#if MP_HAVE_LIBUNWIND && defined(__x86_64__) && defined(__linux__)

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <ucontext.h>

#include <mimprof/sampling.h> /* MP_PROF_HOOK_SECTION_ */

#define HOOK MP_PROF_HOOK_SECTION_

/* Slot word of return address ip (0 < ip < 2^47): (ip << 16) | rule,
 * rule < 2^16. A walk step computes t = (ip << 16) ^ word: the slot is
 * ip's iff t < 2^16, and then t is the rule itself. The key is ip times
 * 2^16 as a signed product, whose overflow flag is the bound test: it
 * overflows exactly when ip >= 2^47 (or ip < -2^47), and a negative ip
 * above that gives a key with bit 63 set, which no stored word has (their
 * ips are below 2^47), so t >= 2^16. Rule bits:
 *   bits 0-7   k / 8, the CFA's offset (k 8..2040; a special rule: 1 for
 *              the outermost frame, 0 for one not handled)
 *   bit 8      CFA from RBP (else from RSP)
 *   bit 9      special: no step
 *   bits 10-15 m / 8 when RBP is restored from CFA - m (m 16..504), 0
 *              when RBP is kept
 * so that the common step (RSP-based) tests bits 8-9 and the key's with
 * one mask, adds the low byte, times 8, to RSP, and finds whether RBP is
 * restored in the flags of the shift that extracts m / 8.
 * The slot is ip's low 12 bits: return addresses follow call
 * instructions at any byte offset, so these bits are as spread as any
 * hash of them, at one AND.
 * Return address 0 (where libunwind ends a stack) has key 0 and slot 0;
 * slot 0 is never the all-zero word, which would read as ip 0's RSP + 0
 * rule: empty, it holds K_NO under key 0 (EMPTY0), so that ip 0 always
 * takes the slow step, which ends the stack there. Every other empty slot
 * is 0, never ip's for an ip other than 0. */
#define R_FROM_BP 0x100u
#define R_SPECIAL 0x200u
#define R_M_SHIFT 10
#define R_K(r)    ((uintptr_t)((r)&0xffu) * 8)
#define R_M(r)    ((uintptr_t)((r) >> R_M_SHIFT) * 8)
#define R_BITS    16
#define R_LIMIT   ((uint64_t)1 << R_BITS)
#define MAX_K     2040u
#define MAX_M     504u
#define IP_LIMIT  ((uintptr_t)1 << (63 - R_BITS)) /* exclusive */
#define K_EMPTY   0u                              /* learn: busy, not learned now */
#define K_LAST    (R_SPECIAL | 1u)
#define K_NO      R_SPECIAL
#define EMPTY0    ((uint64_t)K_NO) /* slot 0 when empty: see above */

#define SLOTS 4096u /* 32 KiB */
static uint64_t g_rules[SLOTS] = {EMPTY0};

static inline uint32_t slot_of(uintptr_t ip) { return (uint32_t)ip & (SLOTS - 1); }
static inline uint64_t key_of(uintptr_t ip) { return (uint64_t)ip << R_BITS; }

/* ---- learning ---- */

#define PROBE_WORDS 1024u /* 8 KiB; a power of two */
static uintptr_t g_probe[PROBE_WORDS];
static _Atomic bool g_probe_busy; /* the buffer's lock, taken by exchange, never waited for */
static bool g_probe_ready;

/* Word i holds the address of word perm(i) = 7 i + 3 (mod PROBE_WORDS):
 * a value read from the buffer names its slot, and no rule that
 * dereferences a slot gives a result linear in RSP or RBP. */
static inline uint32_t perm(uint32_t i) { return (7u * i + 3u) & (PROBE_WORDS - 1); }
static inline uint32_t perm_inv(uint32_t j)
{
    return (j - 3u) * 439u & (PROBE_WORDS - 1); /* 7 * 439 = 3073 = 1 (mod 1024) */
}

/* The slot a value read from the buffer came from, or -1. */
static long slot_read(uintptr_t v)
{
    uintptr_t base = (uintptr_t)g_probe;
    if (v < base || v >= base + sizeof g_probe || (v - base) % 8 != 0)
        return -1;
    return (long)perm_inv((uint32_t)((v - base) / 8));
}

static uintptr_t at(uint32_t word) { return (uintptr_t)&g_probe[word]; }

/* One libunwind step of a frame at `ip` with the given RSP and RBP (every
 * other register 0). 1 with the caller's IP, SP (the CFA) and RBP; 0 at
 * the outermost frame; -1 on error or when libunwind has no unwind
 * information for ip (its step would be a frame-pointer guess). */
static int step_synthetic(uintptr_t ip, uintptr_t sp, uintptr_t bp, uintptr_t out[3])
{
    unw_context_t uc;
    unw_cursor_t c;
    unw_proc_info_t pi;
    unw_word_t v;
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)ip;
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
    uc.uc_mcontext.gregs[REG_RBP] = (greg_t)bp;
    if (unw_init_local(&c, &uc) < 0 || unw_get_proc_info(&c, &pi) < 0)
        return -1;
    int r = unw_step(&c);
    if (r <= 0)
        return r < 0 ? -1 : 0;
    if (unw_get_reg(&c, UNW_REG_IP, &v) < 0)
        return -1;
    out[0] = v;
    if (unw_get_reg(&c, UNW_REG_SP, &v) < 0)
        return -1;
    out[1] = v;
    if (unw_get_reg(&c, UNW_X86_64_RBP, &v) < 0)
        return -1;
    out[2] = v;
    return 1;
}

/* The rule of return address ip (lock held), K_NO when it has none of
 * the cached forms. */
static uint64_t learn_locked(uintptr_t ip)
{
    if (!g_probe_ready) {
        for (uint32_t i = 0; i < PROBE_WORDS; i++)
            g_probe[i] = at(perm(i));
        g_probe_ready = true;
    }
    /* runs: RSP, RBP (word indices); a and b differ in RBP, a and c in RSP */
    static const uint32_t sp_w[3] = {256, 256, 192}, bp_w[3] = {512, 576, 512};
    uintptr_t out[3][3];
    int n_last = 0;
    for (int i = 0; i < 3; i++) {
        int r = step_synthetic(ip, at(sp_w[i]), at(bp_w[i]), out[i]);
        if (r < 0)
            return K_NO;
        n_last += r == 0;
    }
    if (n_last == 3)
        return K_LAST;
    if (n_last != 0)
        return K_NO;
    uint64_t rule = 0;
    intptr_t k;
    if (out[0][1] == out[1][1]) { /* CFA did not follow RBP: RSP + k */
        k = (intptr_t)(out[0][1] - at(sp_w[0]));
        if ((intptr_t)(out[2][1] - at(sp_w[2])) != k)
            return K_NO;
    } else { /* RBP + k, whatever RSP was */
        k = (intptr_t)(out[0][1] - at(bp_w[0]));
        if ((intptr_t)(out[1][1] - at(bp_w[1])) != k || (intptr_t)(out[2][1] - at(bp_w[2])) != k)
            return K_NO;
        rule |= R_FROM_BP;
    }
    if (k < 8 || k > (intptr_t)MAX_K || k % 8 != 0)
        return K_NO;
    bool bp_kept = true, bp_slot = true;
    intptr_t m = 0;
    for (int i = 0; i < 3; i++) {
        uintptr_t cfa = out[i][1];
        long ra = slot_read(out[i][0]); /* the return address: read from CFA - 8 */
        if (ra < 0 || at((uint32_t)ra) != cfa - 8)
            return K_NO;
        bp_kept = bp_kept && out[i][2] == at(bp_w[i]);
        long bs = slot_read(out[i][2]);
        intptr_t mi = bs < 0 ? -1 : (intptr_t)(cfa - at((uint32_t)bs));
        if (i == 0)
            m = mi;
        bp_slot = bp_slot && bs >= 0 && mi == m;
    }
    if (bp_kept == bp_slot) /* neither, or (impossibly) both */
        return K_NO;
    if (bp_slot) {
        if (m < 16 || m > (intptr_t)MAX_M || m % 8 != 0)
            return K_NO;
        rule |= (uint64_t)(m / 8) << R_M_SHIFT;
    }
    return rule | (uint64_t)(k / 8);
}

static uint64_t learn(uintptr_t ip)
{
    if (atomic_exchange_explicit(&g_probe_busy, true, memory_order_acquire))
        return K_EMPTY; /* busy: this capture goes to libunwind */
    uint64_t r = learn_locked(ip);
    atomic_store_explicit(&g_probe_busy, false, memory_order_release);
    __atomic_store_n(&g_rules[slot_of(ip)], key_of(ip) | r, __ATOMIC_RELAXED);
    return r;
}

/* ---- the walk ---- */

/* A frame larger than this ends the walk with -1 (libunwind decides). */
#define MAX_FRAME ((uintptr_t)1 << 24)

/* The walk's step for what the common case does not cover: a return
 * address of 0 or outside (0, 2^47), one not learned (learned now), a
 * special rule, an RBP-based CFA. r = 1: step done (ip, sp, bp of the
 * caller); 0: the stack ends here, before ip; 2: it ends at ip; -1:
 * libunwind decides. The state goes in registers and comes back whole:
 * as an array (GCC packs its initializer of ip and sp into a vector
 * register), the walk kept ip and sp in one. */
typedef struct slow_step {
    uintptr_t ip, sp, bp;
    int r;
} slow_step;

static __attribute__((noinline, no_sanitize_address)) slow_step
step_slow(uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
    if (ip - 1 >= IP_LIMIT - 1) /* libunwind ends a stack at a zero return address too */
        return (slow_step){ip, sp, bp, ip == 0 ? 0 : -1};
    uint64_t t = key_of(ip) ^ __atomic_load_n(&g_rules[slot_of(ip)], __ATOMIC_RELAXED);
    if (t >= R_LIMIT) { /* not ip's slot */
        uint64_t r = learn(ip);
        if (r == K_EMPTY)
            return (slow_step){ip, sp, bp, -1}; /* not learned now */
        t = r;
    }
    if (t & R_SPECIAL)
        return (slow_step){ip, sp, bp, t == K_LAST ? 2 : -1};
    uintptr_t cfa = ((t & R_FROM_BP) ? bp : sp) + R_K(t);
    if (cfa - sp - 1 >= MAX_FRAME)
        return (slow_step){ip, sp, bp, -1}; /* callers live above their callees */
    if (R_M(t) != 0)
        bp = *(const uintptr_t *)(cfa - R_M(t));
    return (slow_step){*(const uintptr_t *)(cfa - 8), cfa, bp, 1};
}

/* Step i of a turn of n steps, inline, out already advanced past the
 * turn: stores ip at out[i - n] (where it differs from the value there,
 * noting the difference in `changed`), then either steps an RSP-based
 * frame (the common case) or leaves the turn with out just past ip (to
 * `slow`, or returning at the outermost frame). */
#define FAST_STEP(i, n, slow)                                                                      \
    do {                                                                                           \
        if (out[(i) - (n)] != ip) {                                                                \
            out[(i) - (n)] = ip;                                                                   \
            changed = true;                                                                        \
        }                                                                                          \
        int64_t key;                                                                               \
        if (__builtin_expect(__builtin_mul_overflow((int64_t)ip, (int64_t)R_LIMIT, &key), 0)) {    \
            out -= (n) - (i)-1;                                                                    \
            goto slow;                                                                             \
        }                                                                                          \
        uint64_t t = (uint64_t)key ^ __atomic_load_n(&g_rules[slot_of(ip)], __ATOMIC_RELAXED);     \
        if (__builtin_expect((t & not_fast) != 0, 0)) {                                            \
            out -= (n) - (i)-1;                                                                    \
            if (t == K_LAST) /* learned: the outermost frame (every walk ends at one) */           \
                RETURN((int)(out - pcs));                                                          \
            goto slow;                                                                             \
        }                                                                                          \
        /* CFA = RSP + k, k in 8..2040: above the frame by construction */                         \
        sp += R_K(t);                                                                              \
        ip = *(const uintptr_t *)(sp - 8);                                                         \
        uint64_t m8 = t >> R_M_SHIFT; /* t < 2^16 here: m / 8, or 0 */                             \
        if (m8 != 0)                                                                               \
            bp = ((const uintptr_t *)sp)[-(intptr_t)m8];                                           \
    } while (0)

#define RETURN(v)                                                                                  \
    do {                                                                                           \
        *changedp = changed;                                                                       \
        return (v);                                                                                \
    } while (0)

HOOK __attribute__((no_sanitize_address)) int
mp_unwind_fast(const mp_unwind_start *from, uintptr_t *pcs, int cap, bool *changedp)
{
    bool changed = false;
    uintptr_t ip = from->ip, sp = from->sp, bp = from->bp;
    uintptr_t *out = pcs;
    /* four steps a turn while four slots are left: one bound test per four */
    uintptr_t n = cap > 0 ? (uintptr_t)cap : 0;
    uintptr_t end = (uintptr_t)(pcs + n), end4 = n >= 4 ? (uintptr_t)(pcs + n - 3) : 0;
    /* t has a bit here unless the slot is ip's and the rule an RSP-based step */
    const uint64_t not_fast = ~(R_LIMIT - 1) | R_SPECIAL | R_FROM_BP;
    for (;;) {
        if ((uintptr_t)out < end4) {
            out += 4;
            FAST_STEP(0, 4, slow);
            FAST_STEP(1, 4, slow);
            FAST_STEP(2, 4, slow);
            FAST_STEP(3, 4, slow);
            continue;
        }
        if ((uintptr_t)out >= end)
            RETURN((int)(out - pcs));
        out += 1;
        FAST_STEP(0, 1, slow);
        continue;
    slow:; /* ip is stored at out[-1] */
        slow_step st = step_slow(ip, sp, bp);
        if (st.r < 0) {
            *changedp = true;
            return -1;
        }
        if (st.r != 1)
            RETURN((int)(out - pcs) - (st.r == 0)); /* 0: ip (0) is no frame */
        ip = st.ip;
        sp = st.sp;
        bp = st.bp;
    }
}

void mp_unwind_fast_flush(void)
{
    for (uint32_t i = 0; i < SLOTS; i++)
        __atomic_store_n(&g_rules[i], i == 0 ? EMPTY0 : 0, __ATOMIC_RELAXED);
}

/* In a fork child no thread is learning: a buffer taken by a parent's
 * thread that did not come along is free again. */
void mp_unwind_fast_fork_child(void)
{
    atomic_store_explicit(&g_probe_busy, false, memory_order_relaxed);
}

#else

int mp_unwind_fast(const mp_unwind_start *from, uintptr_t *pcs, int cap, bool *changed)
{
    (void)from;
    (void)pcs;
    (void)cap;
    *changed = true;
    return -1;
}

void mp_unwind_fast_flush(void) {}

void mp_unwind_fast_fork_child(void) {}

#endif
