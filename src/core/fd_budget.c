/* SPDX-License-Identifier: Apache-2.0 */
/* fd_budget.c: a listener's share of the fd limit. */
#include "core/fd_budget.h"

#include <sys/resource.h>

int coll__fd_budget(int share, int lo, int hi) {
  struct rlimit rl;
  rlim_t n = (rlim_t)hi;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur / (rlim_t)share < n)
    n = rl.rlim_cur / (rlim_t)share;
  return n < (rlim_t)lo ? lo : (int)n;
}
