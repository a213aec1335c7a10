/* SPDX-License-Identifier: Apache-2.0 */
/* fedavg.c: federated averaging on host memory: the algorithm
 * (algo/fedavg.c) on the comm's context and its state across rounds. */
#include "cpu/cpu.h"

coll_status_t coll__cpu_fedavg(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_algo_ctx_t ctx;
  coll__cpu_ctx(cpu, &ctx);
  return coll__fedavg(&ctx, &cpu->fed, w->recv, w->count, w->deadline_ms,
                      w->participants);
}
