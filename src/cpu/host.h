/* SPDX-License-Identifier: Apache-2.0 */
/* host.h: the CPU backend's host-memory path of each collective, one per
 * file, each picking an algorithm (src/algo) and doing the numerics around
 * it. Called by the dispatcher (run.c) only; they call nothing above
 * cpu.h. The thread that runs the comm's work. */
#ifndef COLL_CPU_HOST_H
#define COLL_CPU_HOST_H

#include "cpu/choose.h"

coll_status_t coll__cpu_allreduce(coll_cpu_t *cpu, const coll_work_t *w);
coll_status_t coll__cpu_rooted(coll_cpu_t *cpu, const coll_work_t *w);
coll_status_t coll__cpu_gather_scatter(coll_cpu_t *cpu, const coll_work_t *w);
coll_status_t coll__cpu_negotiate(coll_cpu_t *cpu, const coll_work_t *w);
coll_status_t coll__cpu_fedavg(coll_cpu_t *cpu, const coll_work_t *w);
/* Gather, scatter and all-to-all (exchange.c). */
coll_status_t coll__cpu_exchange(coll_cpu_t *cpu, const coll_work_t *w);

#endif
