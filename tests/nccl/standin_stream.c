/* SPDX-License-Identifier: Apache-2.0 */
/* standin_stream.c: the stand-in's streams and events: work posted to a
 * stream runs at once or when looked at, in order, waiting where CUDA's
 * would (an event not yet passed, the legacy stream's synchronisation, a
 * collective whose peers have not arrived, a hold); cudaStreamPerThread
 * is resolved in the thread that uses it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "standin_impl.h"

/* This thread's cudaStreamPerThread, per device (made on first use). */
static _Thread_local struct CUstream_st *per_thread[SI_MAXDEV];
static _Thread_local unsigned per_thread_gen; /* of si.generation */

/* NULL and cudaStreamLegacy are the device's legacy default stream, which
 * synchronises with its blocking streams (legacy_waits).
 * cudaStreamPerThread is the calling thread's own stream, a blocking one. */
struct CUstream_st *si_stream(cudaStream_t s, int dev) {
  if (s != NULL && s != cudaStreamLegacy && s != cudaStreamPerThread) return s;
  if (dev < 0 || dev >= si.cfg.ndev) return NULL;
  if (s == cudaStreamPerThread) {
    if (per_thread_gen != si.generation) {
      memset(per_thread, 0, sizeof per_thread);
      per_thread_gen = si.generation;
    }
    if (per_thread[dev] == NULL) {
      struct CUstream_st *t = calloc(1, sizeof *t);
      t->dev = dev;
      t->next_all = si.streams;
      si.streams = t;
      per_thread[dev] = t;
    }
    return per_thread[dev];
  }
  return si.defaults[dev];
}

/* World 1 launches on the user's stream only (ncclLaunchOneRank): NCCL's
 * device stream never waits for it. */
int si_comm_has_work(struct ncclComm *c) {
  struct CUstream_st *s;
  si_op_t *op;
  if (c->q->world == 1) return 0;
  for (s = si.streams; s != NULL; s = s->next_all)
    for (op = s->head; op != NULL; op = op->next)
      if (op->kind == SI_OP_COLL && op->comm == c && !op->finished) return 1;
  return 0;
}

void si_wait_streams(struct ncclComm *c, const char *what) {
  int64_t t0 = si_now_ms();
  for (;;) {
    si_progress_all();
    if (!si_comm_has_work(c)) return;
    if (si_now_ms() - t0 > 30000) {
      si_misuse(
          "%s waited 30 s for streams that never passed the comm's "
          "work",
          what);
      return;
    }
    si_wait_a_bit();
  }
}

void si_post(struct CUstream_st *s, si_op_t *op) {
  op->next = NULL;
  op->order = ++si.post_order;
  if (s->tail != NULL)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  if (!si.cfg.deferred) si_progress(s);
}

uint64_t si_fuse_next = 1, si_fuse_cur;

/* Tries the collective at the head and, when it belongs to a fused group,
 * the calls of the same group right behind it (one NCCL kernel). */
static int coll_head(si_op_t *op) {
  si_op_t *k;
  for (k = op->next; op->fuse != 0 && k != NULL && k->kind == SI_OP_COLL &&
                     k->fuse == op->fuse;
       k = k->next)
    if (!k->finished) k->finished = si_coll_try(k);
  if (!op->finished) op->finished = si_coll_try(op);
  return op->finished;
}

/* 1 while stream o holds work posted before op. */
static int earlier_on(const struct CUstream_st *o, const si_op_t *op) {
  return o->head != NULL && o->head->order < op->order;
}

/* The legacy default stream synchronises with every blocking stream of
 * its device: its work waits for what was posted before it on them, and
 * theirs for what was posted before it on the legacy stream. Streams made
 * with cudaStreamNonBlocking take no part. */
static int legacy_waits(const struct CUstream_st *s, const si_op_t *op) {
  const struct CUstream_st *o;
  if (s->nonblocking) return 0;
  if (!s->legacy) {
    o = s->dev >= 0 && s->dev < SI_MAXDEV ? si.defaults[s->dev] : NULL;
    return o != NULL && o != s && earlier_on(o, op);
  }
  for (o = si.streams; o != NULL; o = o->next_all)
    if (o != s && o->dev == s->dev && !o->legacy && !o->nonblocking &&
        earlier_on(o, op))
      return 1;
  return 0;
}

