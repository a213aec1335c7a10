/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_request.c: requests on NCCL comms, and settling a comm NCCL answered
 * ncclInProgress for. A request completes when the stream work before its
 * event completes. Waiting polls (never blocks in a call that can hang): the
 * comm's state, the events, the abort flag, NCCL's async error and the
 * timeout. An async error or a timeout aborts the comm, like torch's
 * watchdog, and the reason sticks to the comm.
 *
 * The timeout of a collective counts from the moment its work can start on
 * the stream (the start event recorded before it completed), so work queued
 * behind the caller's own long kernels does not time out (M8 of the first
 * review). Work that cannot start is bounded too (N5 of the second): it
 * times out as soon as an earlier request of its comm it waits behind did,
 * and at the latest twice the timeout after its call (a kernel of another
 * comm that never ends, ahead of it on the stream). Waiting for NCCL to take
 * the work (peers connecting) counts from the enqueue. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_async.h"
#include "nccl/nccl_comm.h"

static coll_status_t req_wait_op(coll_request_t *hdr);
static coll_status_t req_test_op(coll_request_t *hdr, int *done);
static const coll_request_ops_t req_ops = {req_wait_op, req_test_op};

static coll_status_t event_take(coll_nccl_be_t *be, cudaEvent_t *ev) {
  cudaError_t e;
  if (be->nevents > 0) {
    *ev = be->events[--be->nevents];
    return COLL_OK;
  }
  e = be->t->cuda_event_create(ev, cudaEventDisableTiming);
  if (e != cudaSuccess) *ev = NULL;
  return coll__cuda_result(be->t, e, "cudaEventCreate");
}

/* Keeps the event for the next request (any thread may free it later: an
 * event is not tied to the current device when destroyed). */
static void event_give(coll_nccl_be_t *be, cudaEvent_t ev) {
  if (ev == NULL) return;
  if (be->nevents == be->capevents) {
    int cap = be->capevents ? be->capevents * 2 : 8;
    cudaEvent_t *n = realloc(be->events, (size_t)cap * sizeof *n);
    if (n == NULL) {
      be->t->cuda_event_destroy(ev);
      return;
    }
    be->events = n;
    be->capevents = cap;
  }
  be->events[be->nevents++] = ev;
}

void coll__nccl_events_free(coll_nccl_be_t *be) {
  while (be->nevents > 0) be->t->cuda_event_destroy(be->events[--be->nevents]);
  free(be->events);
  be->events = NULL;
  be->capevents = 0;
}

static void req_link(coll_nccl_req_t *r) {
  coll_nccl_be_t *be = r->be;
  r->prev = NULL;
  r->next = be->live;
  if (be->live != NULL) be->live->prev = r;
  be->live = r;
}

