/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_two_level.c: allreduce over hosts that each hold `local`
 * ranks. With positions grouped by host (topo.h), host h holds positions
 * h*local .. h*local+local-1; the rank at local index i:
 *
 *   1. reduce-scatter within the host: slice i of the buffer (an even split
 *      in `local` slices) ends on it, reduced over the host;
 *   2. allreduce of slice i with the rank of local index i on every other
 *      host (a ring across hosts, one per local index, all at once);
 *   3. allgather within the host: every rank gets every slice.
 *
 * Per rank, 2(H-1)/H of a slice, 1/local of the buffer, crosses between
 * hosts, where the flat ring sends 2(n-1)/n of the buffer from every rank
 * and the `local` ranks of a host share its link. Steps 1 and 3 go where
 * the comm's transport routes this host's ranks: shared memory among them
 * where it has that (transport/route/), else its own links.
 *
 * Numerics: each element is first combined over the ranks of each host (in
 * the ring order of that host), then those per-host partial results over
 * the hosts, in the ring order of step 2. Each element is reduced on one
 * rank and copied everywhere else, so the result is the same bits on every
 * rank and from run to run; it may differ in the last bits from the flat
 * ring, which combines in another order. */
#include "algo/algo_util.h"
#include "algo/ring.h"
#include "algo/topo.h"

/* Sub-collective tag phases: clear of every algorithm's own (below 0x10)
 * and of the federated average's (0x7FE, 0x7FF). */
#define TWO_LEVEL_PH_INTRA_RS 0x10u
#define TWO_LEVEL_PH_CROSS 0x20u
#define TWO_LEVEL_PH_INTRA_AG 0x30u

static coll_status_t intra_pass(const coll_algo_ctx_t *ctx, char *buf,
                                size_t count, size_t esz, coll_reduce_fn_t fn,
                                int gather) {
  coll_ring_pass_t p = {0};
  int n = ctx->world;
  p.what = gather ? "two-level allreduce (allgather in the host)"
                  : "two-level allreduce (reduce-scatter in the host)";
  p.buf = buf;
  p.esz = esz;
  p.q = count / (size_t)n;
  p.rem = count % (size_t)n;
  /* Reduce-scatter: block i ends on local index i (shift -1, as in
   * reduce_scatter_ring.c); allgather: step 0 sends the rank's own. */
  p.shift = gather ? 0 : -1;
  p.nsteps = n - 1;
  p.nreduce = gather ? 0 : n - 1;
  p.fn = fn;
  p.blocks = NULL;
  return coll__ring_run(ctx, &p);
}

coll_status_t coll__allreduce_two_level(const coll_algo_ctx_t *ctx, void *buf,
                                        size_t count, coll_dtype_t dt,
                                        coll_op_t op) {
  const coll_topo_t *tp = ctx->topo;
  coll_algo_ctx_t host, cross;
  coll_reduce_fn_t fn;
  size_t esz = coll_dtype_size(dt), off, len;
  int local, h, i;
  if (!coll__topo_two_level(tp) || ctx->world != tp->world)
    return coll__allreduce_ring(ctx, buf, count, dt, op);
  fn = coll__algo_kernel("two-level allreduce", dt, op);
  if (fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (count == 0) return COLL_OK;
  local = tp->local;
  h = ctx->rank / local;
  i = ctx->rank % local;
  host = *ctx;
  /* Within the host, the segment of the endpoint that carries the host's
   * ranks where the comm's transport routes them to one (shared memory). */
  if (coll__t_hints(ctx->t)->seg_local > 0) {
    host.seg_bytes = coll__t_hints(ctx->t)->seg_local;
    host.seg_max_bytes = 0;
  }
  host.rank = i;
  host.world = local;
  host.ranks = tp->order + h * local;
  host.pos = NULL;
  host.topo = NULL;
  cross = host;
  cross.t = ctx->t;
  cross.seg_bytes = ctx->seg_bytes;
  cross.seg_max_bytes = ctx->seg_max_bytes;
  cross.rank = h;
  cross.world = tp->nhosts;
  cross.ranks = tp->column;
  cross.sub_phase = TWO_LEVEL_PH_CROSS;
  host.sub_phase = TWO_LEVEL_PH_INTRA_RS;
  COLL_CHECK(intra_pass(&host, buf, count, esz, fn, 0));
  len = coll__ring_block(count, local, i, &off);
  COLL_CHECK(
      coll__allreduce_ring(&cross, (char *)buf + off * esz, len, dt, op));
  host.sub_phase = TWO_LEVEL_PH_INTRA_AG;
  return intra_pass(&host, buf, count, esz, fn, 1);
}
