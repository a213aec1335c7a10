/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_util.c: what every part of the CPU backend shares: the algorithm
 * context for a collective (with the descriptor check it carries), the
 * numerics around an algorithm (work dtype, finishing), and the comm's
 * sticky failure.
 * Below the per-collective paths and the dispatcher, calling neither. */
#include <string.h>

#include "core/clock.h"
#include "cpu/cpu.h"
#include "reduce/reduce.h"
#include "transport/transport.h"

void coll__cpu_ctx(coll_cpu_t *cpu, coll_algo_ctx_t *ctx) {
  ctx->t = cpu->t;
  const coll_topo_t *tp = &cpu->topo;
  ctx->rank = tp->identity ? cpu->comm->rank : tp->pos[cpu->comm->rank];
  ctx->world = cpu->comm->world;
  ctx->ranks = tp->identity ? NULL : tp->order;
  ctx->pos = tp->identity ? NULL : tp->pos;
  ctx->topo = tp;
  ctx->sub_phase = 0;
  ctx->deadline_ms = coll__deadline(cpu->comm->timeout_ms);
  ctx->seq = cpu->seq++;
  ctx->scratch = &cpu->scratch;
  ctx->seg_bytes = cpu->tune.seg_bytes;
  ctx->seg_max_bytes = cpu->tune.seg_max_bytes;
  ctx->check = NULL;
}

void coll__cpu_ctx_checked(coll_cpu_t *cpu, coll_algo_ctx_t *ctx,
                           const coll_desc_t *d) {
  coll__cpu_ctx(cpu, ctx);
  if (cpu->tune.check_mismatch && cpu->comm->world > 1) ctx->check = d;
}

coll_status_t coll__cpu_check_alone(coll_cpu_t *cpu, const coll_desc_t *d) {
  coll_algo_ctx_t ctx;
  if (!cpu->tune.check_mismatch || cpu->comm->world == 1) return COLL_OK;
  coll__cpu_ctx_checked(cpu, &ctx, d);
  return coll__check_alone(&ctx);
}

coll_dtype_t coll__cpu_work_dtype(coll_dtype_t dt, coll_op_t op) {
  if ((dt == COLL_I8 || dt == COLL_U8) && (op == COLL_SUM || op == COLL_AVG))
    return COLL_I32;
  return dt;
}

void coll__cpu_finish(coll_cpu_t *cpu, void *dst, const void *src, size_t count,
                      coll_dtype_t dt, coll_op_t op) {
  int world = cpu->comm->world;
  if (coll__cpu_work_dtype(dt, op) != dt) {
    coll__narrow_8bit(dt, op, dst, src, count, world);
    return;
  }
  if (op == COLL_AVG && coll__scale_copy(dt, dst, src, count, 1.0 / world) == 0)
    return; /* floats: one pass scales while it copies */
  if (dst != src) memcpy(dst, src, count * coll_dtype_size(dt));
  if (op == COLL_AVG) (void)coll__int_div(dt, dst, count, world);
}

void coll__cpu_set_broken(coll_cpu_t *cpu, coll_status_t s) {
  uv_mutex_lock(&cpu->mu);
  if (cpu->broken == COLL_OK) {
    cpu->broken = s;
    memcpy(cpu->broken_msg, coll_last_error(), COLL_ERRMSG_MAX);
  }
  uv_mutex_unlock(&cpu->mu);
  /* Peers learn at once, and where the failure started. */
  coll__t_fail(cpu->t, s);
}

void coll__cpu_note_report(coll_cpu_t *cpu, coll_status_t s) {
  char rep[COLL_DESYNC_REPORT_MAX], msg[COLL_ERRMSG_MAX];
  coll_origin_t o;
  int has_origin = coll__t_origin(cpu->t, &o);
  if (s == COLL_OK) return;
  if (has_origin && o.cause != COLL_CAUSE_TIMEOUT) return;
  if (!coll__t_report(cpu->t, rep, sizeof rep)) return;
  if (strstr(coll_last_error(), rep) != NULL) return;
  if (!has_origin || o.rank == coll_transport_rank(cpu->t)) {
    coll__err(s, "%s", rep); /* it names the call that timed out */
    return;
  }
  coll__err_save(msg);
  coll__err(s, "%.*s: %s", (int)(sizeof msg - sizeof rep - 4), msg, rep);
}

coll_status_t coll__cpu_check_usable(coll_cpu_t *cpu, const char *what) {
  coll_status_t s;
  char msg[COLL_ERRMSG_MAX];
  if (atomic_load(&cpu->aborted))
    return coll__err(COLL_ERR_ABORTED, "%s: the comm (%s) was aborted", what,
                     cpu->comm->name);
  uv_mutex_lock(&cpu->mu);
  s = cpu->broken;
  if (s != COLL_OK) memcpy(msg, cpu->broken_msg, sizeof msg);
  uv_mutex_unlock(&cpu->mu);
  if (s == COLL_OK) return COLL_OK;
  return coll__err(s,
                   "%s: the comm is unusable after an earlier failure: %.400s",
                   what, msg);
}
