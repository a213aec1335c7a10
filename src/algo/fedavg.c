/* SPDX-License-Identifier: Apache-2.0 */
/* fedavg.c: federated averaging with a deadline. Rank 0 averages its own
 * contribution and those that arrive in time and sends the mean (with the
 * participant count) to everyone. A late contribution is received later and
 * dropped, so a slow rank never stalls a round: rank 0 keeps such requests
 * (and result sends a late rank has not taken yet) on a list, reaps them in
 * later rounds, and aborts and reaps them when the state is freed.
 *
 * A failure follows every algorithm's rule (algo.h): the transport is
 * aborted, every request of the round is reaped, the first error is
 * returned. Two outcomes are not failures of the comm: a contribution that
 * is late or of the wrong length is left out of the mean, and a rank whose
 * count differs from rank 0's gets COLL_ERR_LENGTH_MISMATCH. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"
#include "core/log.h"

#define HDR 8 /* participants (int32) + padding before the floats */

typedef struct fed_op {
  coll_treq_t req;
  void *buf; /* owned */
  struct fed_op *next;
} fed_op_t;

struct coll_fedavg {
  uint32_t round;
  fed_op_t *stale;
};

/* One round on rank 0. reqs[p] and bufs[p] belong to peer p. */
typedef struct fed_root {
  algo_run_t run;
  coll_fedavg_t *fed;
  int n;
  size_t count, bytes;
  algo_req_t *reqs;
  float **bufs;
  double *sum;
} fed_root_t;

/* Frees the stale requests that have completed; with block, all of them
 * (aborting the transport, so that they end at once). */
static void reap(coll_fedavg_t *fed, coll_transport_t *t, int block) {
  fed_op_t **pp = &fed->stale;
  while (*pp != NULL) {
    fed_op_t *op = *pp;
    size_t len;
    if (block)
      coll__t_abort_reap(t, op->req, COLL_OK);
    else if (coll__t_wait_for(t, op->req, 0, &len) == COLL_ERR_TIMEOUT) {
      pp = &op->next;
      continue;
    }
    *pp = op->next;
    free(op->buf);
    free(op);
  }
}

void coll__fedavg_free(coll_fedavg_t *fed, coll_transport_t *t) {
  if (fed == NULL) return;
  reap(fed, t, 1);
  free(fed);
}

/* Hands a pending request and its buffer to the state, for a later round
 * to reap. */
static int keep(coll_fedavg_t *fed, coll_treq_t req, void *buf) {
  fed_op_t *op = malloc(sizeof *op);
  if (op == NULL) return -1;
  op->req = req;
  op->buf = buf;
  op->next = fed->stale;
  fed->stale = op;
  return 0;
}

static coll_status_t no_memory(algo_run_t *run, const char *what) {
  coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  return coll__algo_fail(run, COLL_ERR_NO_MEMORY, "%s", what);
}

/* Posts a receive for every peer's contribution. */
static coll_status_t post_contribs(fed_root_t *R) {
  int p;
  for (p = 1; p < R->n; p++) {
    R->bufs[p] = malloc(R->bytes ? R->bytes : 1);
    if (R->bufs[p] == NULL) return no_memory(&R->run, "contribution buffers");
    COLL_CHECK(coll__algo_irecv(&R->run, &R->reqs[p], p, R->bufs[p], R->bytes));
  }
  return COLL_OK;
}

/* Adds the contributions that arrive before deadline_ms (absolute) to the
 * sum; a late one stays posted and goes to the state. *got counts the
 * ranks summed. */
static coll_status_t gather_contribs(fed_root_t *R, int64_t deadline_ms,
                                     int *got) {
  int p;
  size_t i;
  for (p = 1; p < R->n; p++) {
    algo_req_t *q = &R->reqs[p];
    size_t len = 0;
    coll_status_t s = coll__t_wait(R->run.ctx->t, q->h, deadline_ms, &len);
    if (s == COLL_ERR_TIMEOUT) { /* late: leave it posted, drop it later */
      if (keep(R->fed, q->h, R->bufs[p]) != 0)
        return no_memory(&R->run, "keeping a late contribution");
      q->live = 0;
      R->bufs[p] = NULL;
      continue;
    }
    q->live = 0; /* any other outcome completed the request */
    /* A contribution of another length is left out; the comm is fine. */
    if (s == COLL_ERR_LENGTH_MISMATCH || (s == COLL_OK && len != R->bytes)) {
      COLL_WARN(COLL_LOG_COLL,
                "federated average: rank %d's contribution is not %zu floats "
                "like rank 0's; left out",
                p, R->count);
      continue;
    }
    if (s != COLL_OK)
      return coll__algo_fail(&R->run, s, "contribution of rank %d", p);
    for (i = 0; i < R->count; i++) R->sum[i] += R->bufs[p][i];
    (*got)++;
  }
  return COLL_OK;
}

/* Sends the mean to every peer, each from its own copy: a late peer may
 * take it rounds later, so the sends go to the state, not waited here. */
