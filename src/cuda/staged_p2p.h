/* SPDX-License-Identifier: Apache-2.0 */
/* staged_p2p.h: a point-to-point send or receive of device memory on a CPU
 * comm, moved through a pinned slab by a state machine that never blocks:
 * a send copies device -> slab on libcoll's own stream and is handed to the
 * transport once that copy completed; a receive is posted into the slab at
 * once and copied slab -> device once the message arrived. The CPU
 * backend's point-to-point requests drive it (cpu/p2p.c). */
#ifndef COLL_CUDA_STAGED_P2P_H
#define COLL_CUDA_STAGED_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"
#include "transport/transport.h"

typedef struct coll_staged_p2p coll_staged_p2p_t;

/* Starts w, a COLL_WORK_SEND or COLL_WORK_RECV whose buffer is device
 * memory: a send queues its copy into the slab (after the work issued so
 * far on w->stream), a receive posts its transport receive into the slab.
 * Only posts, never waits: callable under the issue guard. tp must outlive
 * sp (until coll__staged_p2p_end). On failure nothing is left behind. The
 * thread that uses the comm. */
coll_status_t coll__staged_p2p_start(coll_transport_t *tp, const coll_work_t *w,
                                     coll_staged_p2p_t **out);

/* Advances sp. A send whose copy completed is handed to the transport only
 * if may_post (no earlier send to the same peer and tag is still waiting
 * for its turn). wait_ms bounds how long it may block in the transport
 * (0: never blocks); copies are only polled. *done = 1 once the transport
 * finished and every copy completed; the return value is then the outcome
 * (with its text), and *len the bytes sent or arrived (for a receive that
 * was too short, the length sent). After done, it returns the same outcome
 * again. The thread that uses the comm. */
coll_status_t coll__staged_p2p_progress(coll_staged_p2p_t *sp, int may_post,
                                        int64_t wait_ms, int *done,
                                        size_t *len);

/* 1 once the send was handed to the transport (a receive: always). */
int coll__staged_p2p_posted(const coll_staged_p2p_t *sp);
/* 1 while only the transport is pending, so a blocking transport wait is
 * the right way to wait for it. */
int coll__staged_p2p_in_transport(const coll_staged_p2p_t *sp);

/* Frees sp. A transport request still pending must fail at once (the
 * caller aborted the transport, or sp is done); if a copy may still run,
 * the slab is parked instead of reused. Leaves this thread's error text as
 * it was. */
void coll__staged_p2p_end(coll_staged_p2p_t *sp);

#endif
