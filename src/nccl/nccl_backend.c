/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_backend.c: the NCCL backend's vtable: prepare, submit and settle (a
 * call returns once its work is on the stream), abort (never waits for a
 * stream), destroy, the buffer check (shrink is in nccl_shrink.c), and the
 * wrapping of an NCCL comm into a coll comm. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_comm.h"

static int is_p2p(coll_work_kind_t k) {
  return k == COLL_WORK_SEND || k == COLL_WORK_RECV;
}

coll_status_t coll__nccl_check_stream(const void *stream, const char *what) {
  if (stream == (const void *)cudaStreamPerThread)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: stream is cudaStreamPerThread, which NCCL would "
                     "resolve on its own launch thread (another stream than "
                     "this thread's); pass a stream you created",
                     what);
  return COLL_OK;
}

/* Before the guard, on the comm's thread: NCCL takes no call while the comm
 * is ncclInProgress, and held point-to-point calls go to NCCL before a
 * collective issued after them. Both may wait for peers, so they run here,
 * abortable, never under the guard (H1 of the first review). */
static coll_status_t be_prepare(coll_comm_t *c, const coll_work_t *w) {
  coll_nccl_be_t *be = c->be;
  const char *what = coll__work_name(w->kind);
  COLL_CHECK(coll__nccl_usable(be, what));
  COLL_CHECK(coll__nccl_check_stream(w->stream, what));
  if (is_p2p(w->kind)) {
    COLL_CHECK(
        coll__nccl_dtype(be, w->dtype, &(ncclDataType_t){ncclFloat32}, what));
    return COLL_OK; /* held; nothing reaches NCCL yet */
  }
  COLL_CHECK(coll__nccl_settle(be, what));
  COLL_CHECK(coll__nccl_p2p_flush(be, 1, what));
  COLL_CHECK(coll__nccl_settle(be, what));
  return coll__nccl_agree(be, w);
}

/* Under the issue guard: only enqueues. */
static coll_status_t be_submit(coll_comm_t *c, const coll_work_t *w,
                               int blocking, coll_request_t **out) {
  coll_nccl_be_t *be = c->be;
  const char *what = coll__work_name(w->kind);
  coll_nccl_req_t *r = NULL;
  cudaStream_t st = (cudaStream_t)w->stream;
  ncclResult_t res = ncclSuccess;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  coll_status_t s;
  (void)blocking; /* the work runs on the GPU either way */
  COLL_CHECK(coll__nccl_usable(be, what));
  if (is_p2p(w->kind)) return coll__nccl_p2p_queue(be, w, out);
  if (be->inprogress || be->batch != NULL)
    return coll__err(COLL_ERR_INTERNAL,
                     "%s: the comm was not prepared (NCCL still in progress)",
                     what);
  COLL_CHECK_GOTO(coll__cuda_device_enter(be->t, be->dev, &saved, what), s,
                  done);
  COLL_CHECK_GOTO(coll__nccl_req_new(be, w, st, &r), s, done);
  COLL_CHECK_GOTO(coll__nccl_enqueue(be, w, st, &res), s, done);
  s = coll__nccl_req_launched(r, res);
  *out = &r->hdr;
  r = NULL;
done:
  if (r != NULL) coll__nccl_req_discard(r);
  coll__cuda_device_leave(be->t, saved);
  return s;
}

/* After submit, outside the guard, on the caller's thread: NCCL 2.28 puts
 * a multi-rank collective on the stream from a thread of its own after the
 * call returned ncclInProgress (group.cc:706-738); the call returns only
 * once it did, so the caller's next stream work comes after it (N1 of the
 * second review). Bounded by the comm's timeout, ended by its abort. */
static coll_status_t be_settle(coll_comm_t *c, coll_request_t *req) {
  coll_nccl_be_t *be = c->be;
  const coll_nccl_req_t *r = (const coll_nccl_req_t *)req;
  if (!be->inprogress || r->state == NREQ_QUEUED) return COLL_OK;
  return coll__nccl_settle(be, coll__work_name(r->kind));
}

/* The reaper: ncclCommAbort waits until the streams passed the comm's last
 * kernel (init.cc:2219-2228), so an NCCL without ncclCommRevoke gets it on a
 * thread of its own, which destroy joins. */
static void reap_main(void *p) {
  coll_nccl_be_t *be = p;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  ncclResult_t r;
  coll__cuda_device_enter(be->t, be->dev, &saved, "abort");
  r = be->t->nccl_comm_abort(be->nc);
  coll__cuda_device_leave(be->t, saved);
  if (r != ncclSuccess)
    COLL_WARN(COLL_LOG_NCCL, "ncclCommAbort on comm '%s' rank %d: error %d",
              be->comm->name, be->comm->rank, (int)r);
}

