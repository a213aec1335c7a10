/* SPDX-License-Identifier: Apache-2.0 */
/* rooted.c: broadcast, reduce to a root, and barrier on host memory. */
#include <string.h>

#include "cpu/host.h"
#include "reduce/reduce.h"

static coll_status_t reduce(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  size_t es = coll_dtype_size(w->dtype);
  coll_algo_ctx_t ctx;
  void *work;
  if (w->count == 0) return COLL_OK;
  /* The algorithm clobbers non-root buffers, so it runs on a copy. */
  work = coll__scratch_get(&cpu->work, w->count * coll_dtype_size(wdt));
  if (work == NULL) return COLL_ERR_NO_MEMORY;
  if (wdt != w->dtype)
    coll__widen_8bit(w->dtype, work, w->send, w->count);
  else
    memcpy(work, w->send, w->count * es);
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__reduce(&ctx, work, w->count, wdt, aop, w->root));
  if (cpu->comm->rank == w->root)
    coll__cpu_finish(cpu, w->recv, work, w->count, w->dtype, w->op);
  return COLL_OK;
}

/* Broadcast: through the transport's shared memory where it suits the
 * size, else on messages (cpu_util.c has the measurements). */
typedef struct bcast_algo {
  coll_cpu_row_t row;
  coll_status_t (*run)(const coll_algo_ctx_t *ctx, void *buf, size_t bytes,
                       int root);
} bcast_algo_t;

static const bcast_algo_t k_bcast[] = {
    {{COLL_ALGO_SHM, coll__cpu_shared, coll__cpu_shm_others_fit},
     coll__broadcast_shm},
    {{-1, NULL, NULL}, coll__broadcast},
};

coll_status_t coll__cpu_rooted(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d = {.kind = (uint32_t)w->kind,
                   .dtype = (int32_t)w->dtype,
                   .op = (int32_t)w->op,
                   .root = (int32_t)w->root,
                   .count = (uint64_t)w->count};
  coll_algo_ctx_t ctx;
  size_t bytes;
  if (w->kind == COLL_WORK_BARRIER) {
    d.dtype = d.op = d.root = -1;
    d.count = 0;
  } else if (w->kind == COLL_WORK_BROADCAST) {
    d.op = -1;
  }
  if (w->kind == COLL_WORK_BARRIER) {
    /* Where the ranks check, the check is the barrier: no rank leaves it
     * before every rank entered (recursive doubling over messages, or a
     * round every rank posts to). */
    coll__cpu_ctx_checked(cpu, &ctx, &d);
    if (ctx.check != NULL) return coll__check_alone(&ctx);
    return coll__barrier(&ctx);
  }
  COLL_CHECK(coll__cpu_check_alone(cpu, &d));
  if (w->kind == COLL_WORK_REDUCE) return reduce(cpu, w);
  if (w->count == 0) return COLL_OK;
  bytes = w->count * coll_dtype_size(w->dtype);
  coll__cpu_ctx(cpu, &ctx);
  return k_bcast[COLL_CPU_CHOOSE(cpu, k_bcast, bytes)].run(&ctx, w->recv, bytes,
                                                           w->root);
}