/* Runs the stream's work from its head until something must wait. */
void si_progress(struct CUstream_st *s) {
  si_op_t *op;
  if (si.stalled) return;
  while ((op = s->head) != NULL) {
    if (legacy_waits(s, op)) break;
    if (op->kind == SI_OP_HOLD) {
      if (si_now_ms() < op->until_ms) break;
    } else if (op->kind == SI_OP_COPY) {
      memmove(op->dst, op->src, op->bytes);
    } else if (op->kind == SI_OP_EVENT) {
      if (op->ev->passed < op->seq) op->ev->passed = op->seq;
    } else if (op->kind == SI_OP_WAIT) {
      if (op->ev->passed < op->seq) break; /* cudaStreamWaitEvent */
    } else if (!coll_head(op)) {
      break;
    }
    s->head = op->next;
    if (s->head == NULL) s->tail = NULL;
    free(op);
  }
  uv_cond_broadcast(&si.cv);
}

void si_progress_all(void) {
  struct CUstream_st *s;
  /* Work finished on one stream may unblock another (a collective's peer
   * half, an event waited on): a few passes. */
  for (int pass = 0; pass < 4; pass++)
    for (s = si.streams; s != NULL; s = s->next_all) si_progress(s);
}

void si_streams_install(void) {
  int i;
  for (i = 0; i < si.cfg.ndev; i++) {
    struct CUstream_st *s = calloc(1, sizeof *s);
    s->dev = i;
    s->legacy = 1;
    s->next_all = si.streams;
    si.streams = s;
    si.defaults[i] = s;
  }
}

void si_streams_free_all(void) {
  struct CUstream_st *s;
  struct CUevent_st *ev;
  si_op_t *op;
  while ((s = si.streams) != NULL) {
    si.streams = s->next_all;
    while ((op = s->head) != NULL) {
      s->head = op->next;
      free(op);
    }
    free(s);
  }
  memset(si.defaults, 0, sizeof si.defaults);
  while ((ev = si.events) != NULL) {
    si.events = ev->next_all;
    free(ev);
  }
}

/* cudaStreamNonBlocking: a stream that does not synchronise with the
 * legacy default stream. */
static cudaError_t stream_create_with_flags(cudaStream_t *out, unsigned flags) {
  struct CUstream_st *s;
  SI_NO_DRIVER();
  s = calloc(1, sizeof *s);
  s->nonblocking = (flags & cudaStreamNonBlocking) != 0;
  uv_mutex_lock(&si.mu);
  si_touch_ctx();
  s->dev = si_cur_dev;
  s->next_all = si.streams;
  si.streams = s;
  uv_mutex_unlock(&si.mu);
  *out = s;
  return cudaSuccess;
}

static cudaError_t stream_create(cudaStream_t *out) {
  return stream_create_with_flags(out, cudaStreamDefault);
}

static cudaError_t stream_wait_event(cudaStream_t st, cudaEvent_t ev,
                                     unsigned flags) {
  struct CUstream_st *s;
  si_op_t *op;
  cudaError_t e = cudaSuccess;
  (void)flags;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  s = si_stream(st, si_cur_dev);
  if (s == NULL || ev == NULL || ev->destroyed) {
    si_misuse("cudaStreamWaitEvent: bad stream or event");
    e = cudaErrorInvalidResourceHandle;
  } else {
    op = calloc(1, sizeof *op);
    op->kind = SI_OP_WAIT;
    op->ev = ev;
    op->seq = ev->recorded; /* the work recorded so far, as CUDA captures */
    si_post(s, op);
  }
  uv_mutex_unlock(&si.mu);
  return e;
}

/* Streams stay allocated until uninstall (ops may still reference them). */
static cudaError_t stream_destroy(cudaStream_t s) {
  (void)s;
  SI_NO_DRIVER();
  return cudaSuccess;
}

static cudaError_t stream_query(cudaStream_t st) {
  struct CUstream_st *s;
  cudaError_t e;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  s = si_stream(st, si_cur_dev);
  si_progress_all();
  e = s == NULL         ? cudaErrorInvalidResourceHandle
      : s->head == NULL ? cudaSuccess
                        : cudaErrorNotReady;
  uv_mutex_unlock(&si.mu);
  return e;
}

