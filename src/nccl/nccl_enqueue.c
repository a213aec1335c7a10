/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_enqueue.c: turns a checked work item into NCCL calls on a stream.
 * Nothing here waits; completion is tracked by the caller's event. */
#include <stdio.h>

#include "core/error.h"
#include "nccl/nccl_comm.h"

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

static coll_status_t map_dtype(const coll_nccl_be_t *be, coll_dtype_t dt,
                               ncclDataType_t *out, const char *what) {
  if ((unsigned)dt >= COLL_DTYPE_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid dtype %d", what,
                     (int)dt);
  if (dt == COLL_BF16 && be->version < NCCL_V2_10)
    return too_old(be, what, "bf16", "2.10");
  *out = nccl_dtypes[dt];
  return COLL_OK;
}

static coll_status_t map_op(const coll_nccl_be_t *be, coll_op_t op,
                            ncclRedOp_t *out, const char *what) {
  if ((unsigned)op >= COLL_OP_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid op %d", what, (int)op);
  if (op == COLL_AVG && be->version < NCCL_V2_10)
    return too_old(be, what, "avg", "2.10");
  *out = nccl_ops[op];
  return COLL_OK;
}

static coll_status_t nccl_res(const coll_nccl_be_t *be, ncclResult_t r,
                              const char *what) {
  return coll__nccl_result(be->t, r, be->nc, what);
}

/* Runs the allreduce of every buffer inside one NCCL group, so a batch is
 * one launch. A failed enqueue still ends the group; the first error is
 * what is reported. */
static coll_status_t allreduce_bufs(coll_nccl_be_t *be, const coll_work_t *w,
                                    ncclRedOp_t op, int premul,
                                    cudaStream_t st) {
  const char *what = coll__work_name(w->kind);
  ncclDataType_t dt = ncclFloat32;
  ncclResult_t r, r_end;
  coll_status_t s = COLL_OK;
  size_t i;
  r = be->t->nccl_group_start();
  if (r != ncclSuccess) return nccl_res(be, r, what);
  for (i = 0; i < w->nbufs; i++) {
    const coll_buffer_t *b = &w->bufs[i];
    const void *src = b->data;
    if (!premul && w->nbufs == 1 && w->send != NULL) src = w->send;
    s = map_dtype(be, b->dtype, &dt, what);
    if (s != COLL_OK) break;
    r = be->t->nccl_all_reduce(src, b->data, b->count, dt, op, be->nc, st);
    if (r != ncclSuccess) {
      s = nccl_res(be, r, what);
      break;
    }
  }
  r_end = be->t->nccl_group_end();
  if (s == COLL_OK && r_end != ncclSuccess) s = nccl_res(be, r_end, what);
  return s;
}

static coll_status_t allreduce(coll_nccl_be_t *be, const coll_work_t *w,
                               cudaStream_t st) {
  const char *what = coll__work_name(w->kind);
  ncclRedOp_t op = ncclSum;
  ncclDataType_t dt = ncclFloat32;
  ncclResult_t r;
  COLL_CHECK(map_op(be, w->op, &op, what));
  if (w->nbufs > 0) return allreduce_bufs(be, w, op, 0, st);
  COLL_CHECK(map_dtype(be, w->dtype, &dt, what));
  r = be->t->nccl_all_reduce(w->send != NULL ? w->send : w->recv, w->recv,
                             w->count, dt, op, be->nc, st);
  return nccl_res(be, r, what);
}

/* The pre-multiplied sum's op lives inside this call only: created, used by
 * the group, destroyed on every path (NCCL allows it once the last call
 * given the op returned). */
static coll_status_t premul_sum(coll_nccl_be_t *be, const coll_work_t *w,
                                cudaStream_t st) {
  const char *what = coll__work_name(w->kind);
  float factor = w->factor;
  ncclRedOp_t op = ncclSum;
  ncclResult_t r;
  coll_status_t s;
  size_t i;
  if (be->version < NCCL_V2_11 ||
      be->t->nccl_red_op_create_pre_mul_sum == NULL ||
      be->t->nccl_red_op_destroy == NULL)
    return too_old(be, what, "ncclRedOpCreatePreMulSum", "2.11");
  for (i = 0; i < w->nbufs; i++)
    if (w->bufs[i].dtype != COLL_F32)
      return coll__err(COLL_ERR_UNSUPPORTED,
                       "%s: an NCCL comm takes f32 buffers only; buffer %zu "
                       "is %s",
                       what, i, coll_dtype_name(w->bufs[i].dtype));
  r = be->t->nccl_red_op_create_pre_mul_sum(&op, &factor, ncclFloat32,
                                            ncclScalarHostImmediate, be->nc);
  if (r != ncclSuccess) return nccl_res(be, r, "ncclRedOpCreatePreMulSum");
  s = allreduce_bufs(be, w, op, 1, st);
  r = be->t->nccl_red_op_destroy(op, be->nc);
  if (s == COLL_OK && r != ncclSuccess) s = nccl_res(be, r, "ncclRedOpDestroy");
  return s;
}

static coll_status_t barrier(coll_nccl_be_t *be, cudaStream_t st) {
  cudaError_t e;
  ncclResult_t r;
  if (be->barrier_buf == NULL) {
    e = be->t->cuda_malloc(&be->barrier_buf, sizeof(float));
    if (e != cudaSuccess) {
      be->barrier_buf = NULL;
      return coll__cuda_result(be->t, e, "barrier: cudaMalloc");
    }
  }
  /* A one-element allreduce completes only once every rank issued it. */
  r = be->t->nccl_all_reduce(be->barrier_buf, be->barrier_buf, 1, ncclFloat32,
                             ncclMax, be->nc, st);
  return nccl_res(be, r, "barrier");
}

coll_status_t coll__nccl_enqueue(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st) {
  const coll_nccl_table_t *t = be->t;
  const char *what = coll__work_name(w->kind);
  ncclDataType_t dt = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  ncclResult_t r;
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
      return allreduce(be, w, st);
    case COLL_WORK_PREMUL_SUM:
      return premul_sum(be, w, st);
    case COLL_WORK_BARRIER:
      return barrier(be, st);
    case COLL_WORK_NEGOTIATE:
    case COLL_WORK_FEDAVG:
      return coll__err(COLL_ERR_UNSUPPORTED,
                       "%s runs on CPU comms only (this comm is NCCL's)", what);
    default:
      break;
  }
  COLL_CHECK(map_dtype(be, w->dtype, &dt, what));
  switch (w->kind) {
    case COLL_WORK_BROADCAST:
      r = t->nccl_broadcast(w->recv, w->recv, w->count, dt, w->root, be->nc,
                            st);
      break;
    case COLL_WORK_ALLGATHER:
      r = t->nccl_all_gather(w->send, w->recv, w->count, dt, be->nc, st);
      break;
    case COLL_WORK_REDUCE_SCATTER:
      COLL_CHECK(map_op(be, w->op, &op, what));
      r = t->nccl_reduce_scatter(w->send, w->recv, w->count, dt, op, be->nc,
                                 st);
      break;
    case COLL_WORK_REDUCE:
      COLL_CHECK(map_op(be, w->op, &op, what));
      /* recv may be NULL off the root, where NCCL writes nothing. */
      r = t->nccl_reduce(w->send, w->recv != NULL ? w->recv : (void *)w->send,
                         w->count, dt, op, w->root, be->nc, st);
      break;
    case COLL_WORK_SEND:
      /* NCCL matches point-to-point calls in issue order per peer; tags
       * are not carried (like torch's NCCL process group). */
      r = t->nccl_send(w->send, w->count, dt, w->root, be->nc, st);
      break;
    case COLL_WORK_RECV:
      r = t->nccl_recv(w->recv, w->count, dt, w->root, be->nc, st);
      break;
    default:
      return coll__err(COLL_ERR_INTERNAL, "%s: unknown work kind %d", what,
                       (int)w->kind);
  }
  return nccl_res(be, r, what);
}
