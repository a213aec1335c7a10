/* SPDX-License-Identifier: Apache-2.0 */
/* staged_p2p.c: a device-memory send or receive on a CPU comm as a state
 * machine (copy in, transport, copy out), each step taken once the one
 * before completed, none of them waiting.
 *
 * The slab holds the whole message: the transport carries a message as one
 * piece and a receiver does not know its length in advance, so a message
 * cannot be cut into segments without changing what goes on the wire (and
 * host buffers on the other side must keep working). A slab larger than
 * the pool keeps goes back to the system after the message (staging_pool.c),
 * so it is not pinned for the life of the process. */
#include "cuda/staged_p2p.h"

#include <stdlib.h>

#include "core/error.h"
#include "cuda/cuda_util.h"
#include "cuda/stage_sync.h"
#include "cuda/staging_pool.h"

enum {
  SP_COPY_IN,  /* send: device -> slab queued on the slab's stream */
  SP_XFER,     /* the transport request is pending */
  SP_COPY_OUT, /* receive: slab -> device queued */
  SP_DONE      /* status and len are final */
};

struct coll_staged_p2p {
  const coll_nccl_table_t *t;
  coll_transport_t *tp;
  coll_slab_t *slab;
  int is_send, peer, dev;
  uint32_t tag;
  void *user;   /* the caller's device buffer */
  void *stream; /* the caller's stream (NULL: the legacy default stream) */
  size_t bytes; /* send: the length; receive: the capacity */
  int state;
  int posted;       /* the transport request was made */
  int copying;      /* a copy queued on the slab's stream may still run */
  coll_treq_t treq; /* while SP_XFER */
  coll_status_t status;
  size_t len;
  char msg[COLL_ERRMSG_MAX];
};

/* The send's copy into the slab, after the caller's earlier stream work;
 * the caller's stream then waits for it, so later kernels cannot overwrite
 * the buffer before it was read. Device current. */
static coll_status_t start_send(coll_staged_p2p_t *sp) {
  coll_slab_t *s = sp->slab;
  cudaError_t e;
  COLL_CHECK(coll__stage_after_caller(s, sp->stream));
  sp->copying = 1;
  if (sp->bytes > 0) {
    /* cudaMemcpyDefault: the runtime tells device from host memory (UVA). */
    e = sp->t->cuda_memcpy_async(s->ptr, sp->user, sp->bytes, cudaMemcpyDefault,
                                 s->st);
    if (e != cudaSuccess)
      return coll__cuda_result(sp->t, e, "staging: cudaMemcpyAsync");
  }
  e = sp->t->cuda_event_record(s->ev[0], s->st);
  if (e != cudaSuccess)
    return coll__cuda_result(sp->t, e, "staging: cudaEventRecord");
  sp->state = SP_COPY_IN;
  return coll__stage_caller_after(s, s->ev[0], sp->stream);
}

/* The receive goes to the transport at once, into the slab: nothing has to
 * be copied first (the copy out writes only what arrived, so the rest of
 * the caller's buffer stays as it was). The copy out will queue behind the
 * caller's stream work issued so far, which may still use the buffer. */
static coll_status_t start_recv(coll_staged_p2p_t *sp) {
  COLL_CHECK(coll__stage_after_caller(sp->slab, sp->stream));
  COLL_CHECK(coll__t_irecv(sp->tp, sp->peer, sp->tag, sp->slab->ptr, sp->bytes,
                           &sp->treq));
  sp->posted = 1;
  sp->state = SP_XFER;
  return COLL_OK;
}

/* The slab back to the pool, or parked while a copy may still touch it.
 * Leaves this thread's error text as it was. */
static void release(coll_staged_p2p_t *sp) {
  char msg[COLL_ERRMSG_MAX];
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  if (!sp->copying) {
    coll__slab_put(sp->slab);
    return;
  }
  /* The fence goes on the slab's stream, of the slab's device. */
  coll__err_save(msg);
  (void)coll__cuda_device_enter(sp->t, sp->dev, &saved, "staging");
  coll__slab_park(sp->slab);
  coll__cuda_device_leave(sp->t, saved);
  coll__err_restore(msg);
}

coll_status_t coll__staged_p2p_start(coll_transport_t *tp, const coll_work_t *w,
                                     coll_staged_p2p_t **out) {
  const coll_nccl_table_t *t = coll__cuda_if_in_use();
  coll_staged_p2p_t *sp;
  coll_mem_kind_t kind;
  coll_status_t s;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  *out = NULL;
  if (t == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "staging: the CUDA runtime is not usable here");
  sp = calloc(1, sizeof *sp);
  if (sp == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "staging: out of memory");
  sp->t = t;
  sp->tp = tp;
  sp->is_send = w->kind == COLL_WORK_SEND;
  sp->peer = w->root;
  sp->tag = w->tag;
  sp->user = sp->is_send ? (void *)w->send : w->recv;
  sp->stream = w->stream;
  sp->bytes = w->count * coll_dtype_size(w->dtype);
  /* The slab's stream and events belong to the buffer's device (the
   * caller's stream lives there), whatever thread calls. */
  s = coll__cuda_mem_kind(t, sp->user, &kind, &sp->dev);
  if (s == COLL_OK && kind != COLL_MEM_DEVICE)
    s = coll__err(COLL_ERR_INTERNAL,
                  "staging: the buffer is not device memory");
  if (s == COLL_OK) s = coll__cuda_device_enter(t, sp->dev, &saved, "staging");
  if (s == COLL_OK) s = coll__slab_get(t, sp->bytes, sp->dev, &sp->slab);
  if (s == COLL_OK) s = sp->is_send ? start_send(sp) : start_recv(sp);
  coll__cuda_device_leave(t, saved);
  if (s != COLL_OK) {
    if (sp->slab != NULL) release(sp);
    free(sp);
    return s;
  }
  *out = sp;
  return COLL_OK;
}

