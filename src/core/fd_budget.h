/* SPDX-License-Identifier: Apache-2.0 */
/* fd_budget.h: how many file descriptors a listener may spend on clients
 * that have not authenticated yet, from this process's fd limit. */
#ifndef COLL_CORE_FD_BUDGET_H
#define COLL_CORE_FD_BUDGET_H

/* The soft RLIMIT_NOFILE divided by `share`, clamped to [lo, hi]. libcoll
 * does not raise the limit itself: a host program that still uses select()
 * breaks on descriptors above 1023, and the limit is the program's to set.
 * Any thread. */
int coll__fd_budget(int share, int lo, int hi);

#endif
