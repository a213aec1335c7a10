/* SPDX-License-Identifier: Apache-2.0 */
/* standin_cuda.c: the CUDA runtime half of the stand-in: devices (current
 * device per thread), registered "device" and pinned memory, streams that
 * run work at once or when looked at (cudaStreamPerThread resolved in the
 * thread that uses it), events, and the waits of NCCL's teardown for the
 * streams. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/gpu_table.h"
#include "cuda/staging_pool.h"
#include "standin_impl.h"

si_state_t si;
_Thread_local int si_cur_dev;
_Thread_local int si_group_depth;
_Thread_local int si_cur_ctx;
_Thread_local struct ncclComm *si_group_inits[SI_MAXR];
_Thread_local int si_group_ninit;
static coll_nccl_table_t table;
static uv_once_t si_once = UV_ONCE_INIT;
/* This thread's cudaStreamPerThread, per device (made on first use). */
static _Thread_local struct CUstream_st *per_thread[SI_MAXDEV];
static _Thread_local unsigned per_thread_gen; /* of si.generation */
/* standin_bus_id: this thread's view of the devices' PCI bus ids ("" is
 * the default), valid while bus_gen is si.generation. */
static _Thread_local char bus_ids[SI_MAXDEV][SI_BUS_ID_MAX];
static _Thread_local unsigned bus_gen;

static void si_init(void) {
  uv_mutex_init(&si.mu);
  uv_cond_init(&si.cv);
}

void si_misuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(si.misuse, sizeof si.misuse, fmt, ap);
  va_end(ap);
  si.st.misuse++;
}

#define NO_DRIVER()                                           \
  do {                                                        \
    if (si.cfg.no_driver) return cudaErrorInsufficientDriver; \
  } while (0)

int64_t si_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void si_wait_a_bit(void) { uv_cond_timedwait(&si.cv, &si.mu, 1000000); }

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

/* Runs the stream's work from its head until something must wait. */
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

static cudaError_t get_device_count(int *n) {
  NO_DRIVER();
  if (si.cfg.ndev <= 0) return cudaErrorNoDevice;
  *n = si.cfg.ndev;
  return cudaSuccess;
}

static cudaError_t get_device(int *d) {
  NO_DRIVER();
  *d = si_cur_dev;
  return cudaSuccess;
}

/* Contexts as this thread sees them (si_cur_ctx): 0 none, 1..SI_MAXDEV
 * device d's primary context as d + 1, from SI_CTX_MADE on one made by
 * standin_ctx_create (cuCtxCreate, a green context) on device
 * (v - SI_CTX_MADE) % SI_MAXDEV. */
#define SI_CTX_MADE 1000
static int ctx_made_next;

static int runtime_12(void) {
  return si.cfg.cuda_runtime == 0 || si.cfg.cuda_runtime >= 12000;
}

/* The runtime makes the current device's primary context on first use. */
static void touch_ctx(void) {
  if (si_cur_ctx != 0) return;
  si_cur_ctx = si_cur_dev + 1;
  si.st.contexts |= 1u << si_cur_dev;
}

/* CUDA 12+: cudaSetDevice binds the device's primary context at once.
 * Before, it only chooses the device: the runtime binds its primary
 * context on the next call that needs one. */
