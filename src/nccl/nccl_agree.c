/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_agree.c: descriptor agreement on NCCL comms, when COLL_CHECK_MISMATCH
 * is set to 1 explicitly (off by default there: it costs a small NCCL
 * allgather and a host round trip per collective). Every rank allgathers
 * (kind, count, dtype, op, root, buffers) before the collective; all ranks
 * then hold the same table, so all of them reach the same verdict, and a
 * disagreement is COLL_ERR_LENGTH_MISMATCH on every rank naming the field
 * and the ranks, instead of an NCCL hang or silent corruption. The NCCL comm
 * stays usable: the allgather itself always matches. Like every wait here,
 * the ones for the allgather run outside the issue guard, through a
 * request, so NCCL's errors, the comm's timeout (from when the allgather
 * can start on the stream) and its abort end it as they end a collective
 * (N11 of the second review). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_async.h"
#include "nccl/nccl_comm.h"

enum { F_KIND, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_NBUFS, F_BUFS, F_N };
static const char *const field_names[F_N] = {
    "the collective",         "count", "dtype", "op", "root", "buffer count",
    "buffer counts or dtypes"};

int coll__nccl_agree_wanted(void) {
  /* Off unless asked for: unset is -1 (core/env.h). */
  return coll__knob(COLL_ENV_CHECK_MISMATCH) == 1;
}

coll_status_t coll__nccl_agree_init(coll_nccl_be_t *be) {
  size_t bytes = (size_t)be->comm->world * AGREE_WORDS * sizeof(int64_t);
  cudaError_t e;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  COLL_CHECK(coll__cuda_device_enter(be->t, be->dev, &saved, "agreement"));
  e = be->t->cuda_malloc(&be->agree_dev, bytes);
  if (e == cudaSuccess)
    e = be->t->cuda_host_alloc((void **)&be->agree_host, bytes,
                               cudaHostAllocPortable);
  coll__cuda_device_leave(be->t, saved);
  return coll__cuda_result(be->t, e, "agreement: buffers");
}

void coll__nccl_agree_free(coll_nccl_be_t *be) {
  if (be->agree_host != NULL) be->t->cuda_free_host(be->agree_host);
  if (be->agree_dev != NULL) be->t->cuda_free(be->agree_dev);
  be->agree_host = NULL;
  be->agree_dev = NULL;
}

/* This rank's row: what every rank must pass alike. */
static void describe(const coll_work_t *w, int64_t *row) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the batch's shape */
  size_t i;
  memset(row, 0, AGREE_WORDS * sizeof *row);
  row[F_KIND] = w->kind == COLL_WORK_PREMUL_SUM ? COLL_WORK_ALLREDUCE : w->kind;
  row[F_COUNT] = (int64_t)w->count;
  row[F_DTYPE] = w->dtype;
  row[F_OP] = w->kind == COLL_WORK_ALLREDUCE || w->kind == COLL_WORK_REDUCE ||
                      w->kind == COLL_WORK_REDUCE_SCATTER
                  ? w->op
                  : 0;
  row[F_ROOT] = w->kind == COLL_WORK_BROADCAST || w->kind == COLL_WORK_REDUCE ||
                        w->kind == COLL_WORK_GATHER ||
                        w->kind == COLL_WORK_SCATTER
                    ? w->root
                    : 0;
  row[F_NBUFS] = (int64_t)w->nbufs;
  /* An alltoallv's blocks differ by rank: only its dtype is shared. */
  if (w->kind == COLL_WORK_ALLTOALL && w->nbufs > 0) {
    row[F_NBUFS] = 1;
    return;
  }
  for (i = 0; i < w->nbufs; i++) {
    h = (h ^ (uint64_t)w->bufs[i].count) * 1099511628211ull;
    h = (h ^ (uint64_t)w->bufs[i].dtype) * 1099511628211ull;
  }
  row[F_BUFS] = (int64_t)h;
  if (w->nbufs > 0) row[F_COUNT] = row[F_DTYPE] = 0; /* the batch says it */
}