static void req_unlink(coll_nccl_req_t *r) {
  if (r->be == NULL) return;
  if (r->prev != NULL)
    r->prev->next = r->next;
  else if (r->be->live == r)
    r->be->live = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

coll_nccl_req_t *coll__nccl_req_alloc(coll_nccl_be_t *be,
                                      const coll_work_t *w) {
  coll_nccl_req_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->hdr.ops = &req_ops;
  r->t = be->t;
  r->be = be;
  r->kind = w->kind;
  r->received = w->kind == COLL_WORK_RECV ? w->received : NULL;
  r->count = w->count;
  r->deadline_ms = -1;
  r->start_by_ms =
      be->comm->timeout_ms < 0 ? -1 : coll__deadline(2 * be->comm->timeout_ms);
  return r;
}

coll_status_t coll__nccl_req_events(coll_nccl_req_t *r, cudaStream_t st) {
  coll_nccl_be_t *be = r->be;
  cudaError_t e;
  r->st = st;
  COLL_CHECK(event_take(be, &r->start));
  COLL_CHECK(event_take(be, &r->ev));
  e = be->t->cuda_event_record(r->start, st);
  return coll__cuda_result(be->t, e, "cudaEventRecord");
}

coll_status_t coll__nccl_req_new(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st, coll_nccl_req_t **out) {
  coll_nccl_req_t *r = coll__nccl_req_alloc(be, w);
  coll_status_t s;
  if (r == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  s = coll__nccl_req_events(r, st);
  if (s != COLL_OK) {
    coll__nccl_req_discard(r);
    return s;
  }
  *out = r;
  return COLL_OK;
}

/* Records the completion event of work NCCL has put on the stream. */
static coll_status_t req_arm(coll_nccl_req_t *r) {
  coll_nccl_be_t *be = r->be;
  cudaError_t e = be->t->cuda_event_record(r->ev, r->st);
  if (e != cudaSuccess) {
    /* The work is on the stream but nothing tells when it ends: destroy
     * must abort rather than wait for it. */
    be->lost_track = 1;
    return coll__cuda_result(be->t, e, "cudaEventRecord");
  }
  r->state = NREQ_RUNNING;
  return COLL_OK;
}

coll_status_t coll__nccl_req_launched(coll_nccl_req_t *r, ncclResult_t res) {
  coll_nccl_be_t *be = r->be;
  if (r->state == NREQ_QUEUED && r->prev == NULL && be->live != r) req_link(r);
  if (res == ncclInProgress) {
    r->state = NREQ_LAUNCHING;
    if (!be->inprogress) {
      be->inprogress = 1;
      be->inprogress_deadline_ms = coll__deadline(be->comm->timeout_ms);
    }
    return COLL_OK;
  }
  return req_arm(r);
}

void coll__nccl_req_discard(coll_nccl_req_t *r) {
  if (r == NULL) return;
  event_give(r->be, r->start);
  event_give(r->be, r->ev);
  free(r);
}

static void req_free(coll_nccl_req_t *r) {
  req_unlink(r);
  if (r->be != NULL) {
    event_give(r->be, r->start);
    event_give(r->be, r->ev);
  } else {
    if (r->start != NULL) r->t->cuda_event_destroy(r->start);
    if (r->ev != NULL) r->t->cuda_event_destroy(r->ev);
  }
  free(r);
}

int coll__nccl_req_orphan_all(coll_nccl_be_t *be) {
  coll_nccl_req_t *r, *next;
  int running = 0;
  for (r = be->live; r != NULL; r = next) {
    next = r->next;
    if (!r->done && r->state == NREQ_LAUNCHING) running = 1;
    if (!r->done && r->state == NREQ_RUNNING &&
        be->t->cuda_event_query(r->ev) != cudaSuccess)
      running = 1;
    if (!r->done) {
      r->done = 1;
      r->status = COLL_ERR_ABORTED;
      snprintf(r->err, sizeof r->err,
               "%s: the comm was destroyed before this request was waited",
               coll__work_name(r->kind));
    }
    r->be = NULL;
    r->prev = r->next = r->batch_next = NULL;
  }
  be->live = NULL;
  be->batch = be->batch_tail = NULL;
  return running;
}

static coll_status_t req_finish(coll_nccl_req_t *r, coll_status_t s) {
  r->done = 1;
  r->status = s;
  if (s == COLL_OK) {
    r->err[0] = '\0';
    /* NCCL moves exactly count elements: sender and receiver must agree
     * (documented in coll.h). */
    if (r->received != NULL) *r->received = r->count;
  } else {
    coll__err_save(r->err);
  }
  return s;
}

coll_status_t coll__nccl_fail(coll_nccl_be_t *be, coll_status_t s, int locked) {
  char why[COLL_ERRMSG_MAX];
  coll__err_save(why);
  if (!atomic_load_explicit(&be->failed, memory_order_acquire)) {
    be->fail_status = s;
    snprintf(be->fail_why, sizeof be->fail_why, "%.480s (the comm was aborted)",
             why);
    atomic_store_explicit(&be->failed, 1, memory_order_release);
    COLL_WARN(COLL_LOG_NCCL, "comm '%s' rank %d: %s", be->comm->name,
              be->comm->rank, be->fail_why);
  }
  if (be->in_group) {
    /* coll__nccl_fail_flush aborts once the outer group is closed. */
  } else if (locked) {
    coll__abort_locked(be->comm->abort);
  } else {
    coll_abort(be->comm->abort);
  }
  return coll__err(be->fail_status, "%s", be->fail_why);
}

void coll__nccl_fail_flush(coll_nccl_be_t *be) {
  if (atomic_load_explicit(&be->failed, memory_order_acquire))
    coll__abort_locked(be->comm->abort);
}

coll_status_t coll__nccl_enqueue_error(coll_nccl_be_t *be, ncclResult_t r,
                                       const char *what) {
  coll_status_t s = coll__nccl_result(be->t, r, be->nc, what);
  return coll__nccl_fail(be, s, 1);
}

coll_status_t coll__nccl_usable(coll_nccl_be_t *be, const char *what) {
  if (atomic_load_explicit(&be->failed, memory_order_acquire))
    return coll__err(be->fail_status, "%s: %s", what, be->fail_why);
  if (atomic_load(&be->torn) || atomic_load(&be->comm->abort->aborted))
    return coll__err(COLL_ERR_ABORTED, "%s: comm '%s' was aborted", what,
                     be->comm->name);
  return COLL_OK;
}

static void watch_init(coll_nccl_be_t *be, coll_nccl_watch_t *w,
                       int64_t deadline_ms) {
  memset(w, 0, sizeof *w);
  w->t = be->t;
  w->nc = be->nc;
  w->mu = &be->mu;
  w->torn = &be->torn;
  w->aborted = &be->comm->abort->aborted;
  w->deadline_ms = deadline_ms;
}

/* NCCL took the work: record the held events on the comm's device (this
 * thread may have another current). */
static coll_status_t settled(coll_nccl_be_t *be, const char *what) {
  coll_nccl_req_t *r;
  coll_status_t s = COLL_OK, s2;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  be->inprogress = 0;
  COLL_CHECK(coll__cuda_device_enter(be->t, be->dev, &saved, what));
  for (r = be->live; r != NULL; r = r->next) {
    if (r->done || r->state != NREQ_LAUNCHING) continue;
    s2 = req_arm(r);
    if (s == COLL_OK) s = s2;
  }
  coll__cuda_device_leave(be->t, saved);
  return s;
}

coll_status_t coll__nccl_settle_step(coll_nccl_be_t *be, int *busy,
                                     const char *what) {
  coll_nccl_watch_t w;
  coll_status_t s;
  *busy = 0;
  if (!be->inprogress) return COLL_OK;
  watch_init(be, &w, be->inprogress_deadline_ms);
  s = coll__nccl_watch_step(&w, busy, what);
  if (s == COLL_OK && *busy) return COLL_OK;
  if (s == COLL_OK) return settled(be, what);
  if (s == COLL_ERR_ABORTED) return coll__nccl_usable(be, what);
  if (s == COLL_ERR_TIMEOUT)
    coll__err(COLL_ERR_TIMEOUT,
              "%s: NCCL did not take the work within %lld ms on comm '%s' "
              "rank %d: a peer has not reached the same call (NCCL connects "
              "at first use)",
              what, (long long)be->comm->timeout_ms, be->comm->name,
              be->comm->rank);
  else
    coll__err_prefix("NCCL reported an asynchronous error");
  return coll__nccl_fail(be, s, 0);
}

coll_status_t coll__nccl_settle(coll_nccl_be_t *be, const char *what) {
  unsigned spins = 0;
  int busy = 1;
  coll_status_t s;
  for (;;) {
    s = coll__nccl_settle_step(be, &busy, what);
    if (s != COLL_OK || !busy) return s;
    coll__nccl_backoff(&spins);
  }
}

/* NCCL's asynchronous error on a running comm (a peer failed, a network
 * error); COLL_OK while healthy. */
static coll_status_t async_error(coll_nccl_be_t *be, const char *what) {
  coll_nccl_watch_t w;
  int busy = 0;
  coll_status_t s;
  watch_init(be, &w, -1);
  s = coll__nccl_watch_step(&w, &busy, what);
  if (s == COLL_OK || s == COLL_ERR_ABORTED) return s;
  coll__err_prefix("NCCL reported an asynchronous error");
  return s;
}

/* Arms o's deadline once its start event completed. */
static void arm_deadline(coll_nccl_be_t *be, coll_nccl_req_t *o) {
  if (o->deadline_ms < 0 && be->comm->timeout_ms >= 0 &&
      be->t->cuda_event_query(o->start) == cudaSuccess)
    o->deadline_ms = coll__deadline(be->comm->timeout_ms);
}

/* An earlier request of the comm that r may be queued behind and whose own
 * timeout passed (the comm's work runs in issue order on one stream in the
 * common case); NULL if none. */
static const coll_nccl_req_t *overdue(coll_nccl_be_t *be,
                                      const coll_nccl_req_t *r, int64_t now) {
  coll_nccl_req_t *o;
  for (o = be->live; o != NULL; o = o->next) {
    if (o == r || o->done || o->state != NREQ_RUNNING) continue;
    arm_deadline(be, o);
    if (o->deadline_ms >= 0 && now >= o->deadline_ms &&
        be->t->cuda_event_query(o->ev) == cudaErrorNotReady)
      return o;
  }
  return NULL;
}

/* The comm's timeout as it applies to r, which has not completed: COLL_OK,
 * or the failure (the comm failed for it). */
static coll_status_t req_timeout(coll_nccl_req_t *r, const char *what) {
  coll_nccl_be_t *be = r->be;
  coll_comm_t *c = be->comm;
  const coll_nccl_req_t *o;
  int64_t now;
  if (c->timeout_ms < 0) return COLL_OK;
  now = coll__now_ms();
  if (r->deadline_ms >= 0) {
    if (now < r->deadline_ms) return COLL_OK;
    coll__err(COLL_ERR_TIMEOUT,
              "%s did not complete within %lld ms of starting on the stream "
              "on comm '%s' rank %d",
              what, (long long)c->timeout_ms, c->name, c->rank);
  } else if ((o = overdue(be, r, now)) != NULL) {
    coll__err(COLL_ERR_TIMEOUT,
              "%s waits behind this comm's earlier %s, which did not "
              "complete within %lld ms of starting on the stream (comm '%s' "
              "rank %d)",
              what, coll__work_name(o->kind), (long long)c->timeout_ms, c->name,
              c->rank);
  } else if (r->start_by_ms >= 0 && now >= r->start_by_ms) {
    coll__err(COLL_ERR_TIMEOUT,
              "%s could not start on the stream within %lld ms of the call "
              "(twice the timeout of comm '%s' rank %d): earlier work on the "
              "stream holds it (the caller's, or another comm's that is "
              "stuck)",
              what, 2 * (long long)c->timeout_ms, c->name, c->rank);
  } else {
    return COLL_OK;
  }
  return coll__nccl_fail(be, COLL_ERR_TIMEOUT, 0);
}

/* One look at the request; sets r->done when it is over. */
static coll_status_t req_poll(coll_nccl_req_t *r) {
  coll_nccl_be_t *be = r->be;
  const char *what = coll__work_name(r->kind);
  int busy = 0;
  cudaError_t e;
  coll_status_t s;
  if (r->done || be == NULL) return r->status; /* orphans are done */
  s = coll__nccl_usable(be, what);
  if (s != COLL_OK) return req_finish(r, s);
  if (r->state == NREQ_QUEUED) {
    s = coll__nccl_p2p_flush(be, 0, what);
    if (s != COLL_OK) return req_finish(r, s);
    if (r->state == NREQ_QUEUED) return COLL_OK; /* NCCL still busy */
  }
  if (r->state == NREQ_LAUNCHING) {
    s = coll__nccl_settle_step(be, &busy, what);
    if (s != COLL_OK) return req_finish(r, s);
    if (busy || r->state != NREQ_RUNNING) return COLL_OK;
  }
  arm_deadline(be, r);
  e = be->t->cuda_event_query(r->ev);
  if (e == cudaSuccess) return req_finish(r, COLL_OK);
  if (e != cudaErrorNotReady) {
    s = coll__cuda_result(be->t, e, what);
    return req_finish(r, coll__nccl_fail(be, s, 0));
  }
  s = async_error(be, what);
  if (s == COLL_ERR_ABORTED) return req_finish(r, coll__nccl_usable(be, what));
  if (s != COLL_OK) return req_finish(r, coll__nccl_fail(be, s, 0));
  s = req_timeout(r, what);
  if (s != COLL_OK) return req_finish(r, s);
  return COLL_OK;
}

coll_status_t coll__nccl_req_wait(coll_nccl_req_t *r) {
  unsigned spins = 0;
  coll_status_t s;
  for (;;) {
    s = req_poll(r);
    if (r->done) break;
    coll__nccl_backoff(&spins);
  }
  if (s != COLL_OK) coll__err_restore(r->err);
  req_free(r);
  return s;
}

static coll_status_t req_wait_op(coll_request_t *hdr) {
  return coll__nccl_req_wait((coll_nccl_req_t *)hdr);
}

static coll_status_t req_test_op(coll_request_t *hdr, int *done) {
  coll_nccl_req_t *r = (coll_nccl_req_t *)hdr;
  req_poll(r);
  *done = r->done;
  return COLL_OK;
}
