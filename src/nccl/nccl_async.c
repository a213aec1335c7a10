/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_async.c: polling a nonblocking NCCL comm's state. NCCL answers
 * ncclInProgress while it waits for peers (init, connections made at first
 * use, a launch); nothing here blocks in NCCL, so the abort handle and the
 * timeout stay in charge the whole time. */
#include "nccl/nccl_async.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"

/* Most waits here are for NCCL's launch thread, which takes tens of
 * microseconds: yield (the thread may need this core) for the first couple
 * of thousand looks, about a millisecond, before sleeping; sleeps then
 * grow to 200 us, so an abort is still seen well within a millisecond. */
void coll__nccl_backoff(unsigned *n) {
  struct timespec ts = {0, 0};
  unsigned k = (*n)++;
  if (k < 2048) {
    sched_yield();
    return;
  }
  k -= 2048;
  ts.tv_nsec = k < 20 ? (long)(k + 1) * 10000L : 200000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

coll_status_t coll__nccl_watch_step(const coll_nccl_watch_t *w, int *busy,
                                    const char *what) {
  ncclResult_t state = ncclSuccess, r = ncclSuccess;
  int torn = 0;
  *busy = 0;
  if (w->aborted != NULL && atomic_load(w->aborted))
    return coll__err(COLL_ERR_ABORTED, "%s: aborted", what);
  if (w->mu != NULL) uv_mutex_lock(w->mu);
  if (w->torn != NULL && atomic_load(w->torn))
    torn = 1;
  else
    r = w->t->nccl_comm_get_async_error(w->nc, &state);
  if (w->mu != NULL) uv_mutex_unlock(w->mu);
  if (torn) return coll__err(COLL_ERR_ABORTED, "%s: aborted", what);
  if (r == ncclSuccess) r = state;
  if (r == ncclSuccess) return COLL_OK;
  if (r != ncclInProgress) return coll__nccl_result(w->t, r, w->nc, what);
  if (w->deadline_ms >= 0 && coll__now_ms() >= w->deadline_ms)
    return coll__err(COLL_ERR_TIMEOUT, "%s: still in progress at the deadline",
                     what);
  *busy = 1;
  return COLL_OK;
}

coll_status_t coll__nccl_wait_new_comm(const coll_nccl_table_t *t,
                                       ncclComm_t nc, const atomic_int *aborted,
                                       int64_t deadline_ms, const char *what) {
  coll_nccl_watch_t w;
  memset(&w, 0, sizeof w);
  w.t = t;
  w.nc = nc;
  w.aborted = aborted;
  w.deadline_ms = deadline_ms;
  return coll__nccl_watch_wait(&w, what);
}

coll_status_t coll__nccl_watch_wait(const coll_nccl_watch_t *w,
                                    const char *what) {
  unsigned spins = 0;
  int busy = 1;
  coll_status_t s;
  for (;;) {
    s = coll__nccl_watch_step(w, &busy, what);
    if (s != COLL_OK || !busy) return s;
    coll__nccl_backoff(&spins);
  }
}
