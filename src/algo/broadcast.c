/* SPDX-License-Identifier: Apache-2.0 */
/* broadcast.c: broadcast from root, two ways (the CPU backend chooses by
 * size, cpu/rooted.c): down a binomial tree (log2 n message latencies), or
 * down a pipelined chain root -> root+1 -> ... in segments, so the time is
 * about bytes/bandwidth plus one segment per hop. */
#include <string.h>

#include "algo/algo_util.h"

#define BCAST_MAX_CHILDREN 32

static coll_status_t bcast_tree(algo_run_t *run, char *buf, size_t bytes,
                                int root) {
  const coll_algo_ctx_t *ctx = run->ctx;
  int n = ctx->world, vr = (ctx->rank - root + n) % n, mask = 1, k = 0;
  algo_req_t req[BCAST_MAX_CHILDREN];
  coll_status_t s = COLL_OK;
  memset(req, 0, sizeof req);
  /* The parent is vr with its lowest set bit cleared; the children are
   * vr + 2^j for the powers of two below that bit. */
  for (; mask < n; mask <<= 1) {
    if (vr & mask) {
      int parent = (vr - mask + root) % n;
      s = coll__algo_irecv(run, &req[0], parent, buf, bytes);
      if (s == COLL_OK) s = coll__algo_wait(run, &req[0], bytes);
      if (s != COLL_OK) goto out;
      break;
    }
  }
  /* Largest subtree first: it has the longest way to go. */
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask >= n) continue;
    s = coll__algo_isend(run, &req[k], (vr + mask + root) % n, buf, bytes);
    if (s != COLL_OK) goto out;
    k++;
  }
  while (k > 0) {
    s = coll__algo_wait(run, &req[--k], 0);
    if (s != COLL_OK) goto out;
  }
out:
  if (s != COLL_OK) coll__algo_cancel(run, req, BCAST_MAX_CHILDREN);
  return s;
}

static coll_status_t bcast_chain(algo_run_t *run, char *buf, size_t bytes,
                                 int root) {
  const coll_algo_ctx_t *ctx = run->ctx;
  int n = ctx->world, vr = (ctx->rank - root + n) % n;
  int from = vr > 0 ? (ctx->rank + n - 1) % n : -1;
  int to = vr < n - 1 ? (ctx->rank + 1) % n : -1;
  /* At least about 2n segments, so the n hops of pipeline fill cost no
   * more than half the transfer itself. */
  size_t seg = bytes / (2 * (size_t)n) + 1;
  if (seg > ctx->seg_bytes) seg = ctx->seg_bytes;
  return coll__algo_stream(run, from, to, buf, bytes, seg);
}

coll_status_t coll__broadcast_tree(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t bytes, int root) {
  algo_run_t run;
  if (ctx->world == 1 || bytes == 0) return COLL_OK;
  coll__algo_run_init(&run, ctx, "tree broadcast", ALGO_PH_BCAST);
  (void)bcast_tree(&run, buf, bytes, coll__ctx_pos(ctx, root));
  return coll__algo_done(&run);
}

coll_status_t coll__broadcast_chain(const coll_algo_ctx_t *ctx, void *buf,
                                    size_t bytes, int root) {
  algo_run_t run;
  if (ctx->world == 1 || bytes == 0) return COLL_OK;
  coll__algo_run_init(&run, ctx, "chain broadcast", ALGO_PH_BCAST);
  (void)bcast_chain(&run, buf, bytes, coll__ctx_pos(ctx, root));
  return coll__algo_done(&run);
}
