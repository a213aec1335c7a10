/* SPDX-License-Identifier: Apache-2.0 */
/* agree_seen.c: the descriptor check's verdict where every rank sees every
 * rank's descriptor (the shared-memory allreduce, allreduce_shm.c). It
 * replays the agreement's recursive doubling (agree.c) on the descriptors
 * at hand and reports the state position 0 ends with: the same text the
 * agreement gives there, and the same on every rank, since every rank
 * replays the same exchange. */
#include <stdlib.h>

#include "algo/agree.h"

/* Folds position `from`'s state into position `at`'s, naming comm ranks. */
static void merge_at(const coll_algo_ctx_t *ctx, agree_state_t *st, int at,
                     int from, const agree_state_t *in) {
  coll__agree_merge(st, coll__ctx_rank(ctx, at), coll__ctx_rank(ctx, from), in);
}

/* The agreement's final state at position 0, as agree_body computes it at
 * every position at once: the ranks from p fold into rank - p, then the
 * ranks below p swap states with rank ^ mask (both sides of a swap read
 * the other's state from before it). */
static agree_state_t replay(const coll_algo_ctx_t *ctx, const coll_desc_t *all,
                            agree_state_t *st, agree_state_t *prev) {
  int n = ctx->world, p = 1, r, mask;
  while (p <= n / 2) p <<= 1;
  for (r = 0; r < n; r++) coll__agree_state_init(&st[r], &all[r]);
  for (r = p; r < n; r++) merge_at(ctx, &st[r - p], r - p, r, &st[r]);
  for (mask = 1; mask < p; mask <<= 1) {
    for (r = 0; r < p; r++) prev[r] = st[r];
    for (r = 0; r < p; r++) merge_at(ctx, &st[r], r, r ^ mask, &prev[r ^ mask]);
  }
  return st[0];
}

coll_status_t coll__agree_seen(const coll_algo_ctx_t *ctx,
                               const coll_desc_t *all,
                               const coll_desc_t *mine) {
  agree_state_t *st, *prev, verdict;
  int r, n = ctx->world;
  for (r = 0; r < n && coll__desc_equal(&all[r], mine); r++) {
  }
  if (r == n) return COLL_OK;
  st = calloc((size_t)n, sizeof *st);
  prev = calloc((size_t)n, sizeof *prev);
  if (st == NULL || prev == NULL) {
    /* Still a mismatch on every rank, without the details. */
    free(st);
    free(prev);
    coll__agree_state_init(&verdict, mine);
    return coll__agree_mismatch(&verdict, coll__ctx_rank(ctx, ctx->rank), mine);
  }
  verdict = replay(ctx, all, st, prev);
  free(st);
  free(prev);
  return coll__agree_mismatch(&verdict, coll__ctx_rank(ctx, ctx->rank), mine);
}