static coll_status_t send_results(fed_root_t *R, const float *mean,
                                  int32_t got) {
  int p;
  for (p = 1; p < R->n; p++) {
    char *res = malloc(HDR + R->bytes);
    algo_req_t q;
    if (res == NULL) return no_memory(&R->run, "result buffers");
    memcpy(res, &got, sizeof got);
    memset(res + sizeof got, 0, HDR - sizeof got);
    if (R->bytes) memcpy(res + HDR, mean, R->bytes);
    if (coll__algo_isend(&R->run, &q, p, res, HDR + R->bytes) != COLL_OK) {
      free(res);
      return R->run.status;
    }
    if (keep(R->fed, q.h, res) != 0) {
      no_memory(&R->run, "keeping a result send");
      coll__t_abort_reap(R->run.ctx->t, q.h, R->run.status);
      free(res);
      return R->run.status;
    }
  }
  return COLL_OK;
}

static coll_status_t root_round(const coll_algo_ctx_t *ctx, coll_fedavg_t *fed,
                                float *data, size_t count, int64_t deadline_ms,
                                int *participants) {
  fed_root_t R;
  int p, got = 1;
  size_t i;
  memset(&R, 0, sizeof R);
  coll__algo_run_init(&R.run, ctx, "federated average", ALGO_PH_FED_CONTRIB);
  R.fed = fed;
  R.n = ctx->world;
  R.count = count;
  R.bytes = count * sizeof(float);
  R.reqs = calloc((size_t)R.n, sizeof *R.reqs);
  R.bufs = calloc((size_t)R.n, sizeof *R.bufs);
  R.sum = calloc(count ? count : 1, sizeof *R.sum);
  if (R.reqs == NULL || R.bufs == NULL || R.sum == NULL) {
    no_memory(&R.run, "round state");
    goto out;
  }
  if (post_contribs(&R) != COLL_OK) goto out;
  for (i = 0; i < count; i++) R.sum[i] = data[i];
  if (gather_contribs(&R, deadline_ms, &got) != COLL_OK) goto out;
  for (i = 0; i < count; i++) data[i] = (float)(R.sum[i] / got);
  coll__algo_run_phase(&R.run, ALGO_PH_FED_RESULT);
  if (send_results(&R, data, got) != COLL_OK) goto out;
  if (participants) *participants = got;
out:
  /* Contributions still posted end before their buffers go. */
  if (R.run.status != COLL_OK && R.reqs != NULL)
    coll__algo_cancel(&R.run, R.reqs, (size_t)R.n);
  for (p = 1; R.bufs != NULL && p < R.n; p++) free(R.bufs[p]);
  free(R.bufs);
  free(R.reqs);
  free(R.sum);
  reap(fed, ctx->t, R.run.status != COLL_OK);
  return coll__algo_done(&R.run);
}

static coll_status_t peer_round(const coll_algo_ctx_t *ctx, float *data,
                                size_t count, int *participants) {
  size_t bytes = count * sizeof(float), len = 0;
  char *res = coll__scratch_get(ctx->scratch, HDR + bytes);
  algo_run_t run;
  algo_req_t q[2];
  coll_status_t s;
  int32_t got;
  if (res == NULL) return COLL_ERR_NO_MEMORY;
  memset(q, 0, sizeof q);
  coll__algo_run_init(&run, ctx, "federated average", ALGO_PH_FED_RESULT);
  if (coll__algo_irecv(&run, &q[0], 0, res, HDR + bytes) != COLL_OK) goto fail;
  coll__algo_run_phase(&run, ALGO_PH_FED_CONTRIB);
  if (coll__algo_isend(&run, &q[1], 0, data, bytes) != COLL_OK ||
      coll__algo_wait(&run, &q[1], 0) != COLL_OK)
    goto fail;
  /* Not coll__algo_wait: a result of another length is this rank's count
   * differing from rank 0's, which leaves the comm usable. */
  s = coll__t_wait(ctx->t, q[0].h, ctx->deadline_ms, &len);
  if (s != COLL_ERR_TIMEOUT) q[0].live = 0;
  if (s == COLL_ERR_LENGTH_MISMATCH)
    return coll__err(s, "rank 0 averaged more than the %zu floats of this rank",
                     count);
  if (s == COLL_OK && len != HDR + bytes)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "rank 0 averaged %zu floats, this rank has %zu",
                     len > HDR ? (len - HDR) / sizeof(float) : 0, count);
  if (s != COLL_OK) {
    coll__algo_fail(&run, s, "result from rank 0");
    goto fail;
  }
  memcpy(&got, res, sizeof got);
  if (bytes) memcpy(data, res + HDR, bytes);
  if (participants) *participants = got;
  return COLL_OK;
fail:
  coll__algo_cancel(&run, q, 2);
  return coll__algo_done(&run);
}

coll_status_t coll__fedavg(const coll_algo_ctx_t *ctx, coll_fedavg_t **state,
                           float *data, size_t count, int64_t deadline_ms,
                           int *participants) {
  coll_algo_ctx_t round = *ctx;
  if (ctx->world == 1) {
    if (participants) *participants = 1;
    return COLL_OK;
  }
  if (*state == NULL && (*state = calloc(1, sizeof **state)) == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "federated average: out of memory");
  /* Tags count this comm's rounds of federated average. */
  round.seq = (*state)->round++;
  if (ctx->rank == 0)
    return root_round(&round, *state, data, count, deadline_ms, participants);
  return peer_round(&round, data, count, participants);
}
