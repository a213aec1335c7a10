/* SPDX-License-Identifier: Apache-2.0 */
/* stage_sync.c: stream ordering through events, and abortable event waits
 * for the staging of device buffers. */
#include "cuda/stage_sync.h"

#include "core/clock.h"
#include "core/error.h"

coll_status_t coll__stage_after_caller(coll_slab_t *s, void *caller) {
  const coll_nccl_table_t *t = s->t;
  cudaError_t e = t->cuda_event_record(s->ev_caller, (cudaStream_t)caller);
  if (e != cudaSuccess)
    return coll__cuda_result(t, e,
                             "staging: cudaEventRecord on the caller's "
                             "stream");
  e = t->cuda_stream_wait_event(s->st, s->ev_caller, 0);
  return coll__cuda_result(t, e, "staging: cudaStreamWaitEvent");
}

coll_status_t coll__stage_caller_after(coll_slab_t *s, cudaEvent_t ev,
                                       void *caller) {
  const coll_nccl_table_t *t = s->t;
  cudaError_t e = t->cuda_stream_wait_event((cudaStream_t)caller, ev, 0);
  return coll__cuda_result(t, e,
                           "staging: cudaStreamWaitEvent on the caller's "
                           "stream");
}

coll_status_t coll__stage_event_done(const coll_nccl_table_t *t, cudaEvent_t ev,
                                     int *done) {
  cudaError_t e = t->cuda_event_query(ev);
  *done = e == cudaSuccess;
  if (e == cudaSuccess || e == cudaErrorNotReady) return COLL_OK;
  return coll__cuda_result(t, e, "staging: cudaEventQuery");
}

coll_status_t coll__stage_event_wait(const coll_nccl_table_t *t, cudaEvent_t ev,
                                     atomic_int *aborted, int64_t timeout_ms) {
  int64_t deadline = coll__deadline(timeout_ms);
  unsigned spins = 0;
  int done = 0;
  for (;;) {
    COLL_CHECK(coll__stage_event_done(t, ev, &done));
    if (done) return COLL_OK;
    if (aborted != NULL && atomic_load(aborted))
      return coll__err(COLL_ERR_ABORTED,
                       "staging: the comm was aborted while copies to or "
                       "from device memory were queued");
    if (deadline >= 0 && coll__now_ms() >= deadline)
      return coll__err(COLL_ERR_TIMEOUT,
                       "staging: copies to or from device memory did not "
                       "complete within the comm's timeout (%lld ms)",
                       (long long)timeout_ms);
    coll__poll_pause(&spins);
  }
}
