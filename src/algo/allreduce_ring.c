/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_ring.c: bandwidth-optimal allreduce: a ring reduce-scatter
 * over world near-equal blocks, then a ring allgather of the reduced
 * blocks, as one pipelined pass. Each rank sends and receives 2(n-1)/n of
 * the buffer. Every block is reduced in one order on one rank and then
 * copied, so the result is the same bits on every rank. */
#include "algo/algo_util.h"
#include "algo/ring.h"

coll_status_t coll__allreduce_ring(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t count, coll_dtype_t dt,
                                   coll_op_t op) {
  coll_ring_pass_t p;
  int n = ctx->world;
  /* It looks up the kernel and judges the count itself. */
  if (n == 2) return coll__allreduce_pair(ctx, buf, count, dt, op);
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
  return coll__ring_run(ctx, &p);
}
