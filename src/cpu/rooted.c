/* SPDX-License-Identifier: Apache-2.0 */
/* rooted.c: broadcast, reduce to a root, and barrier on host memory; the
 * tables of broadcast's and reduce's algorithms (choose.h). */
#include <string.h>

#include "cpu/host.h"
#include "reduce/reduce.h"

/* Below this many bytes a tree's log2 n latencies beat the chain's and
 * the ring's n (broadcast and reduce alike). */
#define TREE_BELOW (64u * 1024u)

static int tree_fits(const coll_cpu_t *cpu, size_t bytes) {
  (void)cpu;
  return bytes < TREE_BELOW;
}

/* Reduce: up a tree for small buffers, else a ring reduce-scatter and a
 * gather to the root. Neither carries the check. */
typedef struct reduce_algo {
  coll_cpu_row_t row;
  coll_status_t (*run)(const coll_algo_ctx_t *ctx, void *buf, size_t count,
                       coll_dtype_t dt, coll_op_t op, int root);
} reduce_algo_t;

static const reduce_algo_t k_reduce[] = {
    {{COLL_ALGO_TREE, NULL, tree_fits, 0}, coll__reduce_tree},
    {{COLL_ALGO_RING, NULL, NULL, 0}, coll__reduce_ring},
};

const coll_cpu_table_t coll__cpu_reduce_algos =
    COLL_CPU_TABLE("reduce", k_reduce);

static coll_status_t reduce(coll_cpu_t *cpu, const coll_work_t *w,
                            const coll_desc_t *d) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  size_t es = coll_dtype_size(w->dtype), row;
  coll_algo_ctx_t ctx;
  void *work;
  COLL_CHECK(coll__cpu_pick(cpu, &coll__cpu_reduce_algos,
                            w->count * coll_dtype_size(wdt), d, &ctx, &row));
  if (w->count == 0) return COLL_OK;
  /* The algorithm clobbers non-root buffers, so it runs on a copy. */
  work = coll__scratch_get(&cpu->work, w->count * coll_dtype_size(wdt));
  if (work == NULL) return COLL_ERR_NO_MEMORY;
  if (wdt != w->dtype)
    coll__widen_8bit(w->dtype, work, w->send, w->count);
  else
    memcpy(work, w->send, w->count * es);
  COLL_CHECK(k_reduce[row].run(&ctx, work, w->count, wdt, aop, w->root));
  if (cpu->comm->rank == w->root)
    coll__cpu_finish(cpu, w->recv, work, w->count, w->dtype, w->op);
  return COLL_OK;
}

/* Broadcast: through the transport's shared memory where it suits the
 * size (choose.c has the measurements), else down a tree for small
 * buffers and a chain for large ones. None carries the check. */
typedef struct bcast_algo {
  coll_cpu_row_t row;
  coll_status_t (*run)(const coll_algo_ctx_t *ctx, void *buf, size_t bytes,
                       int root);
} bcast_algo_t;

static const bcast_algo_t k_bcast[] = {
    {{COLL_ALGO_SHM, coll__cpu_shared, coll__cpu_shm_others_fit, 0},
     coll__broadcast_shm},
    {{COLL_ALGO_TREE, NULL, tree_fits, 0}, coll__broadcast_tree},
    {{COLL_ALGO_CHAIN, NULL, NULL, 0}, coll__broadcast_chain},
};

const coll_cpu_table_t coll__cpu_broadcast_algos =
    COLL_CPU_TABLE("broadcast", k_bcast);

static coll_status_t broadcast(coll_cpu_t *cpu, const coll_work_t *w,
                               const coll_desc_t *d) {
  size_t bytes = w->count * coll_dtype_size(w->dtype), row;
  coll_algo_ctx_t ctx;
  COLL_CHECK(
      coll__cpu_pick(cpu, &coll__cpu_broadcast_algos, bytes, d, &ctx, &row));
  if (bytes == 0) return COLL_OK;
  return k_bcast[row].run(&ctx, w->recv, bytes, w->root);
}

coll_status_t coll__cpu_rooted(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d = {.kind = (uint32_t)w->kind,
                   .dtype = (int32_t)w->dtype,
                   .op = (int32_t)w->op,
                   .root = (int32_t)w->root,
                   .count = (uint64_t)w->count};
  coll_algo_ctx_t ctx;
  if (w->kind == COLL_WORK_REDUCE) return reduce(cpu, w, &d);
  if (w->kind == COLL_WORK_BROADCAST) {
    d.op = -1;
    return broadcast(cpu, w, &d);
  }
  d.dtype = d.op = d.root = -1;
  d.count = 0;
  /* Where the ranks check, the check is the barrier: no rank leaves it
   * before every rank entered (recursive doubling over messages, or a
   * round every rank posts to). */
  coll__cpu_ctx_checked(cpu, &ctx, &d);
  if (ctx.check != NULL) return coll__check_alone(&ctx);
  return coll__barrier(&ctx);
}
