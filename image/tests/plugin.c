/* SPDX-License-Identifier: MIT */
/* A shared library for the cross-process tests: a function a `fn` unit
 * names by dlsym, and code a `code` unit points into (by build-id). */
int imgtest_plugin_triple(int x);
int imgtest_plugin_triple(int x) { return 3 * x; }
