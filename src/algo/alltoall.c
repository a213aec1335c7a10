/* SPDX-License-Identifier: Apache-2.0 */
/* alltoall.c: every rank sends a block to every rank. All receives are
 * posted first, then the sends, rank + 1 first, so that no rank is every
 * rank's first target at once; then everything is waited. A block whose
 * length differs from the one its receiver expects is a mismatch of the
 * callers' counts, not of the ranks' message streams: it is consumed and
 * reported, and the transport stays up. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"

/* Up to this many ranks the requests live on the stack. */
#define A2A_STACK_RANKS 32

typedef struct a2a_run {
  algo_run_t run;
  const coll_a2a_t *a;
  algo_req_t *rq, *sq; /* by position */
  int bad_from;        /* comm rank of the first short or long block */
  size_t bad_got, bad_want;
} a2a_run_t;

static void note_mismatch(a2a_run_t *A, int from, size_t got, size_t want) {
  if (A->bad_from >= 0) return;
  A->bad_from = from;
  A->bad_got = got;
  A->bad_want = want;
}

/* The receive from position p: a length that differs is noted, anything
 * else that fails is the run's failure. */
static coll_status_t wait_recv(a2a_run_t *A, int p) {
  algo_req_t *q = &A->rq[p];
  size_t want = A->a->recv_bytes[q->peer], got = 0;
  coll_status_t s =
      coll__t_wait(A->run.ctx->t, q->h, A->run.ctx->deadline_ms, &got);
  if (s != COLL_ERR_TIMEOUT) q->live = 0;
  if (s == COLL_ERR_LENGTH_MISMATCH || (s == COLL_OK && got != want)) {
    coll__err_clear();
    note_mismatch(A, q->peer, got, want);
    return COLL_OK;
  }
  if (s != COLL_OK)
    return coll__algo_fail(&A->run, s, "receive from rank %d", q->peer);
  return COLL_OK;
}

static coll_status_t exchange(a2a_run_t *A) {
  const coll_algo_ctx_t *ctx = A->run.ctx;
  const coll_a2a_t *a = A->a;
  int n = ctx->world, me = coll__ctx_rank(ctx, ctx->rank), i;
  for (i = 1; i < n; i++) {
    int p = (ctx->rank - i + n) % n, r = coll__ctx_rank(ctx, p);
    COLL_CHECK(
        coll__algo_irecv(&A->run, &A->rq[p], p, a->recv[r], a->recv_bytes[r]));
  }
  for (i = 1; i < n; i++) {
    int p = (ctx->rank + i) % n, r = coll__ctx_rank(ctx, p);
    COLL_CHECK(
        coll__algo_isend(&A->run, &A->sq[p], p, a->send[r], a->send_bytes[r]));
  }
  /* This rank's own block, as if it had been sent. */
  if (a->send_bytes[me] != a->recv_bytes[me])
    note_mismatch(A, me, a->send_bytes[me], a->recv_bytes[me]);
  else if (a->send_bytes[me] > 0 && a->recv[me] != a->send[me])
    memcpy(a->recv[me], a->send[me], a->send_bytes[me]);
  for (i = 1; i < n; i++) COLL_CHECK(wait_recv(A, (ctx->rank - i + n) % n));
  for (i = 1; i < n; i++)
    COLL_CHECK(coll__algo_wait(&A->run, &A->sq[(ctx->rank + i) % n], 0));
  return COLL_OK;
}

coll_status_t coll__alltoallv(const coll_algo_ctx_t *ctx, const coll_a2a_t *a,
                              int *bad_from) {
  algo_req_t stack[2 * A2A_STACK_RANKS];
  a2a_run_t A;
  int n = ctx->world, me = coll__ctx_rank(ctx, ctx->rank);
  memset(&A, 0, sizeof A);
  A.a = a;
  A.bad_from = -1;
  *bad_from = -1;
  coll__algo_run_init(&A.run, ctx, "alltoall", ALGO_PH_ALLTOALL);
  if (n <= A2A_STACK_RANKS) {
    memset(stack, 0, sizeof stack);
    A.rq = stack;
  } else if ((A.rq = calloc(2 * (size_t)n, sizeof *A.rq)) == NULL) {
    (void)coll__algo_fail(&A.run, COLL_ERR_NO_MEMORY, "%d requests", 2 * n);
    return coll__algo_done(&A.run);
  }
  A.sq = A.rq + n;
  if (exchange(&A) != COLL_OK) coll__algo_cancel(&A.run, A.rq, 2 * (size_t)n);
  if (A.rq != stack) free(A.rq);
  if (A.run.status != COLL_OK) return coll__algo_done(&A.run);
  *bad_from = A.bad_from;
  if (A.bad_from < 0) return COLL_OK;
  return coll__err(COLL_ERR_LENGTH_MISMATCH,
                   "rank %d expected %zu bytes from rank %d, which sent %zu "
                   "(its send count and this rank's receive count differ)",
                   me, A.bad_want, A.bad_from, A.bad_got);
}
