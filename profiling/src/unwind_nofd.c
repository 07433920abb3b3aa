/* SPDX-License-Identifier: MIT */
/* libunwind without file descriptors.
 *
 * libunwind (1.6 to 1.8, every architecture) checks that an address is
 * readable, whenever it validates memory (CONSERVATIVE_CHECKS, the
 * default build: every unw_step of a frame its trace cache has not seen),
 * by writing one byte from it into a pipe it keeps open and reading the
 * byte back. The pipe's descriptors are ordinary low numbers: a program
 * that closes every descriptor and opens its own files gets those numbers
 * back, and libunwind then reads a byte from the program's file, writes a
 * byte of memory into another, or, when the read fails, closes both and
 * opens a new pipe over whatever numbers are free. No setting turns this
 * off for local unwinding.
 *
 * So the object holding the unwinder gets a validator that needs no
 * descriptor: its calls of pipe2/pipe, read, write, syscall and close are
 * bound (their GOT slots, in that object only) to the functions below.
 *   pipe2/pipe  return two fake descriptors (negative numbers no kernel
 *               hands out); nothing is opened.
 *   read        of one byte (libunwind's only one-byte read: draining the
 *               validation pipe) says "empty" (EAGAIN) without a system
 *               call, whatever the descriptor, so a pipe opened before
 *               this was installed is never read (or reopened) again.
 *   write, syscall(SYS_write)  of one byte (the validation write) probe
 *               the address instead: rt_sigprocmask with an invalid `how`
 *               copies the 8 bytes at the (page-aligned) address into the
 *               kernel before it looks at `how`, so it fails with EFAULT
 *               exactly when they are unreadable and with EINVAL, changing
 *               nothing, when they are readable. One system call instead
 *               of two, no descriptor, and a call every seccomp profile
 *               allows (process_vm_readv is in systemd's @debug set).
 *   close       of a fake descriptor does nothing.
 * Everything else passes through to the function the dynamic loader
 * would have bound. The program's own calls are untouched: only the
 * unwinder's object is patched (libunwind.so.8, or the object libunwind
 * is linked into statically).
 *
 * Installed once, before the first capture (mp_sampler_warm_up), under
 * the recursion guard: it may allocate (dlsym). */
#include "internal.h"

#if MP_HAVE_LIBUNWIND && defined(__linux__)

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* Descriptors the fake pipe hands out: negative, never -1 (libunwind's
 * "not open"). */
#define FAKE_R (-4242)
#define FAKE_W (-4243)

#if __SIZEOF_POINTER__ == 8
#define R_SYM ELF64_R_SYM
#else
#define R_SYM ELF32_R_SYM
#endif

static bool is_fake(int fd) { return fd == FAKE_R || fd == FAKE_W; }

/* What the dynamic loader would have bound each call to. */
static struct {
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    long (*syscall)(long, ...);
    int (*close)(int);
} real;

/* 1 when the byte at addr is readable, -1 (errno EFAULT) when not. */
static long probe(const void *addr)
{
    if (addr == NULL) { /* a NULL set is "no change" to the kernel, not a fault */
        errno = EFAULT;
        return -1;
    }
    long r = real.syscall(SYS_rt_sigprocmask, INT_MAX, addr, NULL, 8L);
    /* 8: the kernel's sigset_t (64 signals) on every Linux architecture */
    if (r != 0 && errno == EFAULT)
        return -1;
    return 1; /* EINVAL: readable (or the probe is unavailable: mincore said mapped) */
}

static int h_pipe2(int fds[2], int flags)
{
    (void)flags;
    fds[0] = FAKE_R;
    fds[1] = FAKE_W;
    return 0;
}

static int h_pipe(int fds[2]) { return h_pipe2(fds, 0); }

static ssize_t h_read(int fd, void *buf, size_t n)
{
    if (n == 1 || is_fake(fd)) {
        errno = EAGAIN;
        return -1;
    }
    return real.read(fd, buf, n);
}

static ssize_t h_write(int fd, const void *buf, size_t n)
{
    if (n == 1 || is_fake(fd))
        return probe(buf);
    return real.write(fd, buf, n);
}

static long h_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_write && (a[2] == 1 || is_fake((int)a[0])))
        return probe((const void *)a[1]);
    return real.syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int h_close(int fd) { return is_fake(fd) ? 0 : real.close(fd); }

