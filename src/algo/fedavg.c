/* SPDX-License-Identifier: Apache-2.0 */
/* fedavg.c: federated averaging with a deadline. Rank 0 averages its own
 * contribution and those that arrive in time and sends the mean (with the
 * participant count) to everyone. A late contribution is received later and
 * dropped, so a slow rank never stalls a round: rank 0 keeps such requests
 * (and result sends a late rank has not taken yet) on a list, reaps them in
 * later rounds, and aborts and reaps them at destroy. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "core/clock.h"
#include "core/error.h"

/* Phases above every algorithm's, so the tags never meet theirs. */
#define PHASE_CONTRIB 0x7FE
#define PHASE_RESULT 0x7FF
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

/* Frees the stale requests that have completed; with block, all of them
 * (the transport must have been aborted so they end at once). */
static void reap(coll_fedavg_t *fed, coll_transport_t *t, int block) {
  fed_op_t **pp = &fed->stale;
  while (*pp != NULL) {
    fed_op_t *op = *pp;
    size_t len;
    if (block)
      coll__t_abort_reap(t, op->req, COLL_OK);
    else if (t->ops.wait(t->ctx, op->req, 0, &len) == COLL_ERR_TIMEOUT) {
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

static int keep(coll_fedavg_t *fed, coll_treq_t req, void *buf) {
  fed_op_t *op = malloc(sizeof *op);
  if (op == NULL) return -1;
  op->req = req;
  op->buf = buf;
  op->next = fed->stale;
  fed->stale = op;
  return 0;
}

static coll_status_t root_round(const coll_algo_ctx_t *ctx, coll_fedavg_t *fed,
                                uint32_t round, float *data, size_t count,
                                int64_t deadline_ms, int *participants) {
  coll_transport_t *t = ctx->t;
  int n = ctx->world, p, got = 1;
  size_t bytes = count * sizeof(float), i;
  int64_t deadline = coll__now_ms() + deadline_ms;
  coll_treq_t *reqs = calloc((size_t)n, sizeof *reqs);
  float **bufs = calloc((size_t)n, sizeof *bufs);
  double *sum = calloc(count ? count : 1, sizeof *sum);
  coll_status_t s = COLL_OK;
  if (reqs == NULL || bufs == NULL || sum == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  for (p = 1; p < n && s == COLL_OK; p++) {
    bufs[p] = malloc(bytes ? bytes : 1);
    if (bufs[p] == NULL) s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
    else
      s = coll__t_irecv(t, p, COLL_ALGO_TAG(round, PHASE_CONTRIB),
                        bufs[p], bytes, &reqs[p]);
    if (s != COLL_OK) {
      free(bufs[p]);
      bufs[p] = NULL;
    }
  }
  for (i = 0; i < count; i++) sum[i] = data ? data[i] : 0;
  for (p = 1; p < n && s == COLL_OK; p++) {
    size_t len = 0;
    coll_status_t ws;
    if (bufs[p] == NULL) continue;
    ws = coll__t_wait(t, reqs[p], deadline, &len);
    if (ws == COLL_ERR_TIMEOUT) { /* late: leave it posted, drop it later */
      if (keep(fed, reqs[p], bufs[p]) != 0) {
        s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
        break;
      }
      reqs[p] = NULL;
      bufs[p] = NULL;
      continue;
    }
    reqs[p] = NULL; /* any other outcome completed the request */
    if (ws == COLL_OK && len != bytes)
      ws = coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "rank %d contributed %zu floats, rank 0 has %zu", p,
                     len / sizeof(float), count);
    if (ws == COLL_ERR_LENGTH_MISMATCH) continue; /* left out, not fatal */
    if (ws != COLL_OK) {
      s = ws;
      break;
    }
    for (i = 0; i < count; i++) sum[i] += bufs[p][i];
    got++;
  }
  if (s != COLL_OK) goto out;
  for (i = 0; i < count; i++) data[i] = (float)(sum[i] / got);
  /* Each peer gets its own copy: a late peer may take it rounds later. */
  for (p = 1; p < n && s == COLL_OK; p++) {
    char *res = malloc(HDR + bytes);
    coll_treq_t r;
    if (res == NULL) {
      s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
      break;
    }
    memcpy(res, &got, sizeof got);
    memset(res + sizeof got, 0, HDR - sizeof got);
    if (bytes) memcpy(res + HDR, data, bytes);
    s = coll__t_isend(t, p, COLL_ALGO_TAG(round, PHASE_RESULT), res,
                      HDR + bytes, &r);
    if (s != COLL_OK) {
      free(res);
      break;
    }
    if (keep(fed, r, res) != 0) {
      s = coll__t_abort_reap(t, r,
                             coll__err(COLL_ERR_NO_MEMORY, "out of memory"));
      free(res);
    }
  }
  if (s == COLL_OK && participants) *participants = got;
out:
  if (s != COLL_OK) {
    /* Contributions still posted must end before their buffers go, and
     * the peers learn of the failure at once. */
    coll__t_abort(t);
    for (p = 1; bufs != NULL && p < n; p++)
      if (reqs[p] != NULL) coll__t_abort_reap(t, reqs[p], s);
  }
  for (p = 1; bufs && p < n; p++) free(bufs[p]);
  free(bufs);
  free(reqs);
  free(sum);
  reap(fed, t, s != COLL_OK);
  return s;
}

static coll_status_t peer_round(const coll_algo_ctx_t *ctx, uint32_t round,
                                float *data, size_t count, int *participants) {
  coll_transport_t *t = ctx->t;
  size_t bytes = count * sizeof(float), len = 0;
  int64_t deadline = ctx->deadline_ms;
  char *res = coll__scratch_get(ctx->scratch, HDR + bytes);
  coll_treq_t rs, rr;
  coll_status_t s;
  int32_t got;
  if (res == NULL) return COLL_ERR_NO_MEMORY;
  COLL_CHECK(coll__t_irecv(t, 0, COLL_ALGO_TAG(round, PHASE_RESULT), res,
                           HDR + bytes, &rr));
  s = coll__t_isend(t, 0, COLL_ALGO_TAG(round, PHASE_CONTRIB), data, bytes,
                    &rs);
  if (s != COLL_OK) return coll__t_abort_reap(t, rr, s);
  s = coll__t_wait(t, rs, deadline, NULL);
  if (s == COLL_ERR_TIMEOUT) coll__t_abort_reap(t, rs, s);
  if (s != COLL_OK) return coll__t_abort_reap(t, rr, s);
  s = coll__t_wait(t, rr, deadline, &len);
  if (s == COLL_ERR_TIMEOUT) coll__t_abort_reap(t, rr, s);
  if (s != COLL_OK) return s;
  if (len != HDR + bytes)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "rank 0 averaged %zu floats, this rank has %zu",
                     len > HDR ? (len - HDR) / sizeof(float) : 0, count);
  memcpy(&got, res, sizeof got);
  if (bytes) memcpy(data, res + HDR, bytes);
  if (participants) *participants = got;
  return COLL_OK;
}

coll_status_t coll__fedavg(const coll_algo_ctx_t *ctx, coll_fedavg_t **state,
                           float *data, size_t count, int64_t deadline_ms,
                           int *participants) {
  uint32_t round;
  if (ctx->world == 1) {
    if (participants) *participants = 1;
    return COLL_OK;
  }
  if (*state == NULL && (*state = calloc(1, sizeof **state)) == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  round = (*state)->round++;
  if (ctx->rank == 0)
    return root_round(ctx, *state, round, data, count, deadline_ms,
                      participants);
  return peer_round(ctx, round, data, count, participants);
}
