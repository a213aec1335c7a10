/* SPDX-License-Identifier: Apache-2.0 */
/* work.h: the work descriptor, what a collective call asks for once the API
 * layer checked it. Free of libuv, so the algorithms may name work kinds
 * without seeing the comm and its locks. */
#ifndef COLL_CORE_WORK_H
#define COLL_CORE_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* What a collective call asks for, after the API layer checked it. */
typedef enum coll_work_kind {
  COLL_WORK_ALLREDUCE = 1, /* bufs[0..nbufs): in place (send copied first) */
  COLL_WORK_PREMUL_SUM,
  COLL_WORK_BROADCAST,
  COLL_WORK_ALLGATHER,
  COLL_WORK_REDUCE_SCATTER,
  COLL_WORK_REDUCE,
  COLL_WORK_BARRIER,
  COLL_WORK_SEND,
  COLL_WORK_RECV,
  COLL_WORK_NEGOTIATE,
  COLL_WORK_FEDAVG,
  COLL_WORK_GATHER,
  COLL_WORK_SCATTER,
  /* bufs[0..world): the block for each rank; bufs[world..2 world): the
   * block from each (alltoallv, and alltoall with nbufs 0: count each) */
  COLL_WORK_ALLTOALL
} coll_work_kind_t;
/* The last kind, for tables indexed by kind. */
#define COLL_WORK_KIND_LAST COLL_WORK_ALLTOALL

const char *coll__work_name(coll_work_kind_t k); /* "allreduce", ... */

#define COLL_WORK_INLINE_BUFS 4
/* The peer of a receive that takes the first message from any rank. */
#define COLL_WORK_ANY_SOURCE (-1)

typedef struct coll_work {
  coll_work_kind_t kind;
  const void *send; /* allreduce (single), allgather, reduce_scatter,
                       reduce, send */
  void *recv;       /* allreduce, broadcast buf, allgather,
                       reduce_scatter, reduce, recv */
  size_t count;     /* elements (per rank for allgather/reduce_scatter) */
  coll_dtype_t dtype;
  coll_op_t op;
  int root;             /* broadcast, reduce, gather, scatter; peer for
                           send/recv (recv: COLL_WORK_ANY_SOURCE) */
  uint32_t tag;         /* send/recv */
  size_t *received;     /* recv: elements that arrived (may be NULL) */
  int *source;          /* recv from any source: the rank it came from */
  float factor;         /* premul_sum */
  int64_t deadline_ms;  /* fedavg: relative deadline */
  int *participants;    /* fedavg out (may be NULL) */
  coll_dtype_t *agreed; /* negotiate out */
  void *stream;
  /* Batched allreduce / premul_sum: nbufs buffers, in place. bufs points at
   * inline_bufs when nbufs <= COLL_WORK_INLINE_BUFS, else at a heap copy
   * owned by the work (coll__work_dup/coll__work_free). */
  size_t nbufs;
  coll_buffer_t *bufs;
  coll_buffer_t inline_bufs[COLL_WORK_INLINE_BUFS];
  int batch; /* allreduce_batch (also with no buffers): named as such */
  /* Its sequence number in the comm's flight recorder (set by the issue
   * path; 0: not recorded). */
  uint64_t trace_seq;
} coll_work_t;

/* The name a user called: "allreduce_batch" for a batch, else the kind's. */
const char *coll__work_what(const coll_work_t *w);

/* Deep copy for queueing (bufs array); free releases what dup allocated. */
coll_status_t coll__work_dup(coll_work_t *dst, const coll_work_t *src);
void coll__work_free(coll_work_t *w);

#endif
