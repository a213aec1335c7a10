/* SPDX-License-Identifier: Apache-2.0 */
/* executor.c: runs a comm's collectives in issue order. A blocking call
 * with nothing queued runs on the caller's thread (no hand-off latency); other
 * work goes to a worker thread started on first use. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "cpu/exec.h"
#include "cpu/req.h"
#include "cuda/staging.h"

static coll_status_t req_wait(coll_request_t *r);
static coll_status_t req_test(coll_request_t *r, int *done);
static const coll_request_ops_t req_ops = {req_wait, req_test};

static void req_complete(cpu_req_t *r, coll_status_t s, const char *msg) {
  uv_mutex_lock(&r->mu);
  r->status = s;
  if (s != COLL_OK) memcpy(r->msg, msg, COLL_ERRMSG_MAX);
  r->done = 1;
  r->cpu = NULL; /* the comm may go away now; the request stays valid */
  uv_cond_signal(&r->cv);
  uv_mutex_unlock(&r->mu);
}

static void req_free(cpu_req_t *r) {
  coll__work_free(&r->work);
  uv_cond_destroy(&r->cv);
  uv_mutex_destroy(&r->mu);
  free(r);
}

static void worker_main(void *arg) {
  coll_cpu_t *cpu = arg;
  char msg[COLL_ERRMSG_MAX];
  coll__log_set_rank(cpu->comm->rank);
  uv_mutex_lock(&cpu->mu);
  for (;;) {
    cpu_req_t *r;
    coll_status_t s;
    while (cpu->head == NULL && !cpu->stop) uv_cond_wait(&cpu->cv, &cpu->mu);
    if (cpu->head == NULL) break;
    r = cpu->head;
    cpu->head = r->next;
    if (cpu->head == NULL) cpu->tail = NULL;
    cpu->busy = 1;
    uv_mutex_unlock(&cpu->mu);
    coll__err_clear();
    s = coll__cpu_run(cpu, &r->work);
    coll__err_save(msg);
    uv_mutex_lock(&cpu->mu);
    cpu->busy = 0;
    uv_cond_broadcast(&cpu->cv); /* a blocking submit may wait for idle */
    uv_mutex_unlock(&cpu->mu);
    req_complete(r, s, msg);
    uv_mutex_lock(&cpu->mu);
  }
  uv_mutex_unlock(&cpu->mu);
}

static coll_status_t req_new(coll_cpu_t *cpu, const coll_work_t *w,
                             cpu_req_t **out) {
  cpu_req_t *r = calloc(1, sizeof *r);
  coll_status_t s;
  if (r == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory for a request",
                     coll__work_what(w));
  s = coll__work_dup(&r->work, w);
  if (s != COLL_OK) {
    free(r);
    return s;
  }
  if (uv_mutex_init(&r->mu) != 0 || uv_cond_init(&r->cv) != 0) {
    coll__work_free(&r->work);
    free(r);
    return coll__err(COLL_ERR_SYSTEM, "request: cannot create a condition");
  }
  r->hdr.ops = &req_ops;
  r->cpu = cpu;
  *out = r;
  return COLL_OK;
}

coll_status_t coll__cpu_submit(coll_comm_t *c, const coll_work_t *w,
                               int blocking, coll_request_t **req) {
  coll_cpu_t *cpu = c->be;
  cpu_req_t *r = NULL;
  if (w->kind == COLL_WORK_SEND || w->kind == COLL_WORK_RECV)
    return coll__cpu_p2p_submit(cpu, w, blocking, req);
  if ((w->kind == COLL_WORK_GATHER || w->kind == COLL_WORK_SCATTER ||
       w->kind == COLL_WORK_ALLTOALL) &&
      coll__work_on_device(w))
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: device memory on a CPU comm is staged for the "
                     "reductions, broadcast and allgather only; pass host "
                     "memory, or use an NCCL comm",
                     coll__work_what(w));
  COLL_CHECK(req_new(cpu, w, &r));
  uv_mutex_lock(&cpu->mu);
  if (blocking && cpu->head == NULL && !cpu->busy) {
    /* Nothing ahead of us and one thread per comm: run it in the caller. */
    r->is_inline = 1;
    uv_mutex_unlock(&cpu->mu);
    *req = &r->hdr;
    return COLL_OK;
  }
  if (!cpu->thread_started) {
    if (uv_thread_create(&cpu->thread, worker_main, cpu) != 0) {
      uv_mutex_unlock(&cpu->mu);
      req_free(r);
      return coll__err(COLL_ERR_SYSTEM, "%s: cannot start the comm's thread",
                       coll__work_what(w));
    }
    cpu->thread_started = 1;
  }
  r->next = NULL;
  if (cpu->tail != NULL)
    cpu->tail->next = r;
  else
    cpu->head = r;
  cpu->tail = r;
  uv_cond_broadcast(&cpu->cv);
  uv_mutex_unlock(&cpu->mu);
  *req = &r->hdr;
  return COLL_OK;
}

static coll_status_t req_wait(coll_request_t *hdr) {
  cpu_req_t *r = (cpu_req_t *)hdr;
  coll_status_t s;
  if (r->is_inline) {
    s = coll__cpu_run(r->cpu, &r->work);
    req_free(r);
    return s;
  }
  uv_mutex_lock(&r->mu);
  while (!r->done) uv_cond_wait(&r->cv, &r->mu);
  s = r->status;
  uv_mutex_unlock(&r->mu);
  if (s != COLL_OK) coll__err_restore(r->msg);
  req_free(r);
  return s;
}

static coll_status_t req_test(coll_request_t *hdr, int *done) {
  cpu_req_t *r = (cpu_req_t *)hdr;
  if (r->is_inline) {
    *done = 0;
    return COLL_OK;
  }
  uv_mutex_lock(&r->mu);
  *done = r->done;
  uv_mutex_unlock(&r->mu);
  return COLL_OK;
}

void coll__cpu_executor_stop(coll_cpu_t *cpu) {
  cpu_req_t *r, *next;
  uv_mutex_lock(&cpu->mu);
  cpu->stop = 1;
  r = cpu->head;
  cpu->head = cpu->tail = NULL;
  uv_cond_broadcast(&cpu->cv);
  uv_mutex_unlock(&cpu->mu);
  for (; r != NULL; r = next) {
    char msg[COLL_ERRMSG_MAX];
    next = r->next;
    snprintf(msg, sizeof msg, "%s: the comm was destroyed before it ran",
             coll__work_what(&r->work));
    req_complete(r, COLL_ERR_ABORTED, msg);
  }
  if (cpu->thread_started) {
    uv_thread_join(&cpu->thread);
    cpu->thread_started = 0;
  }
}
