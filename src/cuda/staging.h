/* SPDX-License-Identifier: Apache-2.0 */
/* staging.h: device buffers on a CPU comm. The CPU backend asks whether a
 * work item touches CUDA device memory; if so it runs the work through
 * pinned host buffers (in segments, copies overlapping the ring) by calling
 * back into the host path. Without the NCCL backend built every pointer is
 * host memory. Point-to-point is staged by staged_p2p.h instead. */
#ifndef COLL_CUDA_STAGING_H
#define COLL_CUDA_STAGING_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/comm.h"

/* Runs one host-memory work item on the CPU backend (provided by src/cpu). */
typedef coll_status_t (*coll_host_run_fn)(void *cpu, const coll_work_t *w);

/* 1 if any buffer of w is device memory (asked of the CUDA runtime's pointer
 * attributes, never guessed), 0 if all are host memory. Any thread. */
int coll__work_on_device(const coll_work_t *w);

/* Runs w, whose buffers may be device memory, through pinned host staging,
 * calling run(cpu, host_work) for each host-side piece. The copies run on
 * libcoll's own stream, after the work issued so far on w->stream (NULL:
 * the legacy default stream), and w->stream waits for the copies back.
 * Every wait for a copy ends with COLL_ERR_ABORTED once *aborted (the
 * comm's abort flag; may be NULL) is set, and with COLL_ERR_TIMEOUT after
 * timeout_ms (the comm's; < 0: none). The thread that runs the comm's
 * work. */
coll_status_t coll__staged_run(void *cpu, const coll_work_t *w,
                               coll_host_run_fn run, atomic_int *aborted,
                               int64_t timeout_ms);

#endif