static coll_status_t verdict(coll_nccl_be_t *be, const char *what) {
  const int64_t *t = be->agree_host;
  int world = be->comm->world, r, f;
  for (f = 0; f < F_N; f++)
    for (r = 1; r < world; r++) {
      int64_t a = t[f], b = t[(size_t)r * AGREE_WORDS + f];
      if (a == b) continue;
      if (f == F_KIND)
        return coll__err(COLL_ERR_LENGTH_MISMATCH,
                         "%s: ranks are in different collectives: rank 0 in "
                         "%s, rank %d in %s",
                         what, coll__work_name((coll_work_kind_t)a), r,
                         coll__work_name((coll_work_kind_t)b));
      return coll__err(COLL_ERR_LENGTH_MISMATCH,
                       "%s: ranks disagree on %s: rank 0 has %lld, rank %d "
                       "has %lld",
                       what, field_names[f], (long long)a, r, (long long)b);
    }
  return COLL_OK;
}

/* Under the guard: a request on the stream, the row in, the allgather in
 * one NCCL group. */
static coll_status_t post_gather(coll_nccl_be_t *be, const coll_work_t *w,
                                 coll_nccl_req_t **out) {
  size_t row = AGREE_WORDS * sizeof(int64_t);
  int64_t *mine = be->agree_host + (size_t)be->comm->rank * AGREE_WORDS;
  char *dmine = (char *)be->agree_dev + (size_t)be->comm->rank * row;
  cudaStream_t st = (cudaStream_t)w->stream;
  coll_nccl_req_t *req = NULL;
  cudaError_t e;
  ncclResult_t r, r_end;
  describe(w, mine);
  COLL_CHECK(coll__nccl_req_new(be, w, st, &req));
  e = be->t->cuda_memcpy_async(dmine, mine, row, cudaMemcpyHostToDevice, st);
  if (e != cudaSuccess) {
    coll__nccl_req_discard(req);
    return coll__cuda_result(be->t, e, "agreement");
  }
  r = be->t->nccl_group_start();
  if (r == ncclSuccess) {
    r = be->t->nccl_all_gather(dmine, be->agree_dev, AGREE_WORDS, ncclInt64,
                               be->nc, st);
    r_end = be->t->nccl_group_end();
    if (r == ncclSuccess) r = r_end;
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    be->lost_track = 1;
    coll__nccl_req_discard(req);
    return coll__nccl_enqueue_error(be, r, "agreement");
  }
  *out = req;
  return coll__nccl_req_launched(req, r);
}

/* Under the guard: the table out, and the request's event after it. */
static coll_status_t post_readback(coll_nccl_be_t *be, coll_nccl_req_t *req) {
  size_t bytes = (size_t)be->comm->world * AGREE_WORDS * sizeof(int64_t);
  cudaError_t e = be->t->cuda_memcpy_async(be->agree_host, be->agree_dev, bytes,
                                           cudaMemcpyDeviceToHost, req->st);
  if (e == cudaSuccess) e = be->t->cuda_event_record(req->ev, req->st);
  if (e != cudaSuccess) be->lost_track = 1;
  return coll__cuda_result(be->t, e, "agreement");
}

/* Runs the gather (req NULL) or the readback under the issue guard, on the
 * comm's device. */
static coll_status_t guarded(coll_nccl_be_t *be, const coll_work_t *w,
                             coll_nccl_req_t **req, const char *what) {
  coll_abort_handle_t *h = be->comm->abort;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  coll_status_t s;
  uv_mutex_lock(&h->guard);
  s = coll__nccl_usable(be, what);
  if (s == COLL_OK) s = coll__cuda_device_enter(be->t, be->dev, &saved, what);
  if (s == COLL_OK)
    s = *req == NULL ? post_gather(be, w, req) : post_readback(be, *req);
  coll__cuda_device_leave(be->t, saved);
  uv_mutex_unlock(&h->guard);
  return s;
}

coll_status_t coll__nccl_agree(coll_nccl_be_t *be, const coll_work_t *w) {
  const char *what = coll__work_name(w->kind);
  coll_nccl_req_t *req = NULL;
  coll_status_t s;
  if (be->agree_dev == NULL || be->comm->world == 1) return COLL_OK;
  s = guarded(be, w, &req, what);
  /* NCCL puts the allgather on the stream from its own thread: the
   * readback goes after it. */
  if (s == COLL_OK) s = coll__nccl_settle(be, what);
  if (s == COLL_OK) s = guarded(be, w, &req, what);
  if (req != NULL) {
    coll_status_t s2 = coll__nccl_req_wait(req);
    if (s == COLL_OK) s = s2;
  }
  if (s != COLL_OK) return s;
  return verdict(be, what);
}
