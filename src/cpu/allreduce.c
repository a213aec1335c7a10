/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce.c: allreduce on host memory: single, batched and premul-sum. */
#include <string.h>

#include "algo/agree.h"
#include "cpu/host.h"
#include "reduce/reduce.h"

/* Buffers below this are packed by dtype into one allreduce, so a batch of
 * many small gradients costs one collective's latency, not one each. */
#define PACK_LIMIT (256u * 1024u)

/* 1 if an allreduce of `bytes` (in the work dtype) runs the ring. */
static int use_ring(const coll_cpu_t *cpu, size_t bytes) {
  return cpu->tune.algo == COLL_ALGO_RING ||
         (cpu->tune.algo == COLL_ALGO_AUTO &&
          bytes >= cpu->tune.ring_threshold);
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
static int shm_wins(const coll_cpu_t *cpu, size_t bytes) {
  size_t below = cpu->tune.shm_allreduce_below;
  return cpu->comm->world > 1 && (below == 0 || bytes < below);
}

/* 1 if an allreduce of `bytes` runs through the transport's shared memory. */
static int use_shm(const coll_cpu_t *cpu, size_t bytes) {
  return cpu->tune.shared &&
         (cpu->tune.algo == COLL_ALGO_SHM ||
          (cpu->tune.algo == COLL_ALGO_AUTO && shm_wins(cpu, bytes)));
}

/* 1 if it runs the halving-doubling allreduce: forced, or where the link
 * probe found it pays (a comm over hosts of one rank each, or of unequal
 * numbers, with a power-of-two world) and below its bound (tuning.c). */
static int use_rh(const coll_cpu_t *cpu, size_t bytes) {
  return cpu->tune.algo == COLL_ALGO_RH ||
         (cpu->tune.algo == COLL_ALGO_AUTO && bytes >= cpu->tune.rh_threshold &&
          bytes < cpu->tune.rh_max && !coll__topo_two_level(&cpu->topo));
}

/* 1 if it runs the two-level allreduce: over hosts with several ranks
 * each, it sends 1/local of what the flat ring sends between hosts (it falls
 * back to the ring where the hosts hold different numbers of ranks). */
static int use_two_level(const coll_cpu_t *cpu, size_t bytes) {
  return cpu->tune.algo == COLL_ALGO_TWO_LEVEL ||
         (cpu->tune.algo == COLL_ALGO_AUTO &&
          bytes >= cpu->tune.two_level_threshold &&
          coll__topo_two_level(&cpu->topo));
}

static coll_status_t run_algo(coll_cpu_t *cpu, void *buf, size_t count,
                              coll_dtype_t dt, coll_op_t op) {
  coll_algo_ctx_t ctx;
  size_t bytes = count * coll_dtype_size(dt);
  coll__cpu_ctx(cpu, &ctx);
  if (use_shm(cpu, bytes)) return coll__allreduce_shm(&ctx, buf, count, dt, op);
  if (use_two_level(cpu, bytes))
    return coll__allreduce_two_level(&ctx, buf, count, dt, op);
  if (use_rh(cpu, bytes)) return coll__allreduce_rh(&ctx, buf, count, dt, op);
  if (use_ring(cpu, bytes))
    return coll__allreduce_ring(&ctx, buf, count, dt, op);
  return coll__allreduce_rd(&ctx, buf, count, dt, op);
}

/* 1 if an allreduce of `bytes` runs halving-doubling with the agreement in
 * its halving messages: where it runs halving-doubling, in a
 * power-of-two world, with halves that fit an agreement message. */
static int use_rh_checked(const coll_cpu_t *cpu, size_t count,
                          coll_dtype_t wdt) {
  size_t esz = coll_dtype_size(wdt);
  return use_rh(cpu, count * esz) &&
         coll__rh_checked_fits(cpu->comm->world, count, esz);
}

/* An allreduce with the check on whose algorithm carries the agreement in
 * its own messages: recursive doubling for small ones
 * (allreduce_rd_checked.c), halving-doubling where it runs
 * (allreduce_rh_checked.c), so the check costs no exchange of its own.
 * recv is written only on success. */
static coll_status_t checked(coll_cpu_t *cpu, const coll_work_t *w,
                             const coll_desc_t *d) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  const void *src = w->send != NULL ? w->send : w->recv;
  void *out = w->recv;
  coll_algo_ctx_t ctx;
  if (wdt != w->dtype) {
    out = coll__scratch_get(&cpu->work, w->count * coll_dtype_size(wdt));
    if (out == NULL) return COLL_ERR_NO_MEMORY;
    coll__widen_8bit(w->dtype, out, src, w->count);
    src = out;
  }
  coll__cpu_ctx(cpu, &ctx);
  if (use_rh_checked(cpu, w->count, wdt))
    COLL_CHECK(
        coll__allreduce_rh_checked(&ctx, d, src, out, w->count, wdt, aop));
  else
    COLL_CHECK(
        coll__allreduce_rd_checked(&ctx, d, src, out, w->count, wdt, aop));
  coll__cpu_finish(cpu, w->recv, out, w->count, w->dtype, w->op);
  return COLL_OK;
}

