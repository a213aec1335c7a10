/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce.c: allreduce on host memory: single, batched and premul-sum,
 * with the numerics around the algorithm, which comes from this file's
 * table of rows (choose.h: the word of COLL_ALGO that names it, where it
 * can run, the sizes auto gives it, whether it carries the check). */
#include <string.h>

#include "cpu/host.h"
#include "reduce/reduce.h"

/* Buffers below this are packed by dtype into one allreduce, so a batch of
 * many small gradients costs one collective's latency, not one each. */
#define PACK_LIMIT (256u * 1024u)

typedef coll_status_t (*ar_run_t)(const coll_algo_ctx_t *ctx, const void *src,
                                  void *dst, size_t count, coll_dtype_t dt,
                                  coll_op_t op);
typedef coll_status_t (*ar_in_place_t)(const coll_algo_ctx_t *ctx, void *buf,
                                       size_t count, coll_dtype_t dt,
                                       coll_op_t op);

/* An algorithm that works in place (and carries no check: coll__cpu_pick
 * ran it): src into dst, then the algorithm. */
static coll_status_t in_place(ar_in_place_t fn, const coll_algo_ctx_t *ctx,
                              const void *src, void *dst, size_t count,
                              coll_dtype_t dt, coll_op_t op) {
  if (count == 0) return COLL_OK;
  if (src != dst) memcpy(dst, src, count * coll_dtype_size(dt));
  return fn(ctx, dst, count, dt, op);
}

static coll_status_t ring(const coll_algo_ctx_t *ctx, const void *src,
                          void *dst, size_t count, coll_dtype_t dt,
                          coll_op_t op) {
  return in_place(coll__allreduce_ring, ctx, src, dst, count, dt, op);
}

static coll_status_t two_level(const coll_algo_ctx_t *ctx, const void *src,
                               void *dst, size_t count, coll_dtype_t dt,
                               coll_op_t op) {
  return in_place(coll__allreduce_two_level, ctx, src, dst, count, dt, op);
}

/* Whether auto takes the shared-memory allreduce (algo/allreduce_shm.c)
 * over the ring and recursive doubling, where the transport has shared
 * memory: at every size. Measured with coll-perf (f32 SUM in place, -n
 * 20-30, COLL_CHECK_MISMATCH=0, ranks as processes over
 * COLL_TRANSPORT=shm, COLL_ALGO=shm against ring, runs interleaved, medians
 * of 3) on the 2-vCPU VM while other builds ran (load 5-16: indicative
 * only). Time per allreduce, shm / ring:
 *
 *   ranks   4K    16K   64K   256K  1M    4M    16M   64M
 *   2       0.29  0.21  0.25  0.42  0.58  0.85  0.51  0.67-1.6
 *   4       1.5   0.43  1.9   0.71  0.86  1.2   0.58  0.50
 *
 * (2 ranks, 64M: 0.67 in one sitting, 1.6 in another.) Where the ring
 * came out ahead at 4 ranks (4K, 64K, 4M) four ranks shared two loaded
 * cores and runs differed by more than the gap; measure again on a quiet
 * machine with a core per rank before adding a threshold here. */
static int shm_fits(const coll_cpu_t *cpu, size_t bytes) {
  size_t below = cpu->tune.shm_allreduce_below;
  return below == 0 || bytes < below;
}

/* The two-level allreduce: over hosts with several ranks each, it sends
 * 1/local of what the flat ring sends between hosts (it falls back to the
 * ring where the hosts hold different numbers of ranks). */
static int two_level_fits(const coll_cpu_t *cpu, size_t bytes) {
  return bytes >= cpu->tune.two_level_threshold &&
         coll__topo_two_level(&cpu->topo);
}

/* Halving-doubling: where the link probe found it pays (a comm over hosts
 * of one rank each, or of unequal numbers, with a power-of-two world), up
 * to its bound (tuning.c). */
static int rh_fits(const coll_cpu_t *cpu, size_t bytes) {
  return bytes >= cpu->tune.rh_threshold && bytes < cpu->tune.rh_max &&
         !coll__topo_two_level(&cpu->topo);
}

static int ring_fits(const coll_cpu_t *cpu, size_t bytes) {
  return bytes >= cpu->tune.ring_threshold;
}

/* Auto's order: shared memory wherever the transport has it, the
 * two-level allreduce across hosts, halving-doubling where the links call
 * for it, the ring from its threshold, recursive doubling below (the last
 * row: it runs everywhere). Recursive doubling, halving-doubling and the
 * shared-memory allreduce carry the descriptor check in their own first
 * messages or round; the others get it alone first (coll__cpu_pick). */
typedef struct ar_algo {
  coll_cpu_row_t row;
  ar_run_t run;
} ar_algo_t;

static const ar_algo_t k_algos[] = {
    {{COLL_ALGO_SHM, coll__cpu_shared, shm_fits, 1}, coll__allreduce_shm},
    {{COLL_ALGO_TWO_LEVEL, NULL, two_level_fits, 0}, two_level},
    {{COLL_ALGO_RH, NULL, rh_fits, 1}, coll__allreduce_rh},
    {{COLL_ALGO_RING, NULL, ring_fits, 0}, ring},
    {{COLL_ALGO_RD, NULL, NULL, 1}, coll__allreduce_rd},
};

const coll_cpu_table_t coll__cpu_allreduce_algos =
    COLL_CPU_TABLE("allreduce", k_algos);

