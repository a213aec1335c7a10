/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_exchange.c: gather, scatter and all-to-all as NCCL's sends and
 * receives, all in the work item's one group so that NCCL runs them
 * together (the pattern NCCL's documentation gives for these). A rank's own
 * block is a copy on the stream, not a send to itself. */
#include "nccl/nccl_exchange.h"

#include "core/error.h"

int coll__nccl_is_exchange(coll_work_kind_t kind) {
  return kind == COLL_WORK_GATHER || kind == COLL_WORK_SCATTER ||
         kind == COLL_WORK_ALLTOALL;
}

coll_status_t coll__nccl_map_exchange(const coll_nccl_be_t *be,
                                      const coll_work_t *w, ncclDataType_t *dt,
                                      const char *what) {
  return coll__nccl_dtype(be, w->dtype, dt, what);
}

/* The copy of this rank's own block, where source and destination differ. */
static ncclResult_t copy_own(const coll_nccl_be_t *be, void *dst,
                             const void *src, size_t bytes, cudaStream_t st) {
  if (bytes == 0 || dst == src) return ncclSuccess;
  return be->t->cuda_memcpy_async(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                  st) == cudaSuccess
             ? ncclSuccess
             : ncclUnhandledCudaError;
}

static ncclResult_t rooted(const coll_nccl_be_t *be, const coll_work_t *w,
                           ncclDataType_t dt, cudaStream_t st) {
  const coll_nccl_table_t *t = be->t;
  size_t block = w->count * coll_dtype_size(w->dtype);
  int gather = w->kind == COLL_WORK_GATHER, me = be->comm->rank, r;
  ncclResult_t res = ncclSuccess;
  if (block == 0) return ncclSuccess;
  if (me != w->root)
    return gather ? t->nccl_send(w->send, w->count, dt, w->root, be->nc, st)
                  : t->nccl_recv(w->recv, w->count, dt, w->root, be->nc, st);
  for (r = 0; r < be->comm->world && res == ncclSuccess; r++) {
    char *at = (char *)(gather ? w->recv : (void *)w->send) + (size_t)r * block;
    if (r == me)
      res = gather ? copy_own(be, at, w->send, block, st)
                   : copy_own(be, w->recv, at, block, st);
    else if (gather)
      res = t->nccl_recv(at, w->count, dt, r, be->nc, st);
    else
      res = t->nccl_send(at, w->count, dt, r, be->nc, st);
  }
  return res;
}

/* Block r of one side: equal blocks (nbufs 0) or the work's per-rank
 * buffers (alltoallv). */
static void *block_of(const coll_work_t *w, int world, int r, int recv,
                      size_t *count) {
  if (w->nbufs == 0) {
    size_t off = (size_t)r * w->count * coll_dtype_size(w->dtype);
    *count = w->count;
    return (char *)(recv ? w->recv : (void *)w->send) + off;
  }
  *count = w->bufs[(recv ? world : 0) + r].count;
  return w->bufs[(recv ? world : 0) + r].data;
}

static ncclResult_t alltoall(const coll_nccl_be_t *be, const coll_work_t *w,
                             ncclDataType_t dt, cudaStream_t st) {
  const coll_nccl_table_t *t = be->t;
  int n = be->comm->world, me = be->comm->rank, i;
  size_t es = coll_dtype_size(w->dtype);
  ncclResult_t res = ncclSuccess;
  for (i = 0; i < n && res == ncclSuccess; i++) {
    int to = (me + i) % n, from = (me - i + n) % n;
    size_t sc, rc;
    void *sb = block_of(w, n, to, 0, &sc), *rb = block_of(w, n, from, 1, &rc);
    if (i == 0) {
      /* Counts that differ are the caller's mismatch: NCCL's behaviour
       * elsewhere, the smaller one here. */
      res = copy_own(be, rb, sb, (sc < rc ? sc : rc) * es, st);
      continue;
    }
    if (sc > 0) res = t->nccl_send(sb, sc, dt, to, be->nc, st);
    if (res == ncclSuccess && rc > 0)
      res = t->nccl_recv(rb, rc, dt, from, be->nc, st);
  }
  return res;
}

ncclResult_t coll__nccl_exchange_calls(const coll_nccl_be_t *be,
                                       const coll_work_t *w, ncclDataType_t dt,
                                       cudaStream_t st) {
  if (w->kind == COLL_WORK_ALLTOALL) return alltoall(be, w, dt, st);
  return rooted(be, w, dt, st);
}
