/* SPDX-License-Identifier: Apache-2.0 */
/* standin_group.c: the stand-in's NCCL groups (the thread's depth, the
 * outermost end that launches, an abort queued inside one), pre-multiplied
 * sum ops, and the test knobs (failures to inject, hooks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/half.h"
#include "standin_impl.h"

_Thread_local struct ncclComm *si_group_aborts[SI_MAXR];
_Thread_local int si_group_naborts;

static ncclResult_t group_start(void) {
  si_group_depth++;
  return ncclSuccess;
}

static ncclResult_t group_end(void) {
  ncclResult_t r = ncclSuccess, r2;
  int i, nonblocking = 0, force_blocking;
  if (si_group_depth <= 0) return ncclInvalidUsage; /* "not in a group" */
  if (--si_group_depth > 0) return ncclSuccess;
  uv_mutex_lock(&si.mu);
  si.st.group_ends++;
  /* Inits inside the group: blocking ones wait here, nonblocking ones make
   * the group end report ncclInProgress. */
  for (i = 0; i < si_group_ninit; i++)
    nonblocking |= si_group_inits[i]->nonblocking;
  for (i = 0; i < si_group_ninit && r == ncclSuccess; i++) {
    struct ncclComm *c = si_group_inits[i];
    if (nonblocking) {
      if (c->async_err == ncclInProgress) r = ncclInProgress;
    } else {
      r = si_wait_init(c);
    }
  }
  si_group_ninit = 0;
  /* An abort queued in this group makes it blocking, and its reclaim runs
   * at this end. */
  force_blocking = si_group_naborts > 0;
  r2 = si_launch_group_end(force_blocking);
  if (r == ncclSuccess || (r == ncclInProgress && r2 != ncclSuccess)) r = r2;
  for (i = 0; i < si_group_naborts; i++)
    if (!si_group_aborts[i]->freed) si_reclaim_abort(si_group_aborts[i]);
  si_group_naborts = 0;
  uv_mutex_unlock(&si.mu);
  return r;
}

int standin_group_depth(void) { return si_group_depth; }

/* Reads a host-immediate scalar of the op's element type (a half or bf16
 * in 2 bytes, a float, a double); its value is exact in a double. Integer
 * and fp8 premul ops, and device-resident scalars, are not modelled. */
static int premul_scalar(const void *scalar, ncclDataType_t dt, double *k) {
  uint16_t h;
  float f;
  switch (dt) {
    case ncclFloat16:
      memcpy(&h, scalar, sizeof h);
      *k = coll__h2f(h);
      return 1;
    case ncclBfloat16:
      memcpy(&h, scalar, sizeof h);
      *k = coll__bf2f(h);
      return 1;
    case ncclFloat32:
      memcpy(&f, scalar, sizeof f);
      *k = f;
      return 1;
    case ncclFloat64: memcpy(k, scalar, sizeof *k); return 1;
    default: return 0;
  }
}

/* NCCL keeps the op's datatype and refuses the op with any other one; a
 * comm still in progress is refused (ncclCommEnsureReady,
 * enqueue.cc:2669). */
static ncclResult_t premul_create(ncclRedOp_t *op, void *scalar,
                                  ncclDataType_t dt, ncclScalarResidence_t res,
                                  ncclComm_t c) {
  ncclResult_t r;
  double k = 0;
  int i;
  if (res != ncclScalarHostImmediate || scalar == NULL ||
      !premul_scalar(scalar, dt, &k))
    return ncclInvalidArgument; /* only what libcoll uses is modelled */
  r = si_enter(c, "ncclRedOpCreatePreMulSum");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  r = si_ensure_ready(c);
  if (r == ncclInvalidArgument)
    si_misuse("ncclRedOpCreatePreMulSum on a comm still in progress");
  for (i = 0; r == ncclSuccess && i < SI_MAXOPS; i++)
    if (!c->premul_live[i]) break;
  if (r == ncclSuccess && i == SI_MAXOPS) r = ncclInternalError;
  if (r == ncclSuccess) {
    c->premul_live[i] = 1;
    c->premul[i] = k;
    c->premul_dt[i] = dt;
    *op = (ncclRedOp_t)((int)ncclNumOps + i);
    si.st.ops_created++;
    si.st.ops_live++;
  }
  si_leave(c);
  return r;
}

/* No ncclCommEnsureReady here (enqueue.cc:2708-2735): an op may be
 * destroyed right after the call that used it, NCCL copied it. */
static ncclResult_t premul_destroy(ncclRedOp_t op, ncclComm_t c) {
  ncclResult_t r;
  int i = (int)op - (int)ncclNumOps;
  r = si_enter(c, "ncclRedOpDestroy");
  if (r == ncclSuccess && (i < 0 || i >= SI_MAXOPS || !c->premul_live[i])) {
    si_misuse("ncclRedOpDestroy of an op that is not live");
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    c->premul_live[i] = 0;
    si.st.ops_live--;
  }
  si_leave(r == ncclInvalidUsage ? NULL : c);
  return r;
}

void standin_fail_next(ncclResult_t r) { standin_fail_after(0, r); }

void standin_fail_after(int skip, ncclResult_t r) {
  uv_mutex_lock(&si.mu);
  si.fail_next = r;
  si.fail_skip = skip;
  uv_mutex_unlock(&si.mu);
}

void standin_fail_init(int rank, ncclResult_t r) {
  uv_mutex_lock(&si.mu);
  si.fail_init_rank = rank;
  si.fail_init = r;
  uv_mutex_unlock(&si.mu);
}

void standin_set_hang(int hang) {
  uv_mutex_lock(&si.mu);
  si.hang = hang;
  uv_mutex_unlock(&si.mu);
}

void standin_set_launch_delay_us(int us) {
  uv_mutex_lock(&si.mu);
  si.cfg.launch_delay_us = us;
  uv_mutex_unlock(&si.mu);
}

void standin_set_hook(const char *call, void (*fn)(void *), void *arg) {
  uv_mutex_lock(&si.mu);
  snprintf(si.hook_call, sizeof si.hook_call, "%s", call ? call : "");
  si.hook_fn = fn;
  si.hook_arg = arg;
  uv_mutex_unlock(&si.mu);
}

void si_group_fill(coll_nccl_table_t *t);

void si_group_fill(coll_nccl_table_t *t) {
  t->nccl_group_start = group_start;
  t->nccl_group_end = group_end;
  /* Before 2.11 the library has no pre-multiplied sums at all. */
  if (si.cfg.version >= 21100) {
    t->nccl_red_op_create_pre_mul_sum = premul_create;
    t->nccl_red_op_destroy = premul_destroy;
  }
}
