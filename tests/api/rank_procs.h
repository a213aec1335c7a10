/* SPDX-License-Identifier: Apache-2.0 */
/* rank_procs.h: runs one rank body on every rank of a comm, over each of
 * libcoll's transports: threads over the in-process transport, or forked
 * processes over TCP or shared memory (COLL_TRANSPORT) that meet through
 * coll_comm_init_env on 127.0.0.1. Each rank writes its own result slot
 * (shared memory across the fork); the test thread reads them after every
 * rank ended, and a rank still running at the bound fails the run. */
#ifndef COLL_TESTS_RANK_PROCS_H
#define COLL_TESTS_RANK_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* One rank's part: c is its comm (it must not destroy it); out is its
 * slot of `out_size` bytes, zeroed before. */
typedef void (*rp_body_t)(coll_comm_t *c, int rank, int world, void *out);

/* Runs body on `world` ranks (1..8) over `transport` ("inproc", "tcp" or
 * "shm"), with comms of timeout comm_ms, and copies the slots into
 * outs[0..world) (world * out_size bytes). 0, or -1 (the reason printed)
 * when a comm could not be made or a rank was still running after
 * bound_ms (it is killed; its slot is then left as it was). */
int rp_run(int world, const char *transport, int64_t comm_ms, int64_t bound_ms,
           rp_body_t body, void *outs, size_t out_size);

#endif