static cudaError_t set_device(int d) {
  NO_DRIVER();
  if (d < 0 || d >= si.cfg.ndev) return cudaErrorInvalidDevice;
  si_cur_dev = d;
  uv_mutex_lock(&si.mu);
  si_cur_ctx = 0;
  if (runtime_12()) touch_ctx();
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static CUresult ctx_get_current(CUcontext *ctx) {
  if (si.cfg.no_driver) return CUDA_ERROR_NOT_INITIALIZED;
  *ctx = si_cur_ctx ? (CUcontext)(uintptr_t)si_cur_ctx : NULL;
  return CUDA_SUCCESS;
}

CUcontext standin_ctx_create(int dev) {
  int v;
  uv_mutex_lock(&si.mu);
  v = SI_CTX_MADE + SI_MAXDEV * ctx_made_next++ + dev;
  uv_mutex_unlock(&si.mu);
  return (CUcontext)(uintptr_t)v;
}

static CUresult ctx_set_current(CUcontext ctx) {
  int v = (int)(uintptr_t)ctx;
  if (si.cfg.no_driver) return CUDA_ERROR_NOT_INITIALIZED;
  si_cur_ctx = v;
  if (v >= SI_CTX_MADE)
    si_cur_dev = (v - SI_CTX_MADE) % SI_MAXDEV;
  else if (v != 0)
    si_cur_dev = v - 1;
  else if (runtime_12())
    si_cur_dev = 0; /* the runtime answers device 0 again (unverified) */
  /* Before CUDA 12 the device the thread chose outlives its context. */
  return CUDA_SUCCESS;
}

const char *si_bus_id(int dev) {
  static const char none[] = "";
  if (dev < 0 || dev >= SI_MAXDEV) return none;
  if (bus_gen != si.generation) {
    memset(bus_ids, 0, sizeof bus_ids);
    bus_gen = si.generation;
  }
  /* Device d of a machine that shows every GPU: bus 0x18 + 8 d, as on a
   * board of eight. */
  if (bus_ids[dev][0] == '\0')
    snprintf(bus_ids[dev], sizeof bus_ids[dev], "0000:%02x:00.0",
             0x18 + 8 * dev);
  return bus_ids[dev];
}

void standin_bus_id(int dev, const char *id) {
  if (dev < 0 || dev >= SI_MAXDEV) return;
  (void)si_bus_id(dev); /* the table of this install */
  if (id == NULL)
    bus_ids[dev][0] = '\0';
  else
    snprintf(bus_ids[dev], sizeof bus_ids[dev], "%s", id);
}

/* As the runtime: "0000:3b:00.0", at most len bytes with the NUL. */
static cudaError_t device_get_pci_bus_id(char *id, int len, int dev) {
  NO_DRIVER();
  if (dev < 0 || dev >= si.cfg.ndev) return cudaErrorInvalidDevice;
  if (id == NULL || len <= 0) return cudaErrorInvalidValue;
  snprintf(id, (size_t)len, "%s", si_bus_id(dev));
  return cudaSuccess;
}

static cudaError_t runtime_version(int *v) {
  *v = si.cfg.cuda_runtime != 0 ? si.cfg.cuda_runtime : 13000;
  return cudaSuccess;
}

static cudaError_t driver_version(int *v) {
  NO_DRIVER();
  *v = 13000;
  return cudaSuccess;
}

static const char *error_string(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    default: return "stand-in CUDA error";
  }
}

static cudaError_t get_last_error(void) { return cudaSuccess; }

/* cudaStreamNonBlocking: a stream that does not synchronise with the
 * legacy default stream. */
static cudaError_t stream_create_with_flags(cudaStream_t *out, unsigned flags) {
  struct CUstream_st *s;
  NO_DRIVER();
  s = calloc(1, sizeof *s);
  s->nonblocking = (flags & cudaStreamNonBlocking) != 0;
  uv_mutex_lock(&si.mu);
  touch_ctx();
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
  NO_DRIVER();
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
  NO_DRIVER();
  return cudaSuccess;
}

