/* SPDX-License-Identifier: Apache-2.0 */
/* barrier.c: the transport's barrier (or its dissemination barrier on
 * send/recv) under this collective's tag and deadline. */
#include "algo/algo_util.h"

coll_status_t coll__barrier(const coll_algo_ctx_t *ctx) {
  coll_status_t s;
  coll_origin_t o;
  char seen[160];
  int self = coll__ctx_rank(ctx, ctx->rank);
  if (ctx->world == 1) return COLL_OK;
  coll__err_clear();
  s = coll__t_barrier(ctx->t, COLL_ALGO_TAG(ctx->seq, ALGO_PH_BARRIER),
                      ctx->deadline_ms);
  if (s == COLL_OK) return COLL_OK;
  /* As for every algorithm: peers that wait on us learn of it at once. */
  coll__t_fail(ctx->t, s);
  if (coll__t_origin(ctx->t, &o) && o.rank != self) {
    coll__origin_text(&o, self, seen, sizeof seen);
    s = coll__err(coll__origin_status(&o), "%s", seen);
  }
  if (coll_last_error()[0] == '\0') coll__err(s, "%s", coll_strerror(s));
  coll__err_prefix("barrier");
  return s;
}
