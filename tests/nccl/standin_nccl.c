/* SPDX-License-Identifier: Apache-2.0 */
/* standin_nccl.c: the NCCL half of the stand-in. Ranks (threads) meet by
 * unique id in a clique; the k-th collective of every rank of a clique forms
 * one slot, which runs on host memory once every rank's call reached the head
 * of its stream. Reductions compute what NCCL 2.28 computes on the GPU:
 * integer sums wrap (8-bit too), f16/bf16 round to their type after every
 * step, ncclAvg is a pre-multiplied sum on floating types and a wrapped sum
 * divided afterwards on integers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/half.h"
#include "standin_impl.h"

enum { K_ALLREDUCE, K_BCAST, K_REDUCE, K_ALLGATHER, K_RS, K_P2P };

static size_t esize(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0; /* fp8: not modelled */
  }
}

static int is_float(ncclDataType_t dt) {
  return dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat32 ||
         dt == ncclFloat64;
}

/* Whether max/min replaces the accumulated a by the new v. NCCL's FuncMinMax
 * uses fmaxf/fminf (and __hmax/__hmin for the 2-byte types), where a NaN
 * loses to a number; equal values keep the accumulated one. */
static int takes_new(double a, double v, int is_max) {
  if (v != v) return 0;
  if (a != a) return 1;
  return is_max ? v > a : v < a;
}

/* Integers: acc = acc OP x (first: acc = x), in the unsigned type U so sums
 * and products wrap like NCCL's (8-bit too). */
#define INT_LOOP(T, U)                                    \
  do {                                                    \
    T *d = acc;                                           \
    const T *s = x;                                       \
    for (size_t i = 0; i < n; i++) {                      \
      T v = s[i];                                         \
      if (first) {                                        \
        d[i] = v;                                         \
        continue;                                         \
      }                                                   \
      switch (op) {                                       \
        case ncclProd: d[i] = (T)((U)d[i] * (U)v); break; \
        case ncclMax: d[i] = d[i] > v ? d[i] : v; break;  \
        case ncclMin: d[i] = d[i] < v ? d[i] : v; break;  \
        default: d[i] = (T)((U)d[i] + (U)v); break;       \
      }                                                   \
    }                                                     \
  } while (0)

/* f32 and f64: every step in the element type (C evaluates float * float in
 * float on the targets we build for); premul multiplies each input by the
 * scalar k first, as NCCL's FuncPreMulSum pre-op does on load. */
#define FLT_LOOP(T)                                        \
  do {                                                     \
    T *d = acc;                                            \
    const T *s = x;                                        \
    const T k = (T)f;                                      \
    for (size_t i = 0; i < n; i++) {                       \
      T v = s[i];                                          \
      if (premul) v = v * k;                               \
      if (first) {                                         \
        d[i] = v;                                          \
        continue;                                          \
      }                                                    \
      switch (op) {                                        \
        case ncclProd: d[i] = d[i] * v; break;             \
        case ncclMax:                                      \
        case ncclMin:                                      \
          if (takes_new(d[i], v, op == ncclMax)) d[i] = v; \
          break;                                           \
        default: d[i] = d[i] + v; break;                   \
      }                                                    \
    }                                                      \
  } while (0)

static float half_get(ncclDataType_t dt, uint16_t h) {
  return dt == ncclFloat16 ? coll__h2f(h) : coll__bf2f(h);
}

static uint16_t half_put(ncclDataType_t dt, float v) {
  return dt == ncclFloat16 ? coll__f2h(v) : coll__f2bf(v);
}

/* f16 and bf16 as NCCL 2.28 reduces them (__hadd, __hmul, __hmax): each step
 * computed in float and rounded to the element type, round to nearest even.
 * Float holds the exact product of two such values, and its 24 bits are
 * enough for a sum to be rounded twice without harm (24 >= 2 * 11 + 2), so
 * this is the correctly rounded half-precision result. */
static void red_half(ncclDataType_t dt, int op, int premul, double f, void *acc,
                     const void *x, size_t n, int first) {
  uint16_t *d = acc;
  const uint16_t *s = x;
  const float k = (float)f; /* exact: f holds a value of the element type */
  for (size_t i = 0; i < n; i++) {
    uint16_t vb = s[i];
    float a, v;
    if (premul) vb = half_put(dt, half_get(dt, vb) * k);
    if (first) {
      d[i] = vb;
      continue;
    }
    a = half_get(dt, d[i]);
    v = half_get(dt, vb);
    switch (op) {
      case ncclProd: d[i] = half_put(dt, a * v); break;
      case ncclMax:
      case ncclMin:
        if (takes_new(a, v, op == ncclMax)) d[i] = vb;
        break;
      default: d[i] = half_put(dt, a + v); break;
    }
  }
}