static cudaError_t stream_query(cudaStream_t st) {
  struct CUstream_st *s;
  cudaError_t e;
  NO_DRIVER();
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
  NO_DRIVER();
  ev = calloc(1, sizeof *ev);
  uv_mutex_lock(&si.mu);
  touch_ctx();
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
  NO_DRIVER();
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
  NO_DRIVER();
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
  NO_DRIVER();
  uv_mutex_lock(&si.mu);
  if (ev->destroyed) si_misuse("cudaEventDestroy twice");
  ev->destroyed = 1;
  si.st.events_live--;
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static si_mem_t *mem_find(const void *p) {
  si_mem_t *m;
  for (m = si.mem; m != NULL; m = m->next)
    if ((const char *)p >= m->p && (const char *)p < m->p + m->bytes) return m;
  return NULL;
}

static cudaError_t pointer_attributes(struct cudaPointerAttributes *a,
                                      const void *p) {
  si_mem_t *m;
  NO_DRIVER();
  uv_mutex_lock(&si.mu);
  m = mem_find(p);
  a->type = m == NULL    ? cudaMemoryTypeUnregistered
            : m->dev < 0 ? cudaMemoryTypeHost
                         : cudaMemoryTypeDevice;
  a->device = m != NULL && m->dev >= 0 ? m->dev : 0;
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static cudaError_t memcpy_async(void *dst, const void *src, size_t bytes,
                                enum cudaMemcpyKind kind, cudaStream_t st) {
  struct CUstream_st *s;
  si_op_t *op;
  cudaError_t e = cudaSuccess;
  (void)kind;
  NO_DRIVER();
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

static void *mem_add(size_t bytes, int dev) {
  si_mem_t *m = calloc(1, sizeof *m);
  m->p = calloc(1, bytes ? bytes : 1);
  m->bytes = bytes ? bytes : 1;
  m->dev = dev;
  uv_mutex_lock(&si.mu);
  m->next = si.mem;
  si.mem = m;
  if (dev < 0) si.st.host_allocs_live++;
  uv_mutex_unlock(&si.mu);
  return m->p;
}

static int mem_remove(void *p) {
  si_mem_t **pp, *m;
  int found = 0;
  uv_mutex_lock(&si.mu);
  for (pp = &si.mem; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->p == p) {
      m = *pp;
      *pp = m->next;
      if (m->dev < 0) si.st.host_allocs_live--;
      free(m->p);
      free(m);
      found = 1;
      break;
    }
  }
  if (!found) si_misuse("free of unknown memory %p", p);
  uv_mutex_unlock(&si.mu);
  return found;
}

static cudaError_t host_alloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  NO_DRIVER();
  *p = mem_add(bytes, -1);
  return cudaSuccess;
}

static cudaError_t free_host(void *p) {
  NO_DRIVER();
  return mem_remove(p) ? cudaSuccess : cudaErrorInvalidValue;
}

static cudaError_t dev_malloc(void **p, size_t bytes) {
  NO_DRIVER();
  *p = mem_add(bytes, si_cur_dev);
  return cudaSuccess;
}

static cudaError_t dev_free(void *p) {
  NO_DRIVER();
  return mem_remove(p) ? cudaSuccess : cudaErrorInvalidValue;
}

void *standin_dev_alloc(int dev, size_t bytes) { return mem_add(bytes, dev); }
void standin_dev_free(void *p) { mem_remove(p); }

void si_cuda_fill(coll_nccl_table_t *t) {
  t->have_cuda = 1;
  t->cuda_get_device_count = get_device_count;
  t->cuda_get_device = get_device;
  t->cuda_set_device = set_device;
  t->cuda_device_get_pci_bus_id = device_get_pci_bus_id;
  t->cuda_get_error_string = error_string;
  t->cuda_get_last_error = get_last_error;
  t->cuda_stream_create = stream_create;
  t->cuda_stream_create_with_flags = stream_create_with_flags;
  t->cuda_stream_wait_event = stream_wait_event;
  t->cuda_runtime_get_version = runtime_version;
  t->cuda_driver_get_version = driver_version;
  t->cu_ctx_get_current = ctx_get_current;
  t->cu_ctx_set_current = ctx_set_current;
  t->cuda_stream_destroy = stream_destroy;
  t->cuda_stream_synchronize = stream_synchronize;
  t->cuda_stream_query = stream_query;
  t->cuda_event_create = event_create;
  t->cuda_event_record = event_record;
  t->cuda_event_query = event_query;
  t->cuda_event_destroy = event_destroy;
  t->cuda_pointer_get_attributes = pointer_attributes;
  t->cuda_memcpy_async = memcpy_async;
  t->cuda_host_alloc = host_alloc;
  t->cuda_free_host = free_host;
  t->cuda_malloc = dev_malloc;
  t->cuda_free = dev_free;
}

void standin_install(const standin_config_t *cfg) {
  int i;
  uv_once(&si_once, si_init);
  uv_mutex_lock(&si.mu);
  si.cfg = *cfg;
  if (si.cfg.ndev > SI_MAXDEV) si.cfg.ndev = SI_MAXDEV;
  if (si.cfg.version == 0) si.cfg.version = 22809;
  si.hang = cfg->hang;
  si.generation++;
  si.stalled = 0;
  si.fail_next = ncclSuccess;
  si.fail_skip = 0;
  si.hook_fn = NULL;
  si.fail_init_rank = -1;
  memset(&si.st, 0, sizeof si.st);
  si.misuse[0] = '\0';
  si.last_error[0] = '\0';
  for (i = 0; i < si.cfg.ndev; i++) {
    struct CUstream_st *s = calloc(1, sizeof *s);
    s->dev = i;
    s->legacy = 1;
    s->next_all = si.streams;
    si.streams = s;
    si.defaults[i] = s;
  }
  uv_mutex_unlock(&si.mu);
  si_cur_dev = 0;
  si_cur_ctx = 0;
  si_group_depth = 0;
  si_group_ninit = 0;
  si_group_naborts = 0;

  memset(&table, 0, sizeof table);
  table.name = "stand-in";
  si_cuda_fill(&table);
  if (cfg->no_nccl)
    snprintf(table.nccl_why, sizeof table.nccl_why,
             "NCCL could not be loaded (libnccl.so.2): stand-in without NCCL");
  else
    si_nccl_fill(&table);
  coll__nccl_table_install(&table);
}

void standin_uninstall(void) {
  si_mem_t *m;
  struct CUstream_st *s;
  struct CUevent_st *ev;
  si_op_t *op;
  /* Pooled staging slabs came from this table: free them through it. */
  coll__slab_pool_clear();
  coll__nccl_table_install(NULL);
  uv_mutex_lock(&si.mu);
  si_nccl_free_all();
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
  while ((m = si.mem) != NULL) {
    si.mem = m->next;
    free(m->p);
    free(m);
  }
  uv_mutex_unlock(&si.mu);
}

void standin_stall(int on) {
  uv_once(&si_once, si_init);
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

void standin_stats(standin_stats_t *out) {
  uv_mutex_lock(&si.mu);
  *out = si.st;
  uv_mutex_unlock(&si.mu);
}

const char *standin_misuse_text(void) { return si.misuse; }
