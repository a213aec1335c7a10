/* SPDX-License-Identifier: Apache-2.0 */
/* staging.c: device buffers on a CPU comm. Each work item runs as a sequence
 * of host collectives over pinned segments: while the ring reduces segment k,
 * the slab's own stream copies segment k+1 in and segment k-1 out (three
 * slots). That stream starts after the work issued so far on the caller's
 * stream, and the caller's stream is made to wait for the copies back.
 * Every rank segments the same way (the plan depends only on count, dtype,
 * the world size and the segment size), so the host collectives match up.
 * Fedavg runs whole (one host call), since its peers' calls must stay one
 * message; point-to-point has its own path (staged_p2p.c). A rank whose
 * buffers are host memory runs the work in one host call, so above one
 * segment the ranks of a collective must agree on where their buffers
 * live; the CPU backend's agreement check reports a disagreement as a
 * length mismatch. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/error.h"
#include "cuda/cuda_util.h"
#include "cuda/stage_sync.h"
#include "cuda/staging.h"
#include "cuda/staging_pool.h"

typedef struct copy {
  char *user; /* device (or host) memory of the caller */
  size_t off; /* into the slot */
  size_t bytes;
} copy_t;

/* One host collective of the plan: where its buffers sit in the slot and
 * what moves in and out. */
typedef struct seg {
  coll_work_t hw;
  size_t send_off, recv_off, bytes; /* bytes: slot space used */
  int has_send, has_recv;
  int nin, nout;
  copy_t *in, *out; /* up to world + 1 each */
} seg_t;

typedef struct plan {
  const coll_work_t *w;
  const coll_buffer_t *buf; /* the buffer of a batch being staged */
  int world;
  size_t esz, count, per_seg, nseg;
} plan_t;

/* 1 if p is device memory (its device in *dev). Managed memory is host
 * accessible, so the host path reads it directly. */
static int on_device(const coll_nccl_table_t *t, const void *p, int *dev) {
  coll_mem_kind_t kind;
  if (p == NULL) return 0;
  if (coll__cuda_mem_kind(t, p, &kind, dev) != COLL_OK) return 0;
  return kind == COLL_MEM_DEVICE;
}

/* The device of w's first device buffer, or -1 if none. */
static int work_device(const coll_nccl_table_t *t, const coll_work_t *w) {
  int dev = -1;
  size_t i;
  if (on_device(t, w->send, &dev) || on_device(t, w->recv, &dev)) return dev;
  for (i = 0; i < w->nbufs; i++)
    if (on_device(t, w->bufs[i].data, &dev)) return dev;
  return -1;
}

int coll__work_on_device(const coll_work_t *w) {
  const coll_nccl_table_t *t;
  if (w->send == NULL && w->recv == NULL && w->nbufs == 0) return 0;
  t = coll__cuda_if_in_use();
  return t != NULL && work_device(t, w) >= 0;
}

static size_t round_up(size_t n) { return (n + 63) & ~(size_t)63; }

static void add_copy(copy_t *list, int *n, const void *user, size_t off,
                     size_t bytes) {
  list[*n].user = (char *)user;
  list[*n].off = off;
  list[*n].bytes = bytes;
  (*n)++;
}

/* Fills segment k of the plan (pointers relative to the slot, fixed up by
 * the runner). */