/* 1 if the allreduce w takes a checked path (checked()). Not where the
 * ranks share memory: there every check is a round of notes
 * (cpu_util.c), and the shared-memory allreduce folds it in
 * (use_shm_checked). */
static int use_checked(const coll_cpu_t *cpu, const coll_work_t *w) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  size_t bytes = w->count * coll_dtype_size(wdt);
  if (!cpu->tune.check_mismatch || cpu->comm->world < 2 || w->count == 0 ||
      cpu->tune.shared)
    return 0;
  if (use_rh_checked(cpu, w->count, wdt)) return 1;
  return bytes <= COLL_AGREE_PAYLOAD_MAX && !use_two_level(cpu, bytes) &&
         !use_rh(cpu, bytes) && !use_ring(cpu, bytes);
}

/* 1 if the allreduce w runs the shared-memory allreduce with the check in
 * its first round: whenever it runs the shared-memory allreduce at all,
 * so that a rank passing count 0 (or any other size) meets the others in
 * that round. */
static int use_shm_checked(const coll_cpu_t *cpu, const coll_work_t *w) {
  size_t bytes =
      w->count * coll_dtype_size(coll__cpu_work_dtype(w->dtype, w->op));
  return cpu->tune.check_mismatch && cpu->comm->world > 1 &&
         use_shm(cpu, bytes);
}

/* The shared-memory allreduce with the check folded in; recv is written
 * only on success. */
static coll_status_t shm_checked(coll_cpu_t *cpu, const coll_work_t *w,
                                 const coll_desc_t *d) {
  coll_dtype_t wdt = coll__cpu_work_dtype(w->dtype, w->op);
  coll_op_t aop = w->op == COLL_AVG ? COLL_SUM : w->op;
  const void *src = w->send != NULL ? w->send : w->recv;
  void *out = w->recv;
  coll_algo_ctx_t ctx;
  if (wdt != w->dtype && w->count > 0) {
    out = coll__scratch_get(&cpu->work, w->count * coll_dtype_size(wdt));
    if (out == NULL) return COLL_ERR_NO_MEMORY;
    coll__widen_8bit(w->dtype, out, src, w->count);
    src = out;
  }
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(
      coll__allreduce_shm_checked(&ctx, d, src, out, w->count, wdt, aop));
  if (w->count > 0)
    coll__cpu_finish(cpu, w->recv, out, w->count, w->dtype, w->op);
  return COLL_OK;
}

/* Allreduce in place of a host buffer with the numerics of DESIGN 3.5:
 * 8-bit SUM/AVG widened, AVG scaled or divided once at the end. */
static coll_status_t allreduce_buf(coll_cpu_t *cpu, void *buf, size_t count,
                                   coll_dtype_t dt, coll_op_t op) {
  coll_dtype_t wdt = coll__cpu_work_dtype(dt, op);
  coll_op_t aop = op == COLL_AVG ? COLL_SUM : op;
  void *work = buf;
  if (count == 0) return COLL_OK;
  if (wdt != dt) {
    work = coll__scratch_get(&cpu->work, count * coll_dtype_size(wdt));
    if (work == NULL) return COLL_ERR_NO_MEMORY;
    coll__widen_8bit(dt, work, buf, count);
  }
  COLL_CHECK(run_algo(cpu, work, count, wdt, aop));
  coll__cpu_finish(cpu, buf, work, count, dt, op);
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
  COLL_CHECK(allreduce_buf(cpu, pack, total, dt, w->op));
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
  COLL_CHECK(coll__cpu_agree(cpu, &d));
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
      COLL_CHECK(allreduce_buf(cpu, w->bufs[i].data, w->bufs[i].count,
                               w->bufs[i].dtype, w->op));
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
  if (use_shm_checked(cpu, w)) return shm_checked(cpu, w, &d);
  if (use_checked(cpu, w)) return checked(cpu, w, &d);
  COLL_CHECK(coll__cpu_agree(cpu, &d));
  if (w->send != w->recv && w->count > 0)
    memcpy(w->recv, w->send, w->count * coll_dtype_size(w->dtype));
  return allreduce_buf(cpu, w->recv, w->count, w->dtype, w->op);
}
