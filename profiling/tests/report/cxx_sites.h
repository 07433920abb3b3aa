/* SPDX-License-Identifier: MIT */
/* C++ call sites with known names (cxx_sites.cpp, compiled -O2 -g as
 * C++): each entry point runs one kind of C++ function that calls
 * sites_capture() (sites.h), so sites_pc lies in it. Declared for C. */
#ifndef MIMPROF_REPORT_TEST_CXX_SITES_H
#define MIMPROF_REPORT_TEST_CXX_SITES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* shop::Cache<shop::Item>::put(std::string const&): a member of a class
 * template; it inlines shop::Cache<shop::Item>::touch, which captures. */
void cxx_site_member_template(void);
/* shop::Cache<shop::Item>::put(int): an overload of the same name. */
void cxx_site_overload(void);
/* shop::make<shop::Item>(): a free function template. */
void cxx_site_function_template(void);
/* shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator(). */
void cxx_site_lambda(void);
/* (anonymous namespace)::work(). */
void cxx_site_anonymous(void);
/* shop::Derived::size() const, called through the base's vtable. */
void cxx_site_virtual(void);
/* The address of ::operator new(std::size_t) in libstdc++ (no DWARF). */
uintptr_t cxx_operator_new_address(void);
/* The address of ::operator new[](std::size_t). */
uintptr_t cxx_operator_new_array_address(void);

#ifdef __cplusplus
}
#endif

#endif
