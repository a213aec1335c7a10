/* SPDX-License-Identifier: Apache-2.0 */
/* stage_sync.h: ordering a slab's stream against the caller's stream, and
 * the waits for staging copies: bounded by the comm's timeout, ended by its
 * abort. */
#ifndef COLL_CUDA_STAGE_SYNC_H
#define COLL_CUDA_STAGE_SYNC_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuda/staging_pool.h"

/* Makes the slab's stream wait for the work issued so far on `caller` (a
 * cudaStream_t; NULL is the legacy default stream of the current device,
 * which must be the slab's). Copies queued on the slab's stream after this
 * see what the caller's kernels wrote. */
coll_status_t coll__stage_after_caller(coll_slab_t *s, void *caller);

/* Makes `caller` wait for ev, recorded on the slab's stream: work the
 * caller issues later sees what the slab's copies wrote to its buffers, and
 * cannot overwrite a buffer before a copy read it. */
coll_status_t coll__stage_caller_after(coll_slab_t *s, cudaEvent_t ev,
                                       void *caller);

/* Never blocks: *done = 1 once ev completed. Other CUDA errors are
 * returned (with their text). */
coll_status_t coll__stage_event_done(const coll_nccl_table_t *t, cudaEvent_t ev,
                                     int *done);

/* Waits for ev, polling: COLL_ERR_ABORTED as soon as *aborted (may be NULL)
 * is set, COLL_ERR_TIMEOUT after timeout_ms (< 0: never). The copies are
 * short, but the caller's stream work before them may not be. */
coll_status_t coll__stage_event_wait(const coll_nccl_table_t *t, cudaEvent_t ev,
                                     atomic_int *aborted, int64_t timeout_ms);

#endif
