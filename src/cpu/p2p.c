/* SPDX-License-Identifier: Apache-2.0 */
/* p2p.c: point-to-point requests, posted straight to the transport. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "cpu/cpu.h"
#include "cpu/req.h"
#include "cuda/staging.h"

typedef struct p2p_req {
  coll_request_t hdr;
  struct p2p_req *prev, *next; /* in cpu->p2p while outstanding */
  coll_cpu_t *cpu;             /* NULL once reaped by destroy */
  coll_treq_t treq;
  coll_work_t work;
  int64_t deadline_ms;
  int staged; /* device memory: run whole, through staging, in wait */
  int done;
  coll_status_t status;
  char msg[COLL_ERRMSG_MAX];
} p2p_req_t;

static coll_status_t p2p_wait(coll_request_t *hdr);
static coll_status_t p2p_test(coll_request_t *hdr, int *done);
static const coll_request_ops_t p2p_ops = {p2p_wait, p2p_test};

static void unlink_req(coll_cpu_t *cpu, p2p_req_t *r) {
  uv_mutex_lock(&cpu->mu);
  if (r->prev != NULL) r->prev->next = r->next;
  else cpu->p2p = (cpu_req_t *)r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  uv_mutex_unlock(&cpu->mu);
}

/* Completes the transport request and turns its outcome into ours. */
static coll_status_t finish(p2p_req_t *r, int64_t deadline_ms) {
  coll_cpu_t *cpu = r->cpu;
  const coll_work_t *w = &r->work;
  size_t es = coll_dtype_size(w->dtype), len = 0;
  coll_status_t s = coll__t_wait(cpu->t, r->treq, deadline_ms, &len);
  if (s == COLL_ERR_TIMEOUT) {
    /* The peer never matched us: the pair's message order is now unknown, so
     * the comm cannot be used safely any more. */
    char msg[COLL_ERRMSG_MAX];
    coll__err_save(msg);
    coll__t_abort(cpu->t);
    (void)coll__t_wait(cpu->t, r->treq, -1, NULL);
    coll__err_restore(msg);
  }
  if (s == COLL_OK && w->kind == COLL_WORK_RECV) {
    if (len % es != 0)
      s = coll__err(COLL_ERR_LENGTH_MISMATCH,
                    "%zu bytes arrived, not a whole number of %s elements",
                    len, coll_dtype_name(w->dtype));
    else if (w->received != NULL)
      *w->received = len / es;
  }
  if (s == COLL_ERR_LENGTH_MISMATCH && w->kind == COLL_WORK_RECV &&
      len > w->count * es)
    s = coll__err(COLL_ERR_LENGTH_MISMATCH,
                  "rank %d sent %zu bytes on tag %u, more than the %zu-element "
                  "buffer holds",
                  w->root, len, w->tag, w->count);
  if (s != COLL_OK) {
    coll__err_prefix(w->kind == COLL_WORK_SEND ? "send" : "recv");
    if (s != COLL_ERR_LENGTH_MISMATCH) coll__cpu_set_broken(cpu, s);
  }
  return s;
}

/* A host send or receive run to completion: the staged (device memory)
 * path calls it per host piece. */
static coll_status_t host_p2p(void *arg, const coll_work_t *w) {
  coll_cpu_t *cpu = arg;
  size_t bytes = w->count * coll_dtype_size(w->dtype);
  int64_t deadline = coll__deadline(cpu->comm->timeout_ms);
  if (w->kind == COLL_WORK_SEND)
    return coll__t_send(cpu->t, w->root, w->tag, w->send, bytes, deadline);
  {
    coll_treq_t r;
    size_t len = 0;
    coll_status_t s;
    COLL_CHECK(coll__t_irecv(cpu->t, w->root, w->tag, w->recv, bytes, &r));
    s = coll__t_wait(cpu->t, r, deadline, &len);
    if (s == COLL_ERR_TIMEOUT) {
      coll__t_abort(cpu->t);
      (void)coll__t_wait(cpu->t, r, -1, NULL);
    }
    if (s == COLL_OK && w->received != NULL)
      *w->received = len / coll_dtype_size(w->dtype);
    return s;
  }
}