static void fail(coll_staged_p2p_t *sp, coll_status_t s) {
  sp->state = SP_DONE;
  sp->status = s;
  coll__err_save(sp->msg);
}

/* The arrived bytes to the caller's buffer; the caller's stream then waits
 * for them. */
static coll_status_t copy_out(coll_staged_p2p_t *sp) {
  coll_slab_t *s = sp->slab;
  cudaError_t e = cudaSuccess;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  coll_status_t st = coll__cuda_device_enter(sp->t, sp->dev, &saved, "staging");
  if (st != COLL_OK) return st;
  sp->copying = 1;
  if (sp->len > 0)
    e = sp->t->cuda_memcpy_async(sp->user, s->ptr, sp->len, cudaMemcpyDefault,
                                 s->st);
  if (e == cudaSuccess) e = sp->t->cuda_event_record(s->ev[0], s->st);
  st = coll__cuda_result(sp->t, e, "staging: copy to device memory");
  if (st == COLL_OK) st = coll__stage_caller_after(s, s->ev[0], sp->stream);
  coll__cuda_device_leave(sp->t, saved);
  return st;
}

/* One step of the transport: 1 when it finished (status in sp if it
 * failed). */
static int xfer_step(coll_staged_p2p_t *sp, int64_t wait_ms) {
  size_t got = 0;
  coll_status_t s = coll__t_wait_for(sp->tp, sp->treq, wait_ms, &got);
  if (s == COLL_ERR_TIMEOUT) {
    coll__err_clear(); /* still pending: not a failure */
    return 0;
  }
  sp->state = SP_DONE; /* the transport request is gone */
  sp->len = got;
  if (s != COLL_OK) {
    fail(sp, s);
  } else if (!sp->is_send) {
    s = copy_out(sp);
    if (s != COLL_OK)
      fail(sp, s);
    else
      sp->state = SP_COPY_OUT;
  }
  return 1;
}

coll_status_t coll__staged_p2p_progress(coll_staged_p2p_t *sp, int may_post,
                                        int64_t wait_ms, int *done,
                                        size_t *len) {
  coll_status_t s;
  int ready = 0;
  *done = 0;
  *len = 0;
  if (sp->state == SP_COPY_IN) {
    s = coll__stage_event_done(sp->t, sp->slab->ev[0], &ready);
    if (s != COLL_OK) fail(sp, s);
    if (s != COLL_OK || !ready) goto out;
    sp->copying = 0;
    if (!may_post) goto out;
    s = coll__t_isend(sp->tp, sp->peer, sp->tag, sp->slab->ptr, sp->bytes,
                      &sp->treq);
    if (s != COLL_OK) {
      fail(sp, s);
      goto out;
    }
    sp->posted = 1;
    sp->state = SP_XFER;
  }
  if (sp->state == SP_XFER && !xfer_step(sp, wait_ms)) goto out;
  if (sp->state == SP_COPY_OUT) {
    s = coll__stage_event_done(sp->t, sp->slab->ev[0], &ready);
    if (s != COLL_OK) {
      fail(sp, s);
    } else if (ready) {
      sp->copying = 0;
      sp->state = SP_DONE;
    }
  }
out:
  if (sp->state != SP_DONE) return COLL_OK;
  *done = 1;
  *len = sp->len;
  if (sp->status != COLL_OK) coll__err_restore(sp->msg);
  return sp->status;
}

int coll__staged_p2p_posted(const coll_staged_p2p_t *sp) { return sp->posted; }

int coll__staged_p2p_in_transport(const coll_staged_p2p_t *sp) {
  return sp->state == SP_XFER;
}

void coll__staged_p2p_end(coll_staged_p2p_t *sp) {
  char msg[COLL_ERRMSG_MAX];
  int done = 0;
  if (sp == NULL) return;
  coll__err_save(msg);
  if (sp->state == SP_XFER)
    coll__t_abort_reap(sp->tp, sp->treq, COLL_ERR_ABORTED);
  if (sp->copying &&
      coll__stage_event_done(sp->t, sp->slab->ev[0], &done) == COLL_OK && done)
    sp->copying = 0;
  release(sp);
  free(sp);
  coll__err_restore(msg);
}
