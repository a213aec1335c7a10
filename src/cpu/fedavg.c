/* SPDX-License-Identifier: Apache-2.0 */
/* fedavg.c: federated averaging on host memory: the algorithm
 * (algo/fedavg.c) on the comm's context and its state across rounds, with
 * the caller's deadline counted from when the work runs. */
#include "core/clock.h"
#include "cpu/host.h"

coll_status_t coll__cpu_fedavg(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_algo_ctx_t ctx;
  coll__cpu_ctx(cpu, &ctx);
  /* A star around rank 0: no order to keep, and its texts name ranks. */
  ctx.rank = cpu->comm->rank;
  ctx.ranks = ctx.pos = NULL;
  return coll__fedavg(&ctx, &cpu->fed, w->recv, w->count,
                      coll__now_ms() + w->deadline_ms, w->participants);
}
