/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_request.c: requests on NCCL comms. A request completes when the
 * stream work before its event completes. Waiting polls (never blocks in a
 * CUDA call that can hang): the event, the abort flag, NCCL's async error and
 * the comm's timeout. An async error or a timeout aborts the comm, like
 * torch's watchdog, and the reason sticks to the comm. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_util.h"
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
  return coll__cuda_result(be->t, e, "cudaEventCreate");
}

/* Keeps the event for the next request (any thread may free it later: an
 * event is not tied to the current device when destroyed). */
static void event_give(coll_nccl_be_t *be, cudaEvent_t ev) {
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

coll_status_t coll__nccl_req_new(coll_nccl_be_t *be, const coll_work_t *w,
                                 coll_nccl_req_t **out) {
  coll_nccl_req_t *r = calloc(1, sizeof *r);
  coll_status_t s;
  if (r == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  r->hdr.ops = &req_ops;
  r->t = be->t;
  r->be = be;
  r->kind = w->kind;
  r->received = w->kind == COLL_WORK_RECV ? w->received : NULL;
  r->count = w->count;
  s = event_take(be, &r->ev);
  if (s != COLL_OK) {
    free(r);
    return s;
  }
  *out = r;
  return COLL_OK;
}

coll_status_t coll__nccl_req_arm(coll_nccl_req_t *r, cudaStream_t st) {
  coll_nccl_be_t *be = r->be;
  cudaError_t e = be->t->cuda_event_record(r->ev, st);
  if (e != cudaSuccess) {
    /* The work is on the stream but nothing tells when it ends: destroy
     * must abort rather than wait for it. */
    be->lost_track = 1;
    return coll__cuda_result(be->t, e, "cudaEventRecord");
  }
  r->deadline_ms = coll__deadline(be->comm->timeout_ms);
  r->next = be->live;
  if (be->live != NULL) be->live->prev = r;
  be->live = r;
  return COLL_OK;
}

void coll__nccl_req_discard(coll_nccl_req_t *r) {
  if (r == NULL) return;
  event_give(r->be, r->ev);
  free(r);
}

static void req_unlink(coll_nccl_req_t *r) {
  if (r->be == NULL) return;
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    r->be->live = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

static void req_free(coll_nccl_req_t *r) {
  req_unlink(r);
  if (r->be != NULL)
    event_give(r->be, r->ev);
  else
    r->t->cuda_event_destroy(r->ev);
  free(r);
}

int coll__nccl_req_orphan_all(coll_nccl_be_t *be) {
  coll_nccl_req_t *r, *next;
  int running = 0;
  for (r = be->live; r != NULL; r = next) {
    next = r->next;
    if (!r->done && be->t->cuda_event_query(r->ev) != cudaSuccess) running = 1;
    if (!r->done) {
      r->done = 1;
      r->status = COLL_ERR_ABORTED;
      snprintf(r->err, sizeof r->err,
               "%s: the comm was destroyed before this request was waited",
               coll__work_name(r->kind));
    }
    r->be = NULL;
    r->prev = r->next = NULL;
  }
  be->live = NULL;
  return running;
}

static coll_status_t req_finish(coll_nccl_req_t *r, coll_status_t s) {
  r->done = 1;
  r->status = s;
  if (s == COLL_OK) {
    r->err[0] = '\0';
    if (r->received != NULL) *r->received = r->count;
  } else {
    coll__err_save(r->err);
  }
  return s;
}

/* The watchdog: records why the comm failed (first reason wins), aborts it
 * through its abort handle (so the teardown claim is honored) and reports
 * the reason. The caller recorded the reason as this thread's error text. */
static coll_status_t comm_fail(coll_nccl_be_t *be, coll_status_t s) {
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
  coll_abort(be->comm->abort);
  return coll__err(be->fail_status, "%s", be->fail_why);
}

coll_status_t coll__nccl_usable(coll_nccl_be_t *be, const char *what) {
  if (atomic_load_explicit(&be->failed, memory_order_acquire))
    return coll__err(be->fail_status, "%s: %s", what, be->fail_why);
  if (atomic_load(&be->torn) || atomic_load(&be->comm->abort->aborted))
    return coll__err(COLL_ERR_ABORTED, "%s: comm '%s' was aborted", what,
                     be->comm->name);
  return COLL_OK;
}

static coll_status_t async_error(coll_nccl_be_t *be, const char *what) {
  ncclResult_t ae = ncclSuccess, r = ncclSuccess;
  uv_mutex_lock(&be->mu);
  if (!atomic_load(&be->torn))
    r = be->t->nccl_comm_get_async_error(be->nc, &ae);
  uv_mutex_unlock(&be->mu);
  if (r == ncclSuccess && (ae == ncclSuccess || ae == ncclInProgress))
    return COLL_OK;
  if (r == ncclSuccess) r = ae;
  coll__nccl_result(be->t, r, NULL, what);
  coll__err_prefix("NCCL reported an asynchronous error");
  return COLL_ERR_BACKEND;
}

/* One look at the request; sets r->done when it is over. */
static coll_status_t req_poll(coll_nccl_req_t *r) {
  coll_nccl_be_t *be = r->be;
  const char *what = coll__work_name(r->kind);
  cudaError_t e;
  coll_status_t s;
  if (r->done) return r->status;
  if (be == NULL) return r->status; /* orphans are done */
  s = coll__nccl_usable(be, what);
  if (s != COLL_OK) return req_finish(r, s);
  e = be->t->cuda_event_query(r->ev);
  if (e == cudaSuccess) return req_finish(r, COLL_OK);
  if (e != cudaErrorNotReady) {
    s = coll__cuda_result(be->t, e, what);
    return req_finish(r, comm_fail(be, s));
  }
  s = async_error(be, what);
  if (s != COLL_OK) return req_finish(r, comm_fail(be, s));
  if (r->deadline_ms >= 0 && coll__now_ms() >= r->deadline_ms) {
    coll__err(COLL_ERR_TIMEOUT,
              "%s did not complete within %lld ms on comm '%s' rank %d", what,
              (long long)be->comm->timeout_ms, be->comm->name, be->comm->rank);
    return req_finish(r, comm_fail(be, COLL_ERR_TIMEOUT));
  }
  return COLL_OK;
}

/* Spin briefly (GPU collectives often finish in microseconds), then sleep in
 * growing steps capped at 200 us so an abort is seen within a millisecond. */
static void backoff(unsigned *n) {
  struct timespec ts = {0, 0};
  unsigned k = (*n)++;
  if (k < 256) {
    sched_yield();
    return;
  }
  k -= 256;
  ts.tv_nsec = k < 20 ? (long)(k + 1) * 10000L : 200000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

coll_status_t coll__nccl_req_wait(coll_nccl_req_t *r) {
  unsigned spins = 0;
  coll_status_t s;
  for (;;) {
    s = req_poll(r);
    if (r->done) break;
    backoff(&spins);
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