/* How abort leaves nc; under mu, torn just set. */
static void abort_nccl(coll_nccl_be_t *be) {
  coll_comm_t *c = be->comm;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  ncclResult_t r;
  if (be->t->nccl_comm_revoke != NULL) {
    /* Sets NCCL's abort flags (the kernels quit) and returns; the wait for
     * the streams runs on NCCL's thread (init.cc:2446-2500). */
    coll__cuda_device_enter(be->t, be->dev, &saved, "abort");
    r = be->t->nccl_comm_revoke(be->nc, NCCL_REVOKE_DEFAULT);
    coll__cuda_device_leave(be->t, saved);
    if (r == ncclSuccess || r == ncclInProgress) {
      be->revoked = 1;
      COLL_INFO(COLL_LOG_NCCL, "comm '%s' rank %d aborted (ncclCommRevoke)",
                c->name, c->rank);
      return;
    }
    COLL_WARN(COLL_LOG_NCCL,
              "ncclCommRevoke on comm '%s' rank %d: error %d; aborting it",
              c->name, c->rank, (int)r);
  } else if (be->keep_for_shrink) {
    /* Kept for coll_comm_shrink_exclude (NCCL_SHRINK_ABORT ends its work
     * there) or aborted by destroy; libcoll's waits end on torn. */
    be->parked = 1;
    COLL_INFO(COLL_LOG_NCCL,
              "comm '%s' rank %d aborted; NCCL's comm kept for a shrink",
              c->name, c->rank);
    return;
  }
  be->nc_gone = 1;
  if (uv_thread_create(&be->reaper, reap_main, be) == 0) {
    be->reaping = 1;
  } else {
    COLL_WARN(COLL_LOG_NCCL,
              "comm '%s' rank %d: no reaper thread; "
              "ncclCommAbort runs here",
              c->name, c->rank);
    reap_main(be);
  }
  COLL_INFO(COLL_LOG_NCCL, "comm '%s' rank %d aborted (ncclCommAbort)", c->name,
            c->rank);
}

/* Under the issue guard, once: no submit runs and none will. Returns
 * without waiting for a stream or a peer (N4 of the second review). */
static void be_abort(coll_comm_t *c) {
  coll_nccl_be_t *be = c->be;
  uv_mutex_lock(&be->mu);
  if (!atomic_load(&be->torn)) {
    atomic_store(&be->torn, 1);
    abort_nccl(be);
  }
  uv_mutex_unlock(&be->mu);
}

/* NCCL's state of nc (ncclSuccess when it can be destroyed). */
static ncclResult_t nccl_state(coll_nccl_be_t *be) {
  ncclResult_t state = ncclSuccess, r;
  r = be->t->nccl_comm_get_async_error(be->nc, &state);
  return r != ncclSuccess ? r : state;
}

/* Frees nc (the comm's device current): ncclCommDestroy when NCCL says the
 * comm is sound and nothing of it may still run; else ncclCommAbort, which
 * joins NCCL's pending job and waits for the streams to pass the comm's
 * last kernel. A refused ncclCommDestroy leaves the thread's NCCL group
 * open (init.cc:2372-2381): it is closed before the abort (N6). */
static coll_status_t free_nccl(coll_nccl_be_t *be, int running) {
  const coll_nccl_table_t *t = be->t;
  coll_status_t s = COLL_OK;
  ncclResult_t state = nccl_state(be), r;
  if (state != ncclSuccess && state != ncclInProgress)
    s = coll__nccl_result(t, state, NULL,
                          "comm destroy: NCCL reported an error for the comm "
                          "(it was aborted)");
  if (state == ncclSuccess && !running && !be->lost_track &&
      !atomic_load(&be->failed) && !be->parked) {
    r = t->nccl_comm_destroy(be->nc);
    if (r == ncclSuccess) return COLL_OK;
    s = coll__nccl_result(t, r, NULL, "comm destroy: ncclCommDestroy");
    (void)t->nccl_group_end();
  }
  r = t->nccl_comm_abort(be->nc);
  if (r != ncclSuccess && s == COLL_OK)
    s = coll__nccl_result(t, r, NULL, "comm destroy: ncclCommAbort");
  return s;
}

