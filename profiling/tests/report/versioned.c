/* SPDX-License-Identifier: MIT */
/* A shared object with a versioned definition (.symver), as glibc has:
 * its .symtab names the function "mp_report_versioned@@MPTEST_1".
 * test_elf.c checks that the reader names it "mp_report_versioned". */
__attribute__((noinline)) int mp_report_versioned_impl(int x) { return x * 3 + 1; }
__asm__(".symver mp_report_versioned_impl, mp_report_versioned@@MPTEST_1");