/* Allreduce of count elements of dt from src to dst (may be src) with the
 * numerics of DESIGN 3.5: 8-bit SUM/AVG widened, AVG scaled or divided once
 * at the end. With d, the ranks check they passed d first, and dst is
 * written only once they did. */
static coll_status_t reduce_one(coll_cpu_t *cpu, const coll_desc_t *d,
                                const void *src, void *dst, size_t count,
                                coll_dtype_t dt, coll_op_t op) {
  coll_dtype_t wdt = coll__cpu_work_dtype(dt, op);
  coll_op_t aop = op == COLL_AVG ? COLL_SUM : op;
  size_t bytes = count * coll_dtype_size(wdt), row;
  void *out = dst;
  coll_algo_ctx_t ctx;
  COLL_CHECK(
      coll__cpu_pick(cpu, &coll__cpu_allreduce_algos, bytes, d, &ctx, &row));
  /* A carrier meets the other ranks' check even with nothing to reduce. */
  if (count == 0 && ctx.check == NULL) return COLL_OK;
  if (wdt != dt && count > 0) {
    out = coll__scratch_get(&cpu->work, bytes);
    if (out == NULL) return COLL_ERR_NO_MEMORY;
    coll__widen_8bit(dt, out, src, count);
    src = out;
  }
  COLL_CHECK(k_algos[row].run(&ctx, src, out, count, wdt, aop));
  if (count > 0) coll__cpu_finish(cpu, dst, out, count, dt, op);
  return COLL_OK;
}

/* Small buffers of one dtype go through one packed allreduce. */
static coll_status_t packed(coll_cpu_t *cpu, const coll_work_t *w,
                            coll_dtype_t dt) {
  size_t es = coll_dtype_size(dt), total = 0, off = 0, i;
  char *pack;
  for (i = 0; i < w->nbufs; i++)
    if (w->bufs[i].dtype == dt && w->bufs[i].count * es < PACK_LIMIT)
      total += w->bufs[i].count;
  if (total == 0) return COLL_OK;
  pack = coll__scratch_get(&cpu->extra, total * es);
  if (pack == NULL) return COLL_ERR_NO_MEMORY;
  for (i = 0; i < w->nbufs; i++)
    if (w->bufs[i].dtype == dt && w->bufs[i].count > 0 &&
        w->bufs[i].count * es < PACK_LIMIT) {
      memcpy(pack + off, w->bufs[i].data, w->bufs[i].count * es);
      off += w->bufs[i].count * es;
    }
  COLL_CHECK(reduce_one(cpu, NULL, pack, pack, total, dt, w->op));
  off = 0;
  for (i = 0; i < w->nbufs; i++)
    if (w->bufs[i].dtype == dt && w->bufs[i].count > 0 &&
        w->bufs[i].count * es < PACK_LIMIT) {
      memcpy(w->bufs[i].data, pack + off, w->bufs[i].count * es);
      off += w->bufs[i].count * es;
    }
  return COLL_OK;
}

static coll_status_t batch(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d;
  size_t i;
  int dt;
  coll__desc_batch(&d, (uint32_t)w->kind, w->op, w->bufs, w->nbufs);
  /* One check for the whole batch, before any of its allreduces. */
  COLL_CHECK(coll__cpu_check_alone(cpu, &d));
  if (w->kind == COLL_WORK_PREMUL_SUM)
    for (i = 0; i < w->nbufs; i++)
      if (coll__scale(w->bufs[i].dtype, w->bufs[i].data, w->bufs[i].count,
                      w->factor) != 0)
        return COLL_ERR_INTERNAL; /* dtypes were checked before agreeing */
  for (dt = 0; dt < COLL_DTYPE_COUNT; dt++)
    COLL_CHECK(packed(cpu, w, (coll_dtype_t)dt));
  for (i = 0; i < w->nbufs; i++) {
    size_t es = coll_dtype_size(w->bufs[i].dtype);
    if (w->bufs[i].count * es >= PACK_LIMIT)
      COLL_CHECK(reduce_one(cpu, NULL, w->bufs[i].data, w->bufs[i].data,
                            w->bufs[i].count, w->bufs[i].dtype, w->op));
  }
  return COLL_OK;
}

coll_status_t coll__cpu_allreduce(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d;
  size_t i;
  if (w->kind == COLL_WORK_PREMUL_SUM) {
    for (i = 0; i < w->nbufs; i++)
      if (w->bufs[i].dtype != COLL_F16 && w->bufs[i].dtype != COLL_BF16 &&
          w->bufs[i].dtype != COLL_F32 && w->bufs[i].dtype != COLL_F64)
        return coll__err(COLL_ERR_UNSUPPORTED,
                         "bufs[%zu] has dtype %s; a weighted sum needs a "
                         "floating-point dtype",
                         i, coll_dtype_name(w->bufs[i].dtype));
  }
  if (w->batch || w->bufs != NULL || w->kind == COLL_WORK_PREMUL_SUM)
    return batch(cpu, w);
  d = (coll_desc_t){.kind = (uint32_t)w->kind,
                    .dtype = (int32_t)w->dtype,
                    .op = (int32_t)w->op,
                    .root = -1,
                    .count = (uint64_t)w->count};
  /* recv is written only once the ranks are known to agree. */
  return reduce_one(cpu, &d, w->send != NULL ? w->send : w->recv, w->recv,
                    w->count, w->dtype, w->op);
}