static coll_status_t be_destroy(coll_comm_t *c, int aborted) {
  coll_nccl_be_t *be = c->be;
  coll_status_t s = COLL_OK;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  int running;
  (void)aborted; /* the backend's own state says what abort did */
  if (be == NULL) return COLL_OK;
  running = coll__nccl_req_orphan_all(be);
  if (be->reaping) uv_thread_join(&be->reaper);
  coll__cuda_device_enter(be->t, be->dev, &saved, "comm destroy");
  if (!be->nc_gone) s = free_nccl(be, running);
  /* A child a shrink gave up on, written by NCCL's job since. */
  if (be->child_slot != NULL && *be->child_slot != NULL)
    be->t->nccl_comm_abort(*be->child_slot);
  coll__nccl_events_free(be);
  if (be->barrier_buf != NULL) be->t->cuda_free(be->barrier_buf);
  coll__nccl_agree_free(be);
  coll__cuda_device_leave(be->t, saved);
  free(be->child_slot);
  uv_mutex_destroy(&be->mu);
  free(be);
  c->be = NULL;
  return s;
}

static coll_status_t be_check_buffer(coll_comm_t *c, const void *p,
                                     size_t bytes, const char *what) {
  coll_nccl_be_t *be = c->be;
  coll_mem_kind_t kind;
  int dev;
  coll_status_t s;
  /* A comm the watchdog aborted tells why at the next call, before the
   * API layer's plain "aborted" (it checks buffers first). */
  if (atomic_load_explicit(&be->failed, memory_order_acquire))
    return coll__err(be->fail_status, "%s: %s", what, be->fail_why);
  if (p == NULL && bytes == 0) return COLL_OK;
  s = coll__cuda_mem_kind(be->t, p, &kind, &dev);
  if (s != COLL_OK) {
    coll__err_prefix(what);
    return s;
  }
  if (kind == COLL_MEM_HOST || kind == COLL_MEM_PINNED)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: %p is %s host memory; an NCCL comm needs CUDA device "
                     "memory (use a CPU comm for host buffers)",
                     what, p, kind == COLL_MEM_PINNED ? "pinned" : "pageable");
  if (kind == COLL_MEM_DEVICE && dev != be->dev)
    return coll__err(
        COLL_ERR_INVALID_ARG,
        "%s: %p is memory of CUDA device %d, but comm '%s' rank %d "
        "runs on device %d",
        what, p, dev, c->name, c->rank, be->dev);
  return COLL_OK;
}

static const coll_backend_ops_t nccl_ops = {
    .name = "nccl",
    .submit = be_submit,
    .abort = be_abort,
    .destroy = be_destroy,
    .check_buffer = be_check_buffer,
    .prepare = be_prepare,
    .settle = be_settle,
    .shrink = coll__nccl_shrink,
    .shrink_exclude = coll__nccl_shrink_exclude,
};

coll_status_t coll__nccl_comm_wrap(const coll_nccl_table_t *t, ncclComm_t nc,
                                   int dev, int rank, int world,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  coll_nccl_be_t *be = calloc(1, sizeof *be);
  coll_comm_t *c = NULL;
  coll_status_t s;
  if (be == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "out of memory");
    goto fail;
  }
  COLL_CHECK_GOTO(coll__comm_new(&nccl_ops, rank, world, cfg, &c), s, fail);
  be->t = t;
  be->comm = c;
  be->nc = nc;
  be->dev = dev;
  if (t->nccl_get_version(&be->version) != ncclSuccess) be->version = 0;
  /* The barrier's one device float, made here: nothing under the issue
   * guard should allocate device memory. */
  {
    coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
    cudaError_t e = cudaErrorUnknown;
    s = coll__cuda_device_enter(t, dev, &saved, "comm init");
    if (s == COLL_OK) e = t->cuda_malloc(&be->barrier_buf, sizeof(float));
    coll__cuda_device_leave(t, saved);
    if (s == COLL_OK && e != cudaSuccess) {
      be->barrier_buf = NULL;
      s = coll__cuda_result(t, e, "comm init: cudaMalloc");
    }
    if (s != COLL_OK) {
      coll__comm_free_shell(c);
      goto fail;
    }
  }
  if (coll__nccl_agree_wanted()) {
    s = coll__nccl_agree_init(be);
    if (s != COLL_OK) {
      coll__nccl_agree_free(be);
      t->cuda_free(be->barrier_buf);
      coll__comm_free_shell(c);
      goto fail;
    }
  }
  be->keep_for_shrink = coll__nccl_keep_wanted(t);
  uv_mutex_init(&be->mu);
  c->be = be;
  *out = c;
  return COLL_OK;
fail:
  free(be);
  /* Abort, not destroy: it never waits for peers. */
  t->nccl_comm_abort(nc);
  return s;
}