static void plan_seg(const plan_t *p, size_t k, seg_t *s) {
  const coll_work_t *w = p->w;
  size_t off = k * p->per_seg, n, e = p->esz;
  int r;
  n = p->count - off < p->per_seg ? p->count - off : p->per_seg;
  s->hw = *w;
  s->hw.stream = NULL;
  s->hw.count = n;
  s->hw.nbufs = 0;
  s->hw.bufs = NULL; /* the CPU backend takes bufs != NULL as a batch */
  s->nin = s->nout = 0;
  s->has_send = s->has_recv = 0;
  s->send_off = 0;
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_PREMUL_SUM:
    case COLL_WORK_BROADCAST: {
      /* One in-place area: in from the source, out to the destination. */
      const char *src = p->buf ? p->buf->data : (w->send ? w->send : w->recv);
      char *dst = p->buf ? p->buf->data : w->recv;
      if (w->kind == COLL_WORK_ALLREDUCE && p->buf && w->nbufs == 1 && w->send)
        src = w->send;
      s->has_send = s->has_recv = 1;
      s->recv_off = 0;
      s->bytes = n * e;
      add_copy(s->in, &s->nin, src + off * e, 0, n * e);
      add_copy(s->out, &s->nout, dst + off * e, 0, n * e);
      if (p->buf) {
        s->hw.dtype = p->buf->dtype;
        s->hw.nbufs = 1;
        s->hw.bufs = s->hw.inline_bufs;
        s->hw.inline_bufs[0].count = n;
        s->hw.inline_bufs[0].dtype = p->buf->dtype;
      }
      break;
    }
    case COLL_WORK_REDUCE:
      /* recv is staged in and out, so ranks whose recv the reduction does
       * not write get their bytes back unchanged. */
      s->has_send = 1;
      s->recv_off = round_up(n * e);
      s->bytes = s->recv_off + n * e;
      add_copy(s->in, &s->nin, (const char *)w->send + off * e, 0, n * e);
      if (w->recv != NULL) {
        s->has_recv = 1;
        add_copy(s->in, &s->nin, (char *)w->recv + off * e, s->recv_off, n * e);
        add_copy(s->out, &s->nout, (char *)w->recv + off * e, s->recv_off,
                 n * e);
      }
      break;
    case COLL_WORK_ALLGATHER:
      s->has_send = s->has_recv = 1;
      s->recv_off = round_up(n * e);
      s->bytes = s->recv_off + (size_t)p->world * n * e;
      add_copy(s->in, &s->nin, (const char *)w->send + off * e, 0, n * e);
      for (r = 0; r < p->world; r++)
        add_copy(s->out, &s->nout,
                 (char *)w->recv + ((size_t)r * p->count + off) * e,
                 s->recv_off + (size_t)r * n * e, n * e);
      break;
    case COLL_WORK_REDUCE_SCATTER:
      s->has_send = s->has_recv = 1;
      s->recv_off = round_up((size_t)p->world * n * e);
      s->bytes = s->recv_off + n * e;
      for (r = 0; r < p->world; r++)
        add_copy(s->in, &s->nin,
                 (const char *)w->send + ((size_t)r * p->count + off) * e,
                 (size_t)r * n * e, n * e);
      add_copy(s->out, &s->nout, (char *)w->recv + off * e, s->recv_off, n * e);
      break;
    default:
      /* Whole: send in; recv in and out (so a short message leaves the
       * tail of the caller's buffer as it was). */
      s->recv_off = w->send != NULL ? round_up(n * e) : 0;
      s->bytes = s->recv_off + (w->recv != NULL ? n * e : 0);
      if (w->send != NULL) {
        s->has_send = 1;
        add_copy(s->in, &s->nin, w->send, 0, n * e);
      }
      if (w->recv != NULL) {
        s->has_recv = 1;
        add_copy(s->in, &s->nin, w->recv, s->recv_off, n * e);
        add_copy(s->out, &s->nout, w->recv, s->recv_off, n * e);
      }
      break;
  }
}

typedef struct runner {
  const coll_nccl_table_t *t;
  cudaStream_t st; /* the slab's own stream: every copy runs there */
  coll_slab_t *slab;
  size_t slot_bytes;
  int nslots;
  seg_t seg[COLL_STAGE_SLOTS];
  atomic_int *aborted; /* the comm's abort flag: ends every wait */
  int64_t timeout_ms;  /* the comm's, per wait */
} runner_t;

static char *slot_base(const runner_t *r, int slot) {
  return (char *)r->slab->ptr + (size_t)slot * r->slot_bytes;
}

static coll_status_t copies_issue(runner_t *r, int slot, int in) {
  const seg_t *s = &r->seg[slot];
  const copy_t *c = in ? s->in : s->out;
  int i, n = in ? s->nin : s->nout;
  cudaError_t e;
  for (i = 0; i < n; i++) {
    char *host = slot_base(r, slot) + c[i].off;
    if (c[i].bytes == 0) continue;
    /* cudaMemcpyDefault: the runtime tells device from host memory (UVA). */
    e = r->t->cuda_memcpy_async(in ? host : c[i].user, in ? c[i].user : host,
                                c[i].bytes, cudaMemcpyDefault, r->st);
    if (e != cudaSuccess)
      return coll__cuda_result(r->t, e, "staging: cudaMemcpyAsync");
  }
  return COLL_OK;
}