coll_status_t coll__cpu_p2p_submit(coll_cpu_t *cpu, const coll_work_t *w,
                                   int blocking, coll_request_t **req) {
  p2p_req_t *r;
  coll_status_t s;
  size_t bytes = w->count * coll_dtype_size(w->dtype);
  const char *what = coll__work_name(w->kind);
  (void)blocking;
  COLL_CHECK(coll__cpu_check_usable(cpu, what));
  r = calloc(1, sizeof *r);
  if (r == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  r->hdr.ops = &p2p_ops;
  r->cpu = cpu;
  r->work = *w;
  r->work.bufs = NULL;
  r->deadline_ms = coll__deadline(cpu->comm->timeout_ms);
  if (coll__work_on_device(w)) {
    /* Device memory goes through pinned host staging, which blocks: it runs
     * in coll_wait, outside the issue guard (abort must never wait on it). */
    r->staged = 1;
  } else {
    if (w->kind == COLL_WORK_SEND)
      s = coll__t_isend(cpu->t, w->root, w->tag, w->send, bytes, &r->treq);
    else
      s = coll__t_irecv(cpu->t, w->root, w->tag, w->recv, bytes, &r->treq);
    if (s != COLL_OK) {
      coll__err_prefix(what);
      free(r);
      return s;
    }
  }
  uv_mutex_lock(&cpu->mu);
  r->next = (p2p_req_t *)cpu->p2p;
  if (r->next != NULL) r->next->prev = r;
  cpu->p2p = (cpu_req_t *)r;
  uv_mutex_unlock(&cpu->mu);
  *req = &r->hdr;
  return COLL_OK;
}

static coll_status_t p2p_wait(coll_request_t *hdr) {
  p2p_req_t *r = (p2p_req_t *)hdr;
  coll_status_t s;
  if (r->staged && !r->done) {
    s = coll__staged_run(r->cpu, &r->work, host_p2p,
                         &r->cpu->comm->abort->aborted,
                         r->cpu->comm->timeout_ms);
    unlink_req(r->cpu, r);
    if (s != COLL_OK) {
      coll__err_prefix(coll__work_name(r->work.kind));
      if (s != COLL_ERR_LENGTH_MISMATCH) coll__cpu_set_broken(r->cpu, s);
    }
    free(r);
    return s;
  }
  if (r->done) {
    s = r->status;
    if (s != COLL_OK) coll__err_restore(r->msg);
    free(r);
    return s;
  }
  s = finish(r, r->deadline_ms);
  unlink_req(r->cpu, r);
  free(r);
  return s;
}

static coll_status_t p2p_test(coll_request_t *hdr, int *done) {
  p2p_req_t *r = (p2p_req_t *)hdr;
  size_t len = 0;
  coll_status_t s;
  if (r->staged && !r->done) { /* runs in coll_wait */
    *done = 0;
    return COLL_OK;
  }
  if (r->done) {
    *done = 1;
    return COLL_OK;
  }
  /* A zero timeout polls; a completed request is finished here and its
   * outcome kept for coll_wait. */
  s = r->cpu->t->ops.wait(r->cpu->t->ctx, r->treq, 0, &len);
  if (s == COLL_ERR_TIMEOUT) {
    *done = 0;
    return COLL_OK;
  }
  if (s == COLL_OK && r->work.kind == COLL_WORK_RECV && r->work.received)
    *r->work.received = len / coll_dtype_size(r->work.dtype);
  if (s != COLL_OK) {
    coll__err_prefix(r->work.kind == COLL_WORK_SEND ? "send" : "recv");
    coll__err_save(r->msg);
  }
  r->status = s;
  unlink_req(r->cpu, r);
  r->done = 1;
  *done = 1;
  return COLL_OK;
}

void coll__cpu_p2p_reap_all(coll_cpu_t *cpu) {
  p2p_req_t *r;
  /* Called by destroy after the transport was aborted: every wait returns at
   * once; the requests stay valid for the user's coll_wait. */
  uv_mutex_lock(&cpu->mu);
  r = (p2p_req_t *)cpu->p2p;
  cpu->p2p = NULL;
  uv_mutex_unlock(&cpu->mu);
  while (r != NULL) {
    p2p_req_t *next = r->next;
    if (!r->staged) (void)coll__t_wait(cpu->t, r->treq, -1, NULL);
    r->status = COLL_ERR_ABORTED;
    snprintf(r->msg, sizeof r->msg, "%s: the comm was destroyed first",
             coll__work_name(r->work.kind));
    r->done = 1;
    r->cpu = NULL;
    r = next;
  }
}