/* acc = acc OP x (first: acc = x); with premul, x is scaled by f first. */
static void red(ncclDataType_t dt, int op, int premul, double f, void *acc,
                const void *x, size_t n, int first) {
  switch (dt) {
    case ncclInt8: INT_LOOP(int8_t, uint8_t); break;
    case ncclUint8: INT_LOOP(uint8_t, uint8_t); break;
    case ncclInt32: INT_LOOP(int32_t, uint32_t); break;
    case ncclUint32: INT_LOOP(uint32_t, uint32_t); break;
    case ncclInt64: INT_LOOP(int64_t, uint64_t); break;
    case ncclUint64: INT_LOOP(uint64_t, uint64_t); break;
    case ncclFloat16:
    case ncclBfloat16: red_half(dt, op, premul, f, acc, x, n, first); break;
    case ncclFloat32: FLT_LOOP(float); break;
    case ncclFloat64: FLT_LOOP(double); break;
    default: break;
  }
}

/* ncclAvg's scalar on floating types (NCCL's hostToDevRedOp): 1/world in
 * double, then float, then the element type, each conversion rounded to
 * nearest even. bf16 world 3 gets 0.333984 (+0.2 %), f16 0.33325. */
static double avg_scalar(ncclDataType_t dt, int w) {
  float f = (float)(1.0 / w);
  switch (dt) {
    case ncclFloat16: return coll__h2f(coll__f2h(f));
    case ncclBfloat16: return coll__bf2f(coll__f2bf(f));
    case ncclFloat64: return 1.0 / w;
    default: return f;
  }
}

#define DIV_LOOP(T)                                         \
  do {                                                      \
    T *d = acc;                                             \
    for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / (T)w); \
  } while (0)

/* ncclAvg on integers (NCCL's SumPostDiv): the wrapped sum divided by the
 * world, truncated toward zero, unsigned division for unsigned types; C's
 * division does exactly that. Floating types never get here: their average
 * is a pre-multiplied sum. */
static void avg_finish(ncclDataType_t dt, void *acc, size_t n, int w) {
  switch (dt) {
    case ncclInt8: DIV_LOOP(int8_t); break;
    case ncclUint8: DIV_LOOP(uint8_t); break;
    case ncclInt32: DIV_LOOP(int32_t); break;
    case ncclUint32: DIV_LOOP(uint32_t); break;
    case ncclInt64: DIV_LOOP(int64_t); break;
    case ncclUint64: DIV_LOOP(uint64_t); break;
    default: break;
  }
}

/* Reduces the snapshots' blocks at element offset `off` into acc, rank 0
 * first, then 1, 2, ... (NCCL's order depends on the ring; this one is kept
 * fixed so that tests can compute the same value). */
static void reduce_into(si_slot_t *sl, char **snap, void *acc, size_t off,
                        size_t n) {
  int w = sl->q->world, r, op = sl->a[0].op;
  ncclDataType_t dt = sl->a[0].dt;
  size_t e = esize(dt);
  int float_avg = op == ncclAvg && is_float(dt);
  for (r = 0; r < w; r++) {
    int user = sl->a[r].op < 0; /* a premul op this rank created */
    int premul = user || float_avg;
    double f = user ? sl->a[r].factor : float_avg ? avg_scalar(dt, w) : 1.0;
    red(dt, premul || op == ncclAvg ? ncclSum : op, premul, f, acc,
        snap[r] + off * e, n, r == 0);
  }
  if (op == ncclAvg && !float_avg) avg_finish(dt, acc, n, w);
}

static void exec_slot(si_slot_t *sl) {
  int w = sl->q->world, r, k;
  char *snap[SI_MAXR] = {0};
  si_arg_t *a = sl->a;
  /* Rank 0 takes part in every collective; a message's sender in p2p. */
  int lead = sl->kind == K_P2P ? sl->chan / SI_MAXR : 0;
  size_t e = esize(a[lead].dt), n = a[lead].count, in_bytes = n * e;
  char *acc = NULL;
  if (sl->kind == K_RS) in_bytes = n * e * (size_t)w;
  /* Snapshot every input first: in-place forms read what others write. */
  for (r = 0; r < SI_MAXR; r++) {
    if (!(sl->want & (1u << r)) || a[r].send == NULL) continue;
    snap[r] = malloc(in_bytes ? in_bytes : 1);
    memcpy(snap[r], a[r].send, in_bytes);
  }
  acc = calloc(1, in_bytes ? in_bytes : 1);
  switch (sl->kind) {
    case K_ALLREDUCE:
      reduce_into(sl, snap, acc, 0, n);
      for (r = 0; r < w; r++) memcpy(a[r].recv, acc, n * e);
      break;
    case K_REDUCE:
      reduce_into(sl, snap, acc, 0, n);
      memcpy(a[a[0].root].recv, acc, n * e);
      break;
    case K_BCAST:
      for (r = 0; r < w; r++) memcpy(a[r].recv, snap[a[0].root], n * e);
      break;
    case K_ALLGATHER:
      for (r = 0; r < w; r++)
        for (k = 0; k < w; k++)
          memcpy((char *)a[r].recv + (size_t)k * n * e, snap[k], n * e);
      break;
    case K_RS:
      for (r = 0; r < w; r++) {
        reduce_into(sl, snap, acc, (size_t)r * n, n);
        memcpy(a[r].recv, acc, n * e);
      }
      break;
    case K_P2P: {
      int src = sl->chan / SI_MAXR, dst = sl->chan % SI_MAXR;
      size_t c = a[src].count < a[dst].count ? a[src].count : a[dst].count;
      memcpy(a[dst].recv, snap[src], c * e);
      break;
    }
  }
  for (r = 0; r < SI_MAXR; r++) free(snap[r]);
  free(acc);
}

