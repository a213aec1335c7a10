/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_async.h: waiting for a nonblocking NCCL comm to leave ncclInProgress
 * (its init, a first-use connect, a group launch), outside every lock, with
 * a deadline and an abort flag. */
#ifndef COLL_NCCL_NCCL_ASYNC_H
#define COLL_NCCL_NCCL_ASYNC_H

#include <stdatomic.h>
#include <uv.h>

#include "cuda/gpu_table.h"

/* What to watch while waiting. mu (may be NULL) orders the polling against
 * an abort's NCCL call on another thread; torn (may be NULL) ends the wait
 * once an abort took the comm: nc is then not passed to NCCL here. */
typedef struct coll_nccl_watch {
  const coll_nccl_table_t *t;
  ncclComm_t nc;
  uv_mutex_t *mu;
  atomic_int *torn;
  const atomic_int *aborted; /* the abort handle's flag; may be NULL */
  int64_t deadline_ms;       /* absolute; < 0 none */
} coll_nccl_watch_t;

/* One look: COLL_OK with *busy = 1 while NCCL is still in progress (and
 * neither the deadline passed nor the flag is set), COLL_OK with *busy = 0
 * once it is done, else the failure with its text (ABORTED, TIMEOUT with
 * "what: ... within N ms", or NCCL's error). */
coll_status_t coll__nccl_watch_step(const coll_nccl_watch_t *w, int *busy,
                                    const char *what);
/* Steps until done or failed, backing off from spinning to short sleeps so
 * an abort is seen within a millisecond. */
coll_status_t coll__nccl_watch_wait(const coll_nccl_watch_t *w,
                                    const char *what);
/* coll__nccl_watch_wait for a comm NCCL is still making (an init, a
 * shrink): no other thread can see it yet, so nothing fences it. */
coll_status_t coll__nccl_wait_new_comm(const coll_nccl_table_t *t,
                                       ncclComm_t nc, const atomic_int *aborted,
                                       int64_t deadline_ms, const char *what);
/* The wait loop's pause: spin briefly, then sleep up to 200 us. */
void coll__nccl_backoff(unsigned *n);

#endif
