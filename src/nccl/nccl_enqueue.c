/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_enqueue.c: turns a checked work item into NCCL calls on a stream,
 * inside one NCCL group per work item so that only ncclGroupEnd can answer
 * ncclInProgress. Everything is validated before the group opens, so a
 * refused argument never leaves half a batch launched (and never reaches
 * NCCL, which would keep it as the comm's error). Nothing here waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_exchange.h"

/* NCCL 2.10 brought bfloat16 and ncclAvg; 2.11 pre-multiplied sums. */
#define NCCL_V2_10 21000
#define NCCL_V2_11 21100

static coll_status_t too_old(const coll_nccl_be_t *be, const char *what,
                             const char *needs, const char *version) {
  char have[32];
  coll__nccl_version_text(be->version, have, sizeof have);
  return coll__err(COLL_ERR_UNSUPPORTED,
                   "%s: %s needs NCCL %s or newer; the loaded NCCL is %s", what,
                   needs, version, have);
}

static const ncclDataType_t nccl_dtypes[COLL_DTYPE_COUNT] = {
    [COLL_F16] = ncclFloat16, [COLL_BF16] = ncclBfloat16,
    [COLL_F32] = ncclFloat32, [COLL_F64] = ncclFloat64,
    [COLL_I8] = ncclInt8,     [COLL_U8] = ncclUint8,
    [COLL_I32] = ncclInt32,   [COLL_I64] = ncclInt64,
};

/* 8-bit sums keep NCCL's wrap-around (DESIGN 3.5): ncclSum as it is. */
static const ncclRedOp_t nccl_ops[COLL_OP_COUNT] = {
    [COLL_SUM] = ncclSum, [COLL_PROD] = ncclProd, [COLL_MAX] = ncclMax,
    [COLL_MIN] = ncclMin, [COLL_AVG] = ncclAvg,
};

coll_status_t coll__nccl_dtype(const coll_nccl_be_t *be, coll_dtype_t dt,
                               ncclDataType_t *out, const char *what) {
  if ((unsigned)dt >= COLL_DTYPE_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid dtype %d", what,
                     (int)dt);
  if (dt == COLL_BF16 && be->version < NCCL_V2_10)
    return too_old(be, what, "bf16", "2.10");
  *out = nccl_dtypes[dt];
  return COLL_OK;
}

static coll_status_t map_op(const coll_nccl_be_t *be, coll_work_kind_t kind,
                            coll_op_t op, coll_dtype_t dt, ncclRedOp_t *out,
                            const char *what) {
  if ((unsigned)op >= COLL_OP_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid op %d", what, (int)op);
  if (op == COLL_AVG && be->version < NCCL_V2_10)
    return too_old(be, what, "avg", "2.10");
  COLL_CHECK(coll__nccl_check_numerics(kind, dt, op, what));
  *out = nccl_ops[op];
  return COLL_OK;
}

/* Everything one work item needs, mapped before the group opens. */
typedef struct mapped {
  ncclDataType_t dt[COLL_WORK_INLINE_BUFS];
  ncclDataType_t *dts; /* per buffer of a batch (dt or heap) */
  ncclDataType_t one;
  ncclRedOp_t op;
  ncclRedOp_t premul[COLL_DTYPE_COUNT]; /* per dtype, created */
  int has_premul[COLL_DTYPE_COUNT];
} mapped_t;

static coll_status_t map_work(coll_nccl_be_t *be, const coll_work_t *w,
                              mapped_t *m) {
  const char *what = coll__work_name(w->kind);
  size_t i;
  m->dts = m->dt;
  if (w->nbufs > COLL_WORK_INLINE_BUFS) {
    m->dts = malloc(w->nbufs * sizeof *m->dts);
    if (m->dts == NULL)
      return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  }
  for (i = 0; i < w->nbufs; i++) {
    COLL_CHECK(coll__nccl_dtype(be, w->bufs[i].dtype, &m->dts[i], what));
    if (w->kind == COLL_WORK_ALLREDUCE)
      COLL_CHECK(
          coll__nccl_check_numerics(w->kind, w->bufs[i].dtype, w->op, what));
  }
  switch (w->kind) {
    case COLL_WORK_BROADCAST:
    case COLL_WORK_ALLGATHER:
      return coll__nccl_dtype(be, w->dtype, &m->one, what);
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_REDUCE_SCATTER:
    case COLL_WORK_REDUCE:
      if (w->nbufs == 0)
        COLL_CHECK(coll__nccl_dtype(be, w->dtype, &m->one, what));
      return map_op(be, w->kind, w->op, w->nbufs ? w->bufs[0].dtype : w->dtype,
                    &m->op, what);
    case COLL_WORK_PREMUL_SUM:
      if (be->version < NCCL_V2_11 ||
          be->t->nccl_red_op_create_pre_mul_sum == NULL ||
          be->t->nccl_red_op_destroy == NULL)
        return too_old(be, what, "ncclRedOpCreatePreMulSum", "2.11");
      for (i = 0; i < w->nbufs; i++) {
        unsigned char scalar[8];
        ncclDataType_t ndt;
        COLL_CHECK(coll__nccl_premul_scalar(w->bufs[i].dtype, w->factor, i,
                                            what, scalar, &ndt));
      }
      return COLL_OK;
    case COLL_WORK_BARRIER: return COLL_OK;
    case COLL_WORK_GATHER:
    case COLL_WORK_SCATTER:
    case COLL_WORK_ALLTOALL:
      return coll__nccl_map_exchange(be, w, &m->one, what);
    case COLL_WORK_NEGOTIATE:
    case COLL_WORK_FEDAVG:
      return coll__err(COLL_ERR_UNSUPPORTED,
                       "%s runs on CPU comms only (this comm is NCCL's)", what);
    default:
      return coll__err(COLL_ERR_INTERNAL, "%s: unknown work kind %d", what,
                       (int)w->kind);
  }
}

static void unmap(mapped_t *m) {
  if (m->dts != m->dt) free(m->dts);
  m->dts = m->dt;
}

/* One op per dtype of the batch, each with the factor in that dtype (NCCL
 * ties an op to a comm and a datatype). */
static coll_status_t premul_ops(coll_nccl_be_t *be, const coll_work_t *w,
                                mapped_t *m) {
  size_t i;
  for (i = 0; i < w->nbufs; i++) {
    coll_dtype_t dt = w->bufs[i].dtype;
    unsigned char scalar[8];
    ncclDataType_t ndt;
    ncclResult_t r;
    if (m->has_premul[dt]) continue;
    COLL_CHECK(coll__nccl_premul_scalar(dt, w->factor, i, NULL, scalar, &ndt));
    r = be->t->nccl_red_op_create_pre_mul_sum(&m->premul[dt], scalar, m->dts[i],
                                              ncclScalarHostImmediate, be->nc);
    if (r != ncclSuccess)
      return coll__nccl_enqueue_error(be, r, "ncclRedOpCreatePreMulSum");
    m->has_premul[dt] = 1;
  }
  return COLL_OK;
}

/* Destroys the ops right after the group end, under the guard: NCCL
 * copied each op's state when the call was made (enqueue.cc:2564-2567),
 * and nothing else may pass the comm to NCCL meanwhile (N9 of the second
 * review). Not once the reaper may be freeing the comm. */
static void premul_release(coll_nccl_be_t *be, mapped_t *m) {
  int d;
  for (d = 0; d < COLL_DTYPE_COUNT; d++) {
    if (!m->has_premul[d]) continue;
    if (!be->nc_gone) be->t->nccl_red_op_destroy(m->premul[d], be->nc);
    m->has_premul[d] = 0;
  }
}

/* The calls themselves, inside the open group. */
static ncclResult_t calls(coll_nccl_be_t *be, const coll_work_t *w,
                          const mapped_t *m, cudaStream_t st) {
  const coll_nccl_table_t *t = be->t;
  ncclResult_t r = ncclSuccess;
  size_t i;
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_PREMUL_SUM:
      if (w->nbufs == 0)
        return t->nccl_all_reduce(w->send != NULL ? w->send : w->recv, w->recv,
                                  w->count, m->one, m->op, be->nc, st);
      for (i = 0; i < w->nbufs && r == ncclSuccess; i++) {
        const coll_buffer_t *b = &w->bufs[i];
        const void *src = b->data;
        int premul = w->kind == COLL_WORK_PREMUL_SUM;
        if (!premul && w->nbufs == 1 && w->send != NULL) src = w->send;
        r = t->nccl_all_reduce(src, b->data, b->count, m->dts[i],
                               premul ? m->premul[b->dtype] : m->op, be->nc,
                               st);
      }
      return r;
    case COLL_WORK_BARRIER:
      /* A one-element allreduce completes only once every rank issued it. */
      return t->nccl_all_reduce(be->barrier_buf, be->barrier_buf, 1,
                                ncclFloat32, ncclMax, be->nc, st);
    case COLL_WORK_BROADCAST:
      return t->nccl_broadcast(w->recv, w->recv, w->count, m->one, w->root,
                               be->nc, st);
    case COLL_WORK_ALLGATHER:
      return t->nccl_all_gather(w->send, w->recv, w->count, m->one, be->nc, st);
    case COLL_WORK_REDUCE_SCATTER:
      return t->nccl_reduce_scatter(w->send, w->recv, w->count, m->one, m->op,
                                    be->nc, st);
    case COLL_WORK_REDUCE:
      /* recv may be NULL off the root, where NCCL writes nothing. */
      return t->nccl_reduce(w->send,
                            w->recv != NULL ? w->recv : (void *)w->send,
                            w->count, m->one, m->op, w->root, be->nc, st);
    case COLL_WORK_GATHER:
    case COLL_WORK_SCATTER:
    case COLL_WORK_ALLTOALL:
      return coll__nccl_exchange_calls(be, w, m->one, st);
    default: return ncclInvalidUsage;
  }
}

coll_status_t coll__nccl_enqueue(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st, ncclResult_t *res) {
  const char *what = coll__work_name(w->kind);
  mapped_t m;
  ncclResult_t r, r_end;
  coll_status_t s;
  memset(&m, 0, sizeof m);
  *res = ncclSuccess;
  s = map_work(be, w, &m);
  if (s == COLL_OK && w->kind == COLL_WORK_PREMUL_SUM)
    s = premul_ops(be, w, &m);
  if (s != COLL_OK) {
    premul_release(be, &m);
    unmap(&m);
    return s;
  }
  r = be->t->nccl_group_start();
  if (r == ncclSuccess) {
    r = calls(be, w, &m, st);
    r_end = be->t->nccl_group_end();
    if (r == ncclSuccess) r = r_end;
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    /* A group that failed may have launched part of its work. */
    be->lost_track = 1;
    s = coll__nccl_enqueue_error(be, r, what);
  }
  premul_release(be, &m);
  unmap(&m);
  *res = r;
  return s;
}

ncclResult_t coll__nccl_enqueue_p2p(coll_nccl_be_t *be,
                                    const coll_nccl_req_t *r) {
  const coll_work_t *w = &r->w;
  ncclDataType_t dt = nccl_dtypes[w->dtype];
  if (w->kind == COLL_WORK_SEND)
    return be->t->nccl_send(w->send, w->count, dt, w->root, be->nc, r->st);
  return be->t->nccl_recv(w->recv, w->count, dt, w->root, be->nc, r->st);
}