static void slot_unlink(si_slot_t *sl) {
  si_slot_t **pp;
  for (pp = &sl->q->slots; *pp != NULL; pp = &(*pp)->next)
    if (*pp == sl) {
      *pp = sl->next;
      free(sl);
      return;
    }
}

int si_coll_try(si_op_t *op) {
  si_slot_t *sl = op->slot;
  struct ncclComm *c = sl->q->comms[op->rank];
  int r, ready = 1;
  if (!sl->done && (c->freed || c->abort_flag)) {
    /* The comm was aborted or revoked (or shrunk with NCCL_SHRINK_ABORT):
     * its kernels exit, the stream moves on; the peers' halves stay stuck,
     * as with NCCL. */
    sl->queued--;
    return 1;
  }
  if (!sl->done) {
    sl->a[op->rank].at_head = 1;
    for (r = 0; r < SI_MAXR; r++)
      if ((sl->want & (1u << r)) && !(sl->a[r].posted && sl->a[r].at_head))
        ready = 0;
    if (!ready || sl->hang) return 0;
    exec_slot(sl);
    sl->done = 1;
  }
  if (--sl->queued == 0) slot_unlink(sl);
  return 1;
}

static si_slot_t *slot_get(si_clique_t *q, int chan, uint64_t seq, int kind) {
  si_slot_t *sl;
  for (sl = q->slots; sl != NULL; sl = sl->next)
    if (sl->chan == chan && sl->seq == seq) return sl;
  sl = calloc(1, sizeof *sl);
  sl->q = q;
  sl->chan = chan;
  sl->seq = seq;
  sl->kind = kind;
  sl->hang = si.hang;
  sl->want = chan < 0 ? (q->world >= 32 ? ~0u : (1u << q->world) - 1)
                      : (1u << (chan / SI_MAXR)) | (1u << (chan % SI_MAXR));
  sl->next = q->slots;
  q->slots = sl;
  return sl;
}

ncclResult_t si_comm_ok(struct ncclComm *c, const char *what) {
  if (c == NULL || c->freed) {
    si_misuse("%s on a %s comm", what, c == NULL ? "NULL" : "freed");
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

void si_post_call(struct ncclComm *c, int kind, int peer, const si_arg_t *arg,
                  cudaStream_t st) {
  struct CUstream_st *s = si_stream(st, c->dev);
  si_slot_t *sl;
  si_op_t *op;
  int chan = -1;
  uint64_t seq;
  if (kind == K_P2P) {
    int send = arg->send != NULL;
    chan = send ? c->rank * SI_MAXR + peer : peer * SI_MAXR + c->rank;
    seq = send ? c->send_seq[peer]++ : c->recv_seq[peer]++;
  } else {
    seq = c->coll_seq++;
  }
  sl = slot_get(c->q, chan, seq, kind);
  sl->a[c->rank] = *arg;
  sl->a[c->rank].posted = 1;
  sl->queued++;
  op = calloc(1, sizeof *op);
  op->kind = SI_OP_COLL;
  op->slot = sl;
  op->comm = c;
  op->rank = c->rank;
  op->fuse = si_fuse_cur;
  si.st.collectives++;
  si_post(s, op);
}

/* ncclEnqueueCheck (enqueue.cc:2620-2665): a revoked comm is refused; the
 * comm must be ready (a call on a comm still in progress is libcoll's
 * misuse); the arguments are checked; any failure is stored as a
 * nonblocking comm's state, which every later call then reports, and fails
 * the open group. The work reaches the stream when standin_launch.c says
 * so. */
static ncclResult_t post(struct ncclComm *c, int kind, int peer,
                         const si_arg_t *arg, cudaStream_t st) {
  struct CUstream_st *s;
  ncclResult_t r = si_enter(c, "collective");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  if (c->revoked) {
    snprintf(si.last_error, sizeof si.last_error,
             "collective: communicator was revoked");
    si_leave(c);
    return ncclInvalidUsage;
  }
  r = si_ensure_ready(c);
  if (r == ncclInvalidArgument && c->async_err == ncclInProgress)
    si_misuse("an NCCL call on a comm still in progress");
  if (r == ncclSuccess && si.fail_next != ncclSuccess) {
    if (si.fail_skip > 0) {
      si.fail_skip--;
    } else {
      r = si.fail_next;
      si.fail_next = ncclSuccess;
    }
  }
  if (r == ncclSuccess && (esize(arg->dt) == 0 || arg->op == -1000))
    r = ncclInvalidArgument;
  s = r == ncclSuccess ? si_stream(st, c->dev) : NULL;
  if (r == ncclSuccess && (s == NULL || s->dev != c->dev)) {
    si_misuse("collective on a stream of device %d, comm on device %d",
              s ? s->dev : -1, c->dev);
    r = ncclInvalidUsage;
  }
  if (r == ncclSuccess)
    r = si_launch_call(c, kind, kind == K_P2P ? peer : -1, arg, st);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c->nonblocking && c->async_err != ncclInProgress) c->async_err = r;
    si_group_set_error(r);
  }
  si_leave(c);
  return r;
}

