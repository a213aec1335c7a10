/* SPDX-License-Identifier: Apache-2.0 */
/* work.c: work descriptors: names, and copies for queueing. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/work.h"

const char *coll__work_name(coll_work_kind_t k) {
  switch (k) {
    case COLL_WORK_ALLREDUCE: return "allreduce";
    case COLL_WORK_PREMUL_SUM: return "allreduce_premul_sum";
    case COLL_WORK_BROADCAST: return "broadcast";
    case COLL_WORK_ALLGATHER: return "allgather";
    case COLL_WORK_REDUCE_SCATTER: return "reduce_scatter";
    case COLL_WORK_REDUCE: return "reduce";
    case COLL_WORK_BARRIER: return "barrier";
    case COLL_WORK_SEND: return "send";
    case COLL_WORK_RECV: return "recv";
    case COLL_WORK_NEGOTIATE: return "negotiate_dtype";
    case COLL_WORK_FEDAVG: return "federated_average";
    case COLL_WORK_GATHER: return "gather";
    case COLL_WORK_SCATTER: return "scatter";
    case COLL_WORK_ALLTOALL: return "alltoall";
  }
  return "collective";
}

const char *coll__work_what(const coll_work_t *w) {
  if (w->kind == COLL_WORK_ALLREDUCE && w->batch) return "allreduce_batch";
  if (w->kind == COLL_WORK_ALLTOALL && w->nbufs > 0) return "alltoallv";
  if (w->kind == COLL_WORK_RECV && w->root == COLL_WORK_ANY_SOURCE)
    return "recv_any";
  return coll__work_name(w->kind);
}

coll_status_t coll__work_dup(coll_work_t *dst, const coll_work_t *src) {
  *dst = *src;
  if (src->nbufs == 0 || src->bufs == NULL) {
    dst->bufs = NULL;
    return COLL_OK;
  }
  if (src->nbufs <= COLL_WORK_INLINE_BUFS) {
    memcpy(dst->inline_bufs, src->bufs, src->nbufs * sizeof *src->bufs);
    dst->bufs = dst->inline_bufs;
    return COLL_OK;
  }
  dst->bufs = malloc(src->nbufs * sizeof *src->bufs);
  if (dst->bufs == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory for %zu buffers",
                     coll__work_name(src->kind), src->nbufs);
  memcpy(dst->bufs, src->bufs, src->nbufs * sizeof *src->bufs);
  return COLL_OK;
}

void coll__work_free(coll_work_t *w) {
  if (w->bufs != NULL && w->bufs != w->inline_bufs) free(w->bufs);
  w->bufs = NULL;
}
