/* SPDX-License-Identifier: Apache-2.0 */
/* topo.c: grouping ranks by host (a counting sort on the host number, so
 * ranks stay in rank order within their host). */
#include "algo/topo.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void coll__topo_free(coll_topo_t *tp) {
  free(tp->order);
  free(tp->pos);
  free(tp->column);
  memset(tp, 0, sizeof *tp);
}

/* Numbers the hosts 0..n-1 by their lowest rank into num[] and returns n.
 * The rendezvous numbers them so already (one pass); any other numbering
 * is renumbered (quadratic, but only for a table not made here). */
static int number_hosts(int world, const int *host_of, int *num) {
  int r, q, n = 0, dense = 1;
  for (r = 0; r < world && dense; r++) {
    if (host_of[r] < 0 || host_of[r] > n) dense = 0;
    if (host_of[r] == n) n++;
    num[r] = host_of[r];
  }
  if (dense) return n;
  for (n = 0, r = 0; r < world; r++) {
    num[r] = -1;
    for (q = 0; q < r && num[r] < 0; q++)
      if (host_of[q] == host_of[r]) num[r] = num[q];
    if (num[r] < 0) num[r] = n++;
  }
  return n;
}

coll_status_t coll__topo_init(coll_topo_t *tp, int world, int self,
                              const int *host_of) {
  int *num = NULL, *count = NULL, *first = NULL;
  int r, h, identity = 1, local;
  memset(tp, 0, sizeof *tp);
  tp->world = world;
  tp->identity = 1;
  tp->nhosts = 1;
  tp->local = world;
  if (host_of == NULL || world < 2) return COLL_OK;
  num = malloc((size_t)world * sizeof *num);
  count = calloc((size_t)world + 1, sizeof *count);
  first = malloc(((size_t)world + 1) * sizeof *first);
  tp->order = malloc((size_t)world * sizeof *tp->order);
  tp->pos = malloc((size_t)world * sizeof *tp->pos);
  if (num == NULL || count == NULL || first == NULL || tp->order == NULL ||
      tp->pos == NULL)
    goto oom;
  tp->nhosts = number_hosts(world, host_of, num);
  for (r = 0; r < world; r++) count[num[r]]++;
  first[0] = 0;
  for (h = 0; h < tp->nhosts; h++) first[h + 1] = first[h] + count[h];
  local = count[0];
  for (h = 0; h < tp->nhosts; h++)
    if (count[h] != local) local = 0;
  tp->local = local;
  memcpy(count, first, (size_t)tp->nhosts * sizeof *count); /* next slot */
  for (r = 0; r < world; r++) {
    int p = count[num[r]]++;
    tp->order[p] = r;
    tp->pos[r] = p;
    if (p != r) identity = 0;
  }
  if (local > 0 && tp->nhosts > 1) {
    int i = tp->pos[self] % local;
    tp->column = malloc((size_t)tp->nhosts * sizeof *tp->column);
    if (tp->column == NULL) goto oom;
    for (h = 0; h < tp->nhosts; h++) tp->column[h] = tp->order[h * local + i];
  }
  tp->identity = identity;
  free(num);
  free(count);
  free(first);
  return COLL_OK;
oom:
  free(num);
  free(count);
  free(first);
  coll__topo_free(tp);
  return coll__err(COLL_ERR_NO_MEMORY, "comm_create: out of memory (topology)");
}
