/* SPDX-License-Identifier: Apache-2.0 */
/* exec.h: running the CPU backend's work: the dispatcher (run.c), the
 * executor that keeps issue order (executor.c), and point-to-point
 * requests (p2p.c). Above the host paths (host.h), below the comm
 * (cpu_comm.c). */
#ifndef COLL_CPU_EXEC_H
#define COLL_CPU_EXEC_H

#include "cpu/cpu.h"

/* Runs one work item on the calling thread (host or staged device memory):
 * the executor's body. Records the error text on failure. */
coll_status_t coll__cpu_run(coll_cpu_t *cpu, const coll_work_t *w);

/* Executor (executor.c). */
coll_status_t coll__cpu_submit(coll_comm_t *c, const coll_work_t *w,
                               int blocking, coll_request_t **req);
/* Stops the worker and fails queued work; called by destroy. */
void coll__cpu_executor_stop(coll_cpu_t *cpu);
/* Point-to-point requests go straight to the transport (p2p.c), so that an
 * exchange of isend+irecv between two ranks cannot deadlock behind queued
 * work; device memory is staged without waiting (cuda/staged_p2p.h). */
coll_status_t coll__cpu_p2p_submit(coll_cpu_t *cpu, const coll_work_t *w,
                                   int blocking, coll_request_t **req);
void coll__cpu_p2p_reap_all(coll_cpu_t *cpu);

#endif
