/* SPDX-License-Identifier: Apache-2.0 */
/* shm_round.h: the round protocol the collectives designed for shared
 * memory share (transport/common/rounds.h). A round: wait until every
 * rank is done with this round's buffer from two rounds before (OUT), write
 * into this rank's slot, post IN; wait for every IN; read what the
 * collective needs from the ranks' slots; post OUT. Rounds count on every
 * rank alike because ranks run the same collectives in the same order.
 * Slots are indexed by transport (= comm) rank. One thread per run. */
#ifndef COLL_ALGO_SHM_ROUND_H
#define COLL_ALGO_SHM_ROUND_H

#include <stdint.h>

#include "algo/algo_util.h"

typedef struct shm_run {
  algo_run_t run;
  coll_rounds_t *R; /* the transport's rounds (transport.h) */
  int self;         /* this rank's comm (and transport) rank */
  int world;
  uint64_t round; /* the current round */
  int b;          /* its buffer: 0 or 1 */
} shm_run_t;

/* Starts a run of `what` (e.g. "shm broadcast"); COLL_ERR_INTERNAL when the
 * transport maps no shared memory. */
coll_status_t coll__shm_round_init(shm_run_t *S, const coll_algo_ctx_t *ctx,
                                   const char *what);

/* Starts the next round: once every rank is done with its buffer, returns
 * with S->round and S->b set, this rank's slot free to write. */
coll_status_t coll__shm_round_next(shm_run_t *S);

/* Posts this rank's flag `which` (COLL_T_FLAG_*) for the current round. */
void coll__shm_round_post(shm_run_t *S, int which);

/* Waits until every rank posted `which` for the current round; on a
 * failure records it (and fails the transport) with `what` as context. */
coll_status_t coll__shm_round_wait(shm_run_t *S, int which, const char *what);

/* Rank r's slot of the current round's buffer. */
static inline char *coll__shm_round_slot(const shm_run_t *S, int r) {
  return coll__rounds_slot(S->R, r, S->b);
}

#endif
