/* SPDX-License-Identifier: Apache-2.0 */
/* fake_libcoll.c: a library that says it is libcoll 1.0.0, to check that
 * the Python package refuses a library of another major version. */
int coll_version(void);

int coll_version(void) { return 10000; }
