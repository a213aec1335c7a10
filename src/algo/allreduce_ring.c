/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_ring.c: bandwidth-optimal allreduce: a ring reduce-scatter
 * over world near-equal blocks, then a ring allgather of the reduced
 * blocks, as one pipelined pass. Each rank sends and receives 2(n-1)/n of
 * the buffer. Every block is reduced in one order on one rank and then
 * copied, so the result is the same bits on every rank. */
#include "algo/algo_util.h"
#include "algo/ring.h"

/* Two ranks weave the ring's two passes into one stream (allreduce_pair.c)
 * unless built with -DCOLL_RING_PAIR_WEAVE=0: then they run the ring with
 * rounds bounded in bytes to the weave's lead, the same bound on the raw
 * data in flight without a second implementation of the pass. The weave
 * stays while it measures ahead of that round (docs/performance.md, "The
 * two-rank weave against a bounded round", has the side-by-side run):
 * the ring ends each round only once all its sends completed, so a round
 * of a few segments drains the pipe where the weave keeps it full. */
#ifndef COLL_RING_PAIR_WEAVE
#define COLL_RING_PAIR_WEAVE 1
#endif

/* The pass, with rounds bounded to round_bytes of each block (0: by
 * segments only). */
static coll_status_t ring(const coll_algo_ctx_t *ctx, void *buf, size_t count,
                          coll_dtype_t dt, coll_op_t op, size_t round_bytes) {
  coll_ring_pass_t p = {0};
  int n = ctx->world;
  p.fn = coll__algo_kernel("ring allreduce", dt, op);
  if (p.fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (n == 1 || count == 0) return COLL_OK;
  p.what = "ring allreduce";
  p.buf = buf;
  p.esz = coll_dtype_size(dt);
  p.q = count / (size_t)n;
  p.rem = count % (size_t)n;
  /* After the n-1 reduce steps rank r holds block r+1 complete, which is
   * the block it sends first in the n-1 allgather steps. */
  p.shift = 0;
  p.nsteps = 2 * (n - 1);
  p.nreduce = n - 1;
  p.blocks = NULL;
  p.round_bytes = round_bytes;
  return coll__ring_run(ctx, &p);
}

coll_status_t coll__allreduce_ring(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t count, coll_dtype_t dt,
                                   coll_op_t op) {
  if (ctx->world != 2) return ring(ctx, buf, count, dt, op, 0);
  /* It looks up the kernel and judges the count itself. */
  if (COLL_RING_PAIR_WEAVE)
    return coll__allreduce_pair(ctx, buf, count, dt, op);
  return coll__allreduce_ring_bounded(ctx, buf, count, dt, op);
}

coll_status_t coll__allreduce_ring_bounded(const coll_algo_ctx_t *ctx,
                                           void *buf, size_t count,
                                           coll_dtype_t dt, coll_op_t op) {
  return ring(ctx, buf, count, dt, op, COLL_RING_PAIR_LEAD_BYTES);
}
