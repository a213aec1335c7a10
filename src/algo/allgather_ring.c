/* SPDX-License-Identifier: Apache-2.0 */
/* allgather_ring.c: ring allgather of world blocks of block_bytes: n-1
 * steps, each forwarding the block that arrived in the step before,
 * pipelined by segment. */
#include "algo/algo_util.h"
#include "algo/ring.h"

coll_status_t coll__allgather_ring(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t block_bytes) {
  coll_ring_pass_t p = {0};
  int n = ctx->world;
  if (n == 1 || block_bytes == 0) return COLL_OK;
  p.what = "ring allgather";
  p.buf = buf;
  p.esz = 1;
  p.q = block_bytes;
  p.rem = 0;
  p.shift = 0; /* step 0 sends the rank's own block */
  p.nsteps = n - 1;
  p.nreduce = 0;
  p.fn = NULL;
  p.blocks = ctx->ranks; /* block r is comm rank r's */
  return coll__ring_run(ctx, &p);
}
