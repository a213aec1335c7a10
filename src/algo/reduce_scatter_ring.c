/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_scatter_ring.c: ring reduce-scatter over world blocks of count
 * elements, pipelined by segment; block r ends fully reduced on rank r. */
#include "algo/algo_util.h"
#include "algo/ring.h"

coll_status_t coll__reduce_scatter_ring(const coll_algo_ctx_t *ctx, void *buf,
                                        size_t count, coll_dtype_t dt,
                                        coll_op_t op) {
  coll_ring_pass_t p = {0};
  int n = ctx->world;
  p.fn = coll__algo_kernel("ring reduce-scatter", dt, op);
  if (p.fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (n == 1 || count == 0) return COLL_OK;
  p.what = "ring reduce-scatter";
  p.buf = buf;
  p.esz = coll_dtype_size(dt);
  p.q = count;
  p.rem = 0;
  /* Starting one block back makes the last block a rank receives, at step
   * n-2, its own: (r - 1 - (n-2) - 1) mod n = r. */
  p.shift = -1;
  p.nsteps = n - 1;
  p.nreduce = n - 1;
  p.blocks = ctx->ranks; /* block r is comm rank r's */
  return coll__ring_run(ctx, &p);
}
