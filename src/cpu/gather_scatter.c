/* SPDX-License-Identifier: Apache-2.0 */
/* gather_scatter.c: allgather and reduce-scatter on host memory, and
 * their tables of algorithms (choose.h). */
#include <string.h>

#include "cpu/host.h"
#include "reduce/reduce.h"

/* Allgather: through the transport's shared memory where it suits the
 * size (choose.c has the measurements), else the ring. Neither carries
 * the check. */
typedef struct ag_algo {
  coll_cpu_row_t row;
  coll_status_t (*run)(const coll_algo_ctx_t *ctx, void *buf,
                       size_t block_bytes);
} ag_algo_t;

static const ag_algo_t k_allgather[] = {
    {{COLL_ALGO_SHM, coll__cpu_shared, coll__cpu_shm_others_fit, 0},
     coll__allgather_shm},
    {{COLL_ALGO_RING, NULL, NULL, 0}, coll__allgather_ring},
};

const coll_cpu_table_t coll__cpu_allgather_algos =
    COLL_CPU_TABLE("allgather", k_allgather);

static coll_status_t allgather(coll_cpu_t *cpu, const coll_work_t *w,
                               const coll_desc_t *d) {
  size_t block = w->count * coll_dtype_size(w->dtype), row;
  char *mine = (char *)w->recv + (size_t)cpu->comm->rank * block;
  coll_algo_ctx_t ctx;
  COLL_CHECK(coll__cpu_pick(cpu, &coll__cpu_allgather_algos,
                            block * (size_t)cpu->comm->world, d, &ctx, &row));
  if (block == 0) return COLL_OK;
  if (w->send != mine) memcpy(mine, w->send, block);
  return k_allgather[row].run(&ctx, w->recv, block);
}

/* Through shared memory: the send buffer is only read (widened first for
 * an 8-bit SUM or AVG), this rank's block reduced straight into recv, or
 * into scratch when it must be finished (narrowed, averaged) after. */
static coll_status_t reduce_scatter_shm(coll_cpu_t *cpu, const coll_work_t *w,
                                        const coll_algo_ctx_t *ctx) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  size_t n = (size_t)cpu->comm->world, wes = coll_dtype_size(wdt);
  const void *src = w->send;
  void *out = w->recv;
  if (wdt != w->dtype) {
    int32_t *wide = coll__scratch_get(&cpu->work, w->count * n * wes);
    if (wide == NULL) return COLL_ERR_NO_MEMORY;
    coll__widen_8bit(w->dtype, wide, w->send, w->count * n);
    src = wide;
  }
  if (wdt != w->dtype || w->op == COLL_AVG) {
    out = coll__scratch_get(&cpu->extra, w->count * wes);
    if (out == NULL) return COLL_ERR_NO_MEMORY;
  }
  COLL_CHECK(coll__reduce_scatter_shm(ctx, src, out, w->count, wdt, aop));
  if (out != w->recv)
    coll__cpu_finish(cpu, w->recv, out, w->count, w->dtype, w->op);
  return COLL_OK;
}

static coll_status_t reduce_scatter_ring(coll_cpu_t *cpu, const coll_work_t *w,
                                         const coll_algo_ctx_t *ctx) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  size_t n = (size_t)cpu->comm->world, total = w->count * n;
  size_t wes = coll_dtype_size(wdt);
  char *work;
  /* The ring leaves partial sums in every other block: run on a copy so the
   * caller's send buffer is untouched. */
  work = coll__scratch_get(&cpu->work, total * wes);
  if (work == NULL) return COLL_ERR_NO_MEMORY;
  if (wdt != w->dtype)
    coll__widen_8bit(w->dtype, (int32_t *)work, w->send, total);
  else
    memcpy(work, w->send, total * wes);
  COLL_CHECK(coll__reduce_scatter_ring(ctx, work, w->count, wdt, aop));
  coll__cpu_finish(cpu, w->recv,
                   work + (size_t)cpu->comm->rank * w->count * wes, w->count,
                   w->dtype, w->op);
  return COLL_OK;
}

/* Reduce-scatter: the same choice, against its own bound. */
typedef struct rs_algo {
  coll_cpu_row_t row;
  coll_status_t (*run)(coll_cpu_t *cpu, const coll_work_t *w,
                       const coll_algo_ctx_t *ctx);
} rs_algo_t;

static const rs_algo_t k_reduce_scatter[] = {
    {{COLL_ALGO_SHM, coll__cpu_shared, coll__cpu_shm_reduce_scatter_fits, 0},
     reduce_scatter_shm},
    {{COLL_ALGO_RING, NULL, NULL, 0}, reduce_scatter_ring},
};

const coll_cpu_table_t coll__cpu_reduce_scatter_algos =
    COLL_CPU_TABLE("reduce_scatter", k_reduce_scatter);

static coll_status_t reduce_scatter(coll_cpu_t *cpu, const coll_work_t *w,
                                    const coll_desc_t *d) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  size_t total = w->count * (size_t)cpu->comm->world, row;
  coll_algo_ctx_t ctx;
  COLL_CHECK(coll__cpu_pick(cpu, &coll__cpu_reduce_scatter_algos,
                            total * coll_dtype_size(wdt), d, &ctx, &row));
  if (w->count == 0) return COLL_OK;
  return k_reduce_scatter[row].run(cpu, w, &ctx);
}

coll_status_t coll__cpu_gather_scatter(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d = {.kind = (uint32_t)w->kind,
                   .dtype = (int32_t)w->dtype,
                   .op = (int32_t)w->op,
                   .root = -1,
                   .count = (uint64_t)w->count};
  if (w->kind == COLL_WORK_ALLGATHER) {
    d.op = -1;
    return allgather(cpu, w, &d);
  }
  return reduce_scatter(cpu, w, &d);
}
