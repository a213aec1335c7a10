/* SPDX-License-Identifier: Apache-2.0 */
/* shm_round.c: the round protocol of the collectives designed for shared
 * memory (shm_round.h), over the transport's rounds. */
#include "algo/shm_round.h"

coll_status_t coll__shm_round_init(shm_run_t *S, const coll_algo_ctx_t *ctx,
                                   const char *what) {
  coll__algo_run_init(&S->run, ctx, what, ALGO_PH_SHM);
  S->R = coll__t_rounds(ctx->t);
  S->self = coll__ctx_rank(ctx, ctx->rank);
  S->world = ctx->world;
  S->round = 0;
  S->b = 0;
  if (S->R == NULL)
    return coll__err(COLL_ERR_INTERNAL,
                     "%s: the transport maps no shared memory", what);
  return COLL_OK;
}

coll_status_t coll__shm_round_wait(shm_run_t *S, int which, const char *what) {
  coll_status_t s =
      coll__rounds_wait(S->R, which, S->round, S->run.ctx->deadline_ms);
  if (s != COLL_OK)
    return coll__algo_fail(&S->run, s, "round %llu, %s",
                           (unsigned long long)S->round, what);
  return COLL_OK;
}

coll_status_t coll__shm_round_next(shm_run_t *S) {
  coll_status_t s;
  S->round = coll__rounds_next(S->R);
  S->b = (int)(S->round & 1);
  if (S->round <= 2) return COLL_OK;
  /* Every rank finished reading this buffer two rounds ago. */
  s = coll__rounds_wait(S->R, COLL_T_FLAG_OUT, S->round - 2,
                        S->run.ctx->deadline_ms);
  if (s != COLL_OK)
    return coll__algo_fail(&S->run, s, "round %llu, slot free",
                           (unsigned long long)S->round);
  return COLL_OK;
}

void coll__shm_round_post(shm_run_t *S, int which) {
  coll__rounds_post(S->R, which, S->round);
}