static cudaError_t stream_synchronize(cudaStream_t st) {
  cudaError_t e;
  int i;
  /* Bounded: a hung stand-in collective must not hang a test. */
  for (i = 0; i < 10000; i++) {
    e = stream_query(st);
    if (e != cudaErrorNotReady) return e;
    uv_sleep(1);
  }
  return cudaErrorLaunchTimeout;
}

static cudaError_t event_create(cudaEvent_t *out, unsigned flags) {
  struct CUevent_st *ev;
  (void)flags;
  SI_NO_DRIVER();
  ev = calloc(1, sizeof *ev);
  uv_mutex_lock(&si.mu);
  si_touch_ctx();
  ev->dev = si_cur_dev;
  ev->next_all = si.events;
  si.events = ev;
  si.st.events_live++;
  uv_mutex_unlock(&si.mu);
  *out = ev;
  return cudaSuccess;
}

static cudaError_t event_record(cudaEvent_t ev, cudaStream_t st) {
  struct CUstream_st *s;
  si_op_t *op;
  cudaError_t e = cudaSuccess;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  s = si_stream(st, si_cur_dev);
  if (s == NULL || ev == NULL || ev->destroyed || ev->dev != s->dev) {
    /* CUDA refuses an event and a stream of different devices. */
    si_misuse("cudaEventRecord: event of device %d on a stream of device %d",
              ev ? ev->dev : -1, s ? s->dev : -1);
    e = cudaErrorInvalidResourceHandle;
  } else {
    op = calloc(1, sizeof *op);
    op->kind = SI_OP_EVENT;
    op->ev = ev;
    op->seq = ++ev->recorded;
    si_post(s, op);
  }
  uv_mutex_unlock(&si.mu);
  return e;
}

static cudaError_t event_query(cudaEvent_t ev) {
  cudaError_t e;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  si_progress_all();
  if (ev->destroyed) {
    si_misuse("cudaEventQuery on a destroyed event");
    e = cudaErrorInvalidResourceHandle;
  } else {
    e = ev->passed >= ev->recorded ? cudaSuccess : cudaErrorNotReady;
  }
  uv_mutex_unlock(&si.mu);
  return e;
}

/* Destroyed events stay allocated (markers may still point at them). */
static cudaError_t event_destroy(cudaEvent_t ev) {
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  if (ev->destroyed) si_misuse("cudaEventDestroy twice");
  ev->destroyed = 1;
  si.st.events_live--;
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static cudaError_t memcpy_async(void *dst, const void *src, size_t bytes,
                                enum cudaMemcpyKind kind, cudaStream_t st) {
  struct CUstream_st *s;
  si_op_t *op;
  cudaError_t e = cudaSuccess;
  (void)kind;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  s = si_stream(st, si_cur_dev);
  if (s == NULL) {
    e = cudaErrorInvalidResourceHandle;
  } else {
    op = calloc(1, sizeof *op);
    op->kind = SI_OP_COPY;
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    si_post(s, op);
    si.st.copies++;
  }
  uv_mutex_unlock(&si.mu);
  return e;
}

void standin_stall(int on) {
  si_init_once();
  uv_mutex_lock(&si.mu);
  si.stalled = on;
  if (!on) si_progress_all();
  uv_mutex_unlock(&si.mu);
}

void standin_hold(cudaStream_t st, int ms) {
  struct CUstream_st *s;
  si_op_t *op;
  uv_mutex_lock(&si.mu);
  s = si_stream(st, si_cur_dev);
  if (s == NULL) {
    si_misuse("standin_hold: bad stream");
  } else {
    op = calloc(1, sizeof *op);
    op->kind = SI_OP_HOLD;
    op->until_ms = si_now_ms() + ms;
    si_post(s, op);
  }
  uv_mutex_unlock(&si.mu);
}

void si_stream_fill(coll_nccl_table_t *t) {
  t->cuda_stream_create = stream_create;
  t->cuda_stream_create_with_flags = stream_create_with_flags;
  t->cuda_stream_wait_event = stream_wait_event;
  t->cuda_stream_destroy = stream_destroy;
  t->cuda_stream_synchronize = stream_synchronize;
  t->cuda_stream_query = stream_query;
  t->cuda_event_create = event_create;
  t->cuda_event_record = event_record;
  t->cuda_event_query = event_query;
  t->cuda_event_destroy = event_destroy;
  t->cuda_memcpy_async = memcpy_async;
}