#define HOOK_ADDR(f) ((uintptr_t)(f))
static const struct {
    const char *name;
    uintptr_t hook;
} HOOKS[] = {
    {"pipe2", HOOK_ADDR(h_pipe2)}, {"pipe", HOOK_ADDR(h_pipe)},       {"read", HOOK_ADDR(h_read)},
    {"write", HOOK_ADDR(h_write)}, {"syscall", HOOK_ADDR(h_syscall)}, {"close", HOOK_ADDR(h_close)},
};

/* The object's dynamic table gives addresses either relocated by the
 * loader (glibc on most architectures) or as link-time offsets. */
static uintptr_t dyn_ptr(uintptr_t base, uintptr_t v) { return v < base ? v + base : v; }

typedef struct relro {
    uintptr_t start, end;
} relro;

static void patch_slot(uintptr_t *slot, uintptr_t hook, const relro *ro)
{
    uintptr_t a = (uintptr_t)slot;
    if (a >= ro->start && a < ro->end) {
        /* BIND_NOW objects: the GOT is read-only after relocation. */
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        void *page = (void *)(a & ~(pg - 1));
        if (mprotect(page, pg, PROT_READ | PROT_WRITE) != 0)
            return;
        *slot = hook;
        mprotect(page, pg, PROT_READ);
        return;
    }
    *slot = hook;
}

static void patch_relocs(uintptr_t base, uintptr_t rel, size_t size, bool rela,
                         const ElfW(Sym) * symtab, const char *strtab, const relro *ro)
{
    size_t ent = rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel));
    for (size_t off = 0; off + ent <= size; off += ent) {
        const ElfW(Rel) *r = (const ElfW(Rel) *)(rel + off); /* r_offset, r_info lead both */
        size_t sym = R_SYM(r->r_info);
        if (sym == 0)
            continue;
        const char *name = strtab + symtab[sym].st_name;
        for (size_t i = 0; i < sizeof HOOKS / sizeof HOOKS[0]; i++)
            if (strcmp(name, HOOKS[i].name) == 0)
                patch_slot((uintptr_t *)(base + r->r_offset), HOOKS[i].hook, ro);
    }
}

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    relro *ro = arg;
    if (info->dlpi_addr != ro->start)
        return 0;
    ro->start = ro->end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            ro->start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            ro->end = ro->start + info->dlpi_phdr[i].p_memsz;
        }
    return 1;
}

void mp_unwind_nofd_install(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    /* POSIX: a dlsym() result converts to a function pointer. */
    *(void **)&real.read = dlsym(RTLD_DEFAULT, "read");
    *(void **)&real.write = dlsym(RTLD_DEFAULT, "write");
    *(void **)&real.syscall = dlsym(RTLD_DEFAULT, "syscall");
    *(void **)&real.close = dlsym(RTLD_DEFAULT, "close");
    if (!real.read || !real.write || !real.syscall || !real.close)
        return;
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1((const void *)(uintptr_t)&unw_backtrace, &info, (void **)&lm, RTLD_DL_LINKMAP) ==
            0 ||
        lm == NULL)
        return;
    uintptr_t base = (uintptr_t)lm->l_addr;
    relro ro = {.start = base};
    if (dl_iterate_phdr(find_relro, &ro) == 0)
        ro.start = ro.end = 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    uintptr_t jmprel = 0, rel = 0, rela = 0;
    size_t pltrelsz = 0, relsz = 0, relasz = 0;
    long pltrel = DT_RELA;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            symtab = (const ElfW(Sym) *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = (const char *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_JMPREL:
            jmprel = dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            pltrelsz = d->d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (long)d->d_un.d_val;
            break;
        case DT_RELA:
            rela = dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_RELASZ:
            relasz = d->d_un.d_val;
            break;
        case DT_REL:
            rel = dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_RELSZ:
            relsz = d->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (symtab == NULL || strtab == NULL)
        return;
    /* PLT slots, and GLOB_DAT slots of objects built with -fno-plt. */
    if (jmprel != 0)
        patch_relocs(base, jmprel, pltrelsz, pltrel == DT_RELA, symtab, strtab, &ro);
    if (rela != 0)
        patch_relocs(base, rela, relasz, true, symtab, strtab, &ro);
    if (rel != 0)
        patch_relocs(base, rel, relsz, false, symtab, strtab, &ro);
}

#else

void mp_unwind_nofd_install(void) {}

#endif
