/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_p2p.c: point-to-point on NCCL comms. NCCL requires sends and
 * receives that must progress together to be issued in one group, or an
 * exchange where both ranks send first deadlocks (in the connect, or in the
 * kernels: each send sits ahead of its receive on the stream). So isend and
 * irecv only hold the call; the first wait or test of any of them, the next
 * collective, or a blocking send/recv gives every held call to NCCL in one
 * ncclGroupStart/End, in issue order. NCCL carries no tags: only tag 0 is
 * accepted, and messages between two ranks match in issue order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_comm.h"

coll_status_t coll__nccl_p2p_queue(coll_nccl_be_t *be, const coll_work_t *w,
                                   coll_request_t **out) {
  const char *what = coll__work_name(w->kind);
  coll_nccl_req_t *r;
  if (w->kind == COLL_WORK_RECV && w->root == COLL_WORK_ANY_SOURCE)
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "recv_any: NCCL receives from a named rank only; use a "
                     "CPU comm to receive from any source");
  if (w->tag != 0)
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: tag %u on an NCCL comm: NCCL carries no tags "
                     "(messages between two ranks match in the order they "
                     "were issued); use tag 0, or a CPU comm",
                     what, w->tag);
  r = coll__nccl_req_alloc(be, w);
  if (r == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  r->w = *w;
  r->w.bufs = NULL;
  r->w.nbufs = 0;
  r->state = NREQ_QUEUED;
  /* Linked now, so destroy finds it; launched in issue order. */
  r->next = be->live;
  if (be->live != NULL) be->live->prev = r;
  be->live = r;
  if (be->batch_tail != NULL)
    be->batch_tail->batch_next = r;
  else
    be->batch = r;
  be->batch_tail = r;
  *out = &r->hdr;
  return COLL_OK;
}

/* Under the guard: one group with every held call. */
static coll_status_t launch(coll_nccl_be_t *be, const char *what) {
  coll_nccl_req_t *r, *batch = be->batch;
  ncclResult_t res = ncclSuccess, r_end;
  coll_status_t s = COLL_OK;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  be->batch = be->batch_tail = NULL;
  COLL_CHECK_GOTO(coll__cuda_device_enter(be->t, be->dev, &saved, what), s,
                  fail);
  for (r = batch; r != NULL && s == COLL_OK; r = r->batch_next)
    s = coll__nccl_req_events(r, (cudaStream_t)r->w.stream);
  if (s != COLL_OK) goto fail;
  res = be->t->nccl_group_start();
  if (res != ncclSuccess) {
    s = coll__nccl_enqueue_error(be, res, "ncclGroupStart");
    goto fail;
  }
  for (r = batch; r != NULL && res == ncclSuccess; r = r->batch_next)
    res = coll__nccl_enqueue_p2p(be, r);
  r_end = be->t->nccl_group_end();
  if (res == ncclSuccess) res = r_end;
  if (res != ncclSuccess && res != ncclInProgress) {
    /* Part of the group may have launched: nothing tells what. */
    be->lost_track = 1;
    s = coll__nccl_enqueue_error(be, res, what);
    goto fail;
  }
  for (r = batch; r != NULL; r = r->batch_next) {
    coll_status_t s2 = coll__nccl_req_launched(r, res);
    if (s == COLL_OK) s = s2;
  }
  coll__cuda_device_leave(be->t, saved);
  return s;
fail:
  /* Those not launched complete with this failure at their wait. */
  {
    char why[COLL_ERRMSG_MAX];
    coll__err_save(why);
    for (r = batch; r != NULL; r = r->batch_next) {
      r->done = 1;
      r->status = s;
      memcpy(r->err, why, sizeof r->err);
    }
  }
  coll__cuda_device_leave(be->t, saved);
  return s;
}

coll_status_t coll__nccl_p2p_flush(coll_nccl_be_t *be, int wait,
                                   const char *what) {
  coll_abort_handle_t *h = be->comm->abort;
  coll_status_t s;
  int busy = 0;
  if (be->batch == NULL) return COLL_OK;
  /* NCCL takes no call while the comm is still in progress: wait for it,
   * or (coll_test, which never blocks) look once and come back later. */
  if (wait) {
    COLL_CHECK(coll__nccl_settle(be, what));
  } else {
    COLL_CHECK(coll__nccl_settle_step(be, &busy, what));
    if (busy) return COLL_OK;
  }
  uv_mutex_lock(&h->guard);
  s = coll__nccl_usable(be, what);
  if (s == COLL_OK) s = launch(be, what);
  uv_mutex_unlock(&h->guard);
  return s;
}