static coll_status_t event_wait(runner_t *r, cudaEvent_t ev) {
  return coll__stage_event_wait(r->t, ev, r->aborted, r->timeout_ms);
}

static coll_status_t slot_fill(runner_t *r, const plan_t *p, size_t k) {
  int slot = (int)(k % (size_t)r->nslots);
  cudaError_t e;
  plan_seg(p, k, &r->seg[slot]);
  COLL_CHECK(copies_issue(r, slot, 1));
  e = r->t->cuda_event_record(r->slab->ev[slot], r->st);
  return coll__cuda_result(r->t, e, "staging: cudaEventRecord");
}

static coll_status_t slot_run(runner_t *r, int slot, void *cpu,
                              coll_host_run_fn run) {
  seg_t *s = &r->seg[slot];
  char *base = slot_base(r, slot);
  s->hw.send = s->has_send ? base + s->send_off : NULL;
  s->hw.recv = s->has_recv ? base + s->recv_off : NULL;
  if (s->hw.nbufs == 1) s->hw.inline_bufs[0].data = base;
  return run(cpu, &s->hw);
}

/* The pipeline: fill k+1 while k runs, drain k after it ran. A slot is
 * refilled only after its previous drain, which stream order guarantees. */
static coll_status_t run_plan(runner_t *r, const plan_t *p, void *cpu,
                              coll_host_run_fn run) {
  coll_status_t s, s2;
  size_t k;
  cudaError_t e;
  s = slot_fill(r, p, 0);
  for (k = 0; k < p->nseg && s == COLL_OK; k++) {
    int slot = (int)(k % (size_t)r->nslots);
    if (k + 1 < p->nseg) {
      s = slot_fill(r, p, k + 1);
      if (s != COLL_OK) break;
    }
    s = event_wait(r, r->slab->ev[slot]);
    if (s == COLL_OK) s = slot_run(r, slot, cpu, run);
    if (s == COLL_OK) s = copies_issue(r, slot, 0);
  }
  /* Drain everything issued, also after a failure: the slab goes back to
   * the pool only once no copy can touch it. */
  e = r->t->cuda_event_record(r->slab->ev[0], r->st);
  s2 = e == cudaSuccess
           ? event_wait(r, r->slab->ev[0])
           : coll__cuda_result(r->t, e, "staging: cudaEventRecord");
  if (s2 != COLL_OK) {
    if (s == COLL_OK) s = s2;
    /* Its copies may still run: parked, never reused while they might. */
    coll__slab_park(r->slab);
    r->slab = NULL;
    return s;
  }
  /* This thread saw the copies back complete, so the wait is satisfied
   * already; it tells CUDA the order too (cheaply), so that the caller's
   * stream never depends on which thread waited for what. */
  s2 = coll__stage_caller_after(r->slab, r->slab->ev[0], (void *)p->w->stream);
  return s != COLL_OK ? s : s2;
}

/* The world size, for plans whose blocks are per rank: one tiny host
 * allreduce, since the CPU backend's state is opaque here. */
static coll_status_t host_world(const coll_work_t *w, void *cpu,
                                coll_host_run_fn run, int *world) {
  int32_t one = 1;
  coll_work_t q;
  memset(&q, 0, sizeof q);
  q.kind = COLL_WORK_ALLREDUCE;
  q.send = &one;
  q.recv = &one;
  q.count = 1;
  q.dtype = COLL_I32;
  q.op = COLL_SUM;
  q.deadline_ms = w->deadline_ms;
  COLL_CHECK(run(cpu, &q));
  *world = one;
  return COLL_OK;
}

