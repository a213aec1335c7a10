/* SPDX-License-Identifier: Apache-2.0 */
/* algo_util.c: posting, waiting and failure handling for the algorithms. */
#include "algo/algo_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reduce/reduce.h"

void coll__algo_run_init(algo_run_t *run, const coll_algo_ctx_t *ctx,
                         const char *what, uint32_t phase) {
  run->ctx = ctx;
  run->what = what;
  run->tag = COLL_ALGO_TAG(ctx->seq, phase | ctx->sub_phase);
  run->status = COLL_OK;
  run->msg[0] = '\0';
  coll__err_clear();
}

void coll__algo_run_phase(algo_run_t *run, uint32_t phase) {
  run->tag = COLL_ALGO_TAG(run->ctx->seq, phase | run->ctx->sub_phase);
}

coll_status_t coll__algo_fail(algo_run_t *run, coll_status_t s, const char *fmt,
                              ...) {
  char where[160], seen[160];
  const char *why = coll_last_error();
  coll_origin_t o;
  int self = coll__ctx_rank(run->ctx, run->ctx->rank);
  va_list ap;
  if (run->status != COLL_OK) return run->status;
  va_start(ap, fmt);
  vsnprintf(where, sizeof where, fmt, ap);
  va_end(ap);
  if (why[0] == '\0') why = coll_strerror(s);
  /* Compose in run->msg first: `why` points into the buffer that
   * coll__err writes. */
  snprintf(run->msg, sizeof run->msg, "%s: %s: %s", run->what, where, why);
  /* The ranks' message streams are out of step now. Failing the transport
   * fails our pending requests at once (so no buffer is touched after we
   * return) and tells the peers that wait on us where the failure started,
   * instead of letting them time out. */
  coll__t_fail(run->ctx->t, s);
  /* A failure that started on another rank is reported as that rank's,
   * with the status every rank reports for it. */
  if (coll__t_origin(run->ctx->t, &o) && o.rank != self) {
    coll__origin_text(&o, self, seen, sizeof seen);
    snprintf(run->msg, sizeof run->msg, "%s: %s", run->what, seen);
    s = coll__origin_status(&o);
  }
  run->status = s;
  return coll__err(s, "%s", run->msg);
}

/* peer is a position; the transport and every error text speak of the comm
 * rank at it. */
coll_status_t coll__algo_isend(algo_run_t *run, algo_req_t *q, int peer,
                               const void *buf, size_t len) {
  coll_status_t s;
  peer = coll__ctx_rank(run->ctx, peer);
  s = coll__t_isend(run->ctx->t, peer, run->tag, buf, len, &q->h);
  q->peer = peer;
  q->is_recv = 0;
  q->live = s == COLL_OK;
  if (s != COLL_OK) coll__algo_fail(run, s, "send to rank %d", peer);
  return s;
}

coll_status_t coll__algo_irecv(algo_run_t *run, algo_req_t *q, int peer,
                               void *buf, size_t cap) {
  coll_status_t s;
  peer = coll__ctx_rank(run->ctx, peer);
  s = coll__t_irecv(run->ctx->t, peer, run->tag, buf, cap, &q->h);
  q->peer = peer;
  q->is_recv = 1;
  q->live = s == COLL_OK;
  if (s != COLL_OK) coll__algo_fail(run, s, "receive from rank %d", peer);
  return s;
}

coll_status_t coll__algo_wait(algo_run_t *run, algo_req_t *q, size_t len) {
  coll_status_t s;
  if (q->is_recv)
    s = coll__t_wait_exact(run->ctx->t, q->h, run->ctx->deadline_ms, len);
  else
    s = coll__t_wait(run->ctx->t, q->h, run->ctx->deadline_ms, NULL);
  /* A timed-out request is still the transport's; any other outcome freed
   * it. A length mismatch completes the receive, and it is reported so. */
  if (s != COLL_ERR_TIMEOUT) q->live = 0;
  if (s != COLL_OK)
    coll__algo_fail(run, s, "%s rank %d",
                    q->is_recv ? "receive from" : "send to", q->peer);
  return s;
}

coll_status_t coll__algo_wait_range(algo_run_t *run, algo_req_t *q, size_t lo,
                                    size_t hi, size_t *got) {
  coll_status_t s;
  *got = 0;
  s = coll__t_wait(run->ctx->t, q->h, run->ctx->deadline_ms, got);
  if (s != COLL_ERR_TIMEOUT) q->live = 0;
  if (s == COLL_OK && (*got < lo || *got > hi))
    s = coll__err(COLL_ERR_PROTOCOL, "%zu bytes where %zu to %zu were due",
                  *got, lo, hi);
  if (s != COLL_OK) coll__algo_fail(run, s, "receive from rank %d", q->peer);
  return s;
}

void coll__algo_cancel(algo_run_t *run, algo_req_t *reqs, size_t n) {
  size_t i;
  /* coll__algo_fail aborted the transport; a failure that did not pass through
   * it (no scratch memory) must still tell the peers. */
  if (run->status == COLL_OK) coll__t_fail(run->ctx->t, COLL_ERR_NO_MEMORY);
  for (i = 0; i < n; i++) {
    if (!reqs[i].live) continue;
    (void)coll__t_abort_reap(run->ctx->t, reqs[i].h, run->status);
    reqs[i].live = 0;
  }
}

coll_status_t coll__algo_done(algo_run_t *run) {
  if (run->status != COLL_OK) coll__err(run->status, "%s", run->msg);
  return run->status;
}

coll_reduce_fn_t coll__algo_kernel(const char *what, coll_dtype_t dt,
                                   coll_op_t op) {
  coll_reduce_fn_t fn = coll__reduce_fn(dt, op);
  if (fn == NULL)
    coll__err(COLL_ERR_UNSUPPORTED, "%s: no reduction kernel for %s %s", what,
              coll_op_name(op), coll_dtype_name(dt));
  return fn;
}
