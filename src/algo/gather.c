/* SPDX-License-Identifier: Apache-2.0 */
/* gather.c: gather to a root and scatter from it. The root posts every
 * transfer at once and each other rank makes one: the root's link carries
 * the (n-1) blocks it must carry in any case, and a small block costs one
 * message latency instead of a tree's log2 n. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"

/* Up to this many peers the requests live on the stack. */
#define ROOTED_STACK_REQS 64

/* The root's side: one transfer with every other rank, block r at
 * buf + r * block (r a comm rank), all posted before any is waited. */
static coll_status_t root_side(algo_run_t *run, char *buf, size_t block,
                               int recv) {
  const coll_algo_ctx_t *ctx = run->ctx;
  algo_req_t stack[ROOTED_STACK_REQS], *req = stack;
  coll_status_t s = COLL_OK;
  int p, n = ctx->world;
  if (n > ROOTED_STACK_REQS) {
    req = calloc((size_t)n, sizeof *req);
    if (req == NULL)
      return coll__algo_fail(run, COLL_ERR_NO_MEMORY, "%d requests", n);
  } else {
    memset(stack, 0, sizeof stack);
  }
  for (p = 0; p < n && s == COLL_OK; p++) {
    char *at = buf + (size_t)coll__ctx_rank(ctx, p) * block;
    if (p == ctx->rank) continue;
    s = recv ? coll__algo_irecv(run, &req[p], p, at, block)
             : coll__algo_isend(run, &req[p], p, at, block);
  }
  for (p = 0; p < n && s == COLL_OK; p++)
    if (p != ctx->rank) s = coll__algo_wait(run, &req[p], recv ? block : 0);
  if (s != COLL_OK) coll__algo_cancel(run, req, (size_t)n);
  if (req != stack) free(req);
  return s;
}

/* Another rank's side: its one transfer with the root. */
static coll_status_t leaf_side(algo_run_t *run, void *mine, size_t block,
                               int root, int recv) {
  algo_req_t q;
  coll_status_t s;
  memset(&q, 0, sizeof q);
  s = recv ? coll__algo_irecv(run, &q, root, mine, block)
           : coll__algo_isend(run, &q, root, mine, block);
  if (s == COLL_OK) s = coll__algo_wait(run, &q, recv ? block : 0);
  if (s != COLL_OK) coll__algo_cancel(run, &q, 1);
  return s;
}

coll_status_t coll__gather(const coll_algo_ctx_t *ctx, const void *mine,
                           void *buf, size_t block, int root) {
  algo_run_t run;
  int rp = coll__ctx_pos(ctx, root);
  if (ctx->world == 1 || block == 0) return COLL_OK;
  coll__algo_run_init(&run, ctx, "gather", ALGO_PH_GATHER);
  if (ctx->rank == rp)
    (void)root_side(&run, buf, block, 1);
  else
    (void)leaf_side(&run, (void *)mine, block, rp, 0);
  return coll__algo_done(&run);
}

coll_status_t coll__scatter(const coll_algo_ctx_t *ctx, const void *buf,
                            void *mine, size_t block, int root) {
  algo_run_t run;
  int rp = coll__ctx_pos(ctx, root);
  if (ctx->world == 1 || block == 0) return COLL_OK;
  coll__algo_run_init(&run, ctx, "scatter", ALGO_PH_SCATTER);
  if (ctx->rank == rp)
    (void)root_side(&run, (char *)buf, block, 0);
  else
    (void)leaf_side(&run, mine, block, rp, 1);
  return coll__algo_done(&run);
}