static int op_index(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t dt,
                    double *factor) {
  int i = (int)op - (int)ncclNumOps, r = -1 - i;
  if (i < 0 || c == NULL) return (int)op;
  uv_mutex_lock(&si.mu);
  if (i >= SI_MAXOPS || !c->premul_live[i]) {
    r = -1000;
  } else if (c->premul_dt[i] != dt) {
    /* NCCL refuses an op used with another type than it was made for. */
    snprintf(si.last_error, sizeof si.last_error,
             "Data type supplied to user-created ncclRedOp_t does not match "
             "type given to reduction operation");
    r = -1000;
  } else {
    *factor = c->premul[i];
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

static ncclResult_t all_reduce(const void *send, void *recv, size_t count,
                               ncclDataType_t dt, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
  si_arg_t a = {send, recv, count, dt, 0, 1.0f, 0, 0, 0};
  a.op = op_index(c, op, dt, &a.factor); /* -1000: refused in post */
  return post(c, K_ALLREDUCE, 0, &a, st);
}

static ncclResult_t broadcast(const void *send, void *recv, size_t count,
                              ncclDataType_t dt, int root, ncclComm_t c,
                              cudaStream_t st) {
  si_arg_t a = {send, recv, count, dt, ncclSum, 1.0f, root, 0, 0};
  /* Off the root NCCL ignores sendbuff: no snapshot is needed there. */
  if (c != NULL && c->rank != root) a.send = NULL;
  return post(c, K_BCAST, 0, &a, st);
}

static ncclResult_t reduce(const void *send, void *recv, size_t count,
                           ncclDataType_t dt, ncclRedOp_t op, int root,
                           ncclComm_t c, cudaStream_t st) {
  si_arg_t a = {send, recv, count, dt, op, 1.0f, root, 0, 0};
  return post(c, K_REDUCE, 0, &a, st);
}

static ncclResult_t all_gather(const void *send, void *recv, size_t count,
                               ncclDataType_t dt, ncclComm_t c,
                               cudaStream_t st) {
  si_arg_t a = {send, recv, count, dt, ncclSum, 1.0f, 0, 0, 0};
  return post(c, K_ALLGATHER, 0, &a, st);
}

static ncclResult_t reduce_scatter(const void *send, void *recv, size_t count,
                                   ncclDataType_t dt, ncclRedOp_t op,
                                   ncclComm_t c, cudaStream_t st) {
  si_arg_t a = {send, recv, count, dt, op, 1.0f, 0, 0, 0};
  return post(c, K_RS, 0, &a, st);
}

static ncclResult_t p2p_send(const void *buf, size_t count, ncclDataType_t dt,
                             int peer, ncclComm_t c, cudaStream_t st) {
  si_arg_t a = {buf, NULL, count, dt, ncclSum, 1.0f, 0, 0, 0};
  return post(c, K_P2P, peer, &a, st);
}

static ncclResult_t p2p_recv(void *buf, size_t count, ncclDataType_t dt,
                             int peer, ncclComm_t c, cudaStream_t st) {
  si_arg_t a = {NULL, buf, count, dt, ncclSum, 1.0f, 0, 0, 0};
  return post(c, K_P2P, peer, &a, st);
}

void si_nccl_fill_colls(coll_nccl_table_t *t) {
  t->nccl_all_reduce = all_reduce;
  t->nccl_broadcast = broadcast;
  t->nccl_reduce = reduce;
  t->nccl_all_gather = all_gather;
  t->nccl_reduce_scatter = reduce_scatter;
  t->nccl_send = p2p_send;
  t->nccl_recv = p2p_recv;
}