static void plan_init(plan_t *p, const coll_work_t *w, const coll_buffer_t *b,
                      int world) {
  coll_dtype_t dt = b != NULL ? b->dtype : w->dtype;
  size_t seg = coll__staging_segment();
  memset(p, 0, sizeof *p);
  p->w = w;
  p->buf = b;
  p->world = world;
  p->esz = w->kind == COLL_WORK_FEDAVG ? sizeof(float) : coll_dtype_size(dt);
  if (p->esz == 0) p->esz = 1;
  p->count = b != NULL ? b->count : w->count;
  /* A slot never needs more than one segment (a multiple of 64 bytes):
   * where it holds two areas, the 64-byte alignment between them comes out
   * of the budget. So the pool can keep every pipeline's slab. */
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_PREMUL_SUM:
    case COLL_WORK_BROADCAST: p->per_seg = seg / p->esz; break;
    case COLL_WORK_REDUCE: p->per_seg = (seg - 64) / (p->esz * 2); break;
    case COLL_WORK_ALLGATHER:
    case COLL_WORK_REDUCE_SCATTER:
      p->per_seg = (seg - 64) / (p->esz * (size_t)(world + 1));
      break;
    default:
      /* Whole (fedavg): a slab above three segments is freed after use
       * rather than kept pinned for the life of the process. */
      p->per_seg = p->count;
      break;
  }
  if (p->per_seg == 0) p->per_seg = 1;
  p->nseg = p->count == 0 ? 1 : (p->count + p->per_seg - 1) / p->per_seg;
}

static coll_status_t stage_one(const coll_nccl_table_t *t, const plan_t *p,
                               int dev, void *cpu, coll_host_run_fn run,
                               atomic_int *aborted, int64_t timeout_ms) {
  runner_t r;
  copy_t *copies;
  size_t per = (size_t)p->world + 2;
  int i;
  coll_status_t s;
  memset(&r, 0, sizeof r);
  copies = calloc((size_t)COLL_STAGE_SLOTS * 2 * per, sizeof *copies);
  if (copies == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "staging: out of memory");
  for (i = 0; i < COLL_STAGE_SLOTS; i++) {
    r.seg[i].in = copies + (size_t)i * 2 * per;
    r.seg[i].out = r.seg[i].in + per;
  }
  r.t = t;
  r.nslots = p->nseg > 1 ? COLL_STAGE_SLOTS : 1;
  r.aborted = aborted;
  r.timeout_ms = timeout_ms;
  plan_seg(p, 0, &r.seg[0]); /* the first segment is the largest */
  r.slot_bytes = round_up(r.seg[0].bytes);
  s = coll__slab_get(t, r.slot_bytes * (size_t)r.nslots, dev, &r.slab);
  if (s == COLL_OK) {
    r.st = r.slab->st;
    /* Nothing is queued on the slab's stream if this fails. */
    s = coll__stage_after_caller(r.slab, (void *)p->w->stream);
    if (s == COLL_OK) s = run_plan(&r, p, cpu, run);
    if (r.slab != NULL) coll__slab_put(r.slab);
  }
  free(copies);
  return s;
}

coll_status_t coll__staged_run(void *cpu, const coll_work_t *w,
                               coll_host_run_fn run, atomic_int *aborted,
                               int64_t timeout_ms) {
  const coll_nccl_table_t *t = coll__cuda_if_in_use();
  int world = 1, dev;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  coll_status_t s = COLL_OK;
  plan_t p;
  size_t i;
  if (t == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "staging: the CUDA runtime is not usable here");
  /* Copies and their events belong to the buffers' device (the caller's
   * stream lives there), whatever thread runs this. */
  dev = work_device(t, w);
  if (dev < 0) return run(cpu, w);
  COLL_CHECK(coll__cuda_device_enter(t, dev, &saved, "staging"));
  if (w->kind == COLL_WORK_ALLGATHER || w->kind == COLL_WORK_REDUCE_SCATTER)
    s = host_world(w, cpu, run, &world);
  if (s == COLL_OK &&
      (w->kind == COLL_WORK_ALLREDUCE || w->kind == COLL_WORK_PREMUL_SUM) &&
      w->nbufs > 0) {
    /* A batch runs buffer by buffer, each segmented the same way on every
     * rank. */
    for (i = 0; i < w->nbufs && s == COLL_OK; i++) {
      plan_init(&p, w, &w->bufs[i], world);
      s = stage_one(t, &p, dev, cpu, run, aborted, timeout_ms);
    }
  } else if (s == COLL_OK) {
    plan_init(&p, w, NULL, world);
    s = stage_one(t, &p, dev, cpu, run, aborted, timeout_ms);
  }
  coll__cuda_device_leave(t, saved);
  return s;
}
