/* SPDX-License-Identifier: Apache-2.0 */
/* standin_comm.c: the stand-in's comm lifecycle: unique ids, init (ranks
 * meet by id; groups by device list), abort, destroy, async errors, groups
 * and pre-multiplied sum ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/half.h"
#include "standin_impl.h"

static ncclResult_t get_version(int *v) {
  *v = si.cfg.version;
  return ncclSuccess;
}

static const char *error_string(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    default: return "unknown result code";
  }
}

static ncclResult_t get_unique_id(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  uv_mutex_lock(&si.mu);
  snprintf(id->internal, sizeof id->internal, "stand-in id %llu",
           (unsigned long long)++si.uid_counter);
  uv_mutex_unlock(&si.mu);
  return ncclSuccess;
}

static struct ncclComm *comm_new(si_clique_t *q, int rank, int dev) {
  struct ncclComm *c = calloc(1, sizeof *c);
  c->q = q;
  c->rank = rank;
  c->dev = dev;
  c->next_all = si.comms;
  si.comms = c;
  q->comms[rank] = c;
  q->joined++;
  si.st.comms_live++;
  return c;
}

static si_clique_t *clique_new(const char *id, int world) {
  si_clique_t *q = calloc(1, sizeof *q);
  memcpy(q->id, id, sizeof q->id);
  q->world = world;
  q->next = si.cliques;
  si.cliques = q;
  return q;
}

/* Runs once the last rank joined: NCCL refuses two ranks of one comm on
 * one GPU ("Duplicate GPU detected", init.cc), every rank seeing it. */
static void clique_init_done(si_clique_t *q) {
  int r, k;
  ncclResult_t res = ncclSuccess;
  for (r = 0; r < q->world && res == ncclSuccess; r++)
    for (k = 0; k < r; k++)
      if (q->comms[k]->dev == q->comms[r]->dev) {
        snprintf(si.last_error, sizeof si.last_error,
                 "Duplicate GPU detected : rank %d and rank %d both on CUDA "
                 "device %d",
                 k, r, q->comms[r]->dev);
        res = ncclInvalidUsage;
        break;
      }
  q->init_done = 1;
  for (r = 0; r < q->world; r++)
    if (!q->comms[r]->freed) q->comms[r]->async_err = res;
  uv_cond_broadcast(&si.cv);
}

/* Joins the clique of `id`; the comm stays ncclInProgress until every rank
 * joined (NCCL's bootstrap). */
ncclResult_t si_join(ncclComm_t *out, int nranks, const char *id, int rank,
                     int nonblocking) {
  si_clique_t *q;
  struct ncclComm *c;
  if (nranks < 1 || nranks > SI_MAXR || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  for (q = si.cliques; q != NULL; q = q->next)
    if (memcmp(q->id, id, sizeof q->id) == 0) break;
  if (q == NULL) q = clique_new(id, nranks);
  if (q->world != nranks || q->comms[rank] != NULL) return ncclInvalidUsage;
  c = comm_new(q, rank, si_cur_dev);
  c->nonblocking = nonblocking;
  c->async_err = ncclInProgress;
  if (q->joined == q->world) clique_init_done(q);
  *out = c;
  return ncclSuccess;
}

/* A blocking comm's init waits for its peers (bounded, so a test that gets
 * this wrong fails instead of hanging); an abort of the comm ends it. */
ncclResult_t si_wait_init(struct ncclComm *c) {
  int waited = 0;
  while (c->async_err == ncclInProgress && !c->freed && waited < 20000) {
    uv_cond_timedwait(&si.cv, &si.mu, 1000000);
    waited++;
  }
  if (c->freed) return ncclSystemError;
  if (c->async_err == ncclInProgress) {
    snprintf(si.last_error, sizeof si.last_error,
             "bootstrap: timed out waiting for peers");
    return ncclSystemError;
  }
  return c->async_err;
}

/* ncclCommInitRankConfig: a nonblocking comm returns ncclInProgress at once
 * and reports through ncclCommGetAsyncError; inside a group, even a blocking
 * one waits only at ncclGroupEnd (which is how ncclCommInitAll is built). */
static ncclResult_t comm_init_rank_config(ncclComm_t *out, int nranks,
                                          ncclUniqueId id, int rank,
                                          ncclConfig_t *config) {
  int nonblocking = config != NULL && config->blocking == 0;
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  if (rank == si.fail_init_rank) {
    uv_mutex_unlock(&si.mu);
    return si.fail_init;
  }
  r = si_join(out, nranks, id.internal, rank, nonblocking);
  if (r == ncclSuccess && si_group_depth > 0) {
    si_group_inits[si_group_ninit++] = *out;
  } else if (r == ncclSuccess && nonblocking) {
    r = (*out)->async_err == ncclSuccess ? ncclSuccess : ncclInProgress;
  } else if (r == ncclSuccess) {
    r = si_wait_init(*out);
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

/* A freed comm's reduction ops go with it, as in NCCL. */
static void release_ops(struct ncclComm *c) {
  int i;
  for (i = 0; i < SI_MAXOPS; i++)
    if (c->premul_live[i]) {
      c->premul_live[i] = 0;
      si.st.ops_live--;
    }
}

static ncclResult_t comm_abort(ncclComm_t c) {
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclCommAbort");
  if (r == ncclSuccess) {
    c->freed = 1;
    si.st.comms_live--;
    si.st.comm_aborts++;
    release_ops(c);
    si_progress_all();    /* its stuck kernels exit */
    si_launch_progress(); /* and its calls waiting for peers return */
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

static int has_stuck_work(struct ncclComm *c) {
  si_slot_t *sl;
  for (sl = c->q->slots; sl != NULL; sl = sl->next)
    if (!sl->done && sl->a[c->rank].posted) return 1;
  return 0;
}

static ncclResult_t comm_destroy(ncclComm_t c) {
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclCommDestroy");
  if (r == ncclSuccess) {
    si_progress_all();
    /* NCCL would wait here forever for work that cannot end. */
    if (has_stuck_work(c)) si.st.destroy_blocked++;
    c->freed = 1;
    si.st.comms_live--;
    si.st.comm_destroys++;
    release_ops(c);
    si_progress_all();
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

static const char *get_last_error(ncclComm_t c) {
  /* NCCL keeps one process-wide text; the caller gets a copy of its own,
   * so a rank that records an error (a shrink's) never races a reader. */
  static _Thread_local char copy[sizeof si.last_error];
  (void)c;
  uv_mutex_lock(&si.mu);
  memcpy(copy, si.last_error, sizeof copy);
  uv_mutex_unlock(&si.mu);
  return copy;
}

static ncclResult_t get_async_error(ncclComm_t c, ncclResult_t *e) {
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclCommGetAsyncError");
  if (r == ncclSuccess) *e = c->async_err;
  uv_mutex_unlock(&si.mu);
  return r;
}

static ncclResult_t group_start(void) {
  si_group_depth++;
  return ncclSuccess;
}

static ncclResult_t group_end(void) {
  ncclResult_t r = ncclSuccess;
  int i, nonblocking = 0;
  if (si_group_depth <= 0) return ncclInvalidUsage;
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
  if (r == ncclSuccess || r == ncclInProgress) {
    ncclResult_t r2 = si_launch_group_end();
    if (r == ncclSuccess) r = r2;
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

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

/* NCCL keeps the op's datatype and refuses the op with any other one. */
static ncclResult_t premul_create(ncclRedOp_t *op, void *scalar,
                                  ncclDataType_t dt, ncclScalarResidence_t res,
                                  ncclComm_t c) {
  ncclResult_t r;
  double k = 0;
  int i;
  if (res != ncclScalarHostImmediate || scalar == NULL ||
      !premul_scalar(scalar, dt, &k))
    return ncclInvalidArgument; /* only what libcoll uses is modelled */
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclRedOpCreatePreMulSum");
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
  uv_mutex_unlock(&si.mu);
  return r;
}

static ncclResult_t premul_destroy(ncclRedOp_t op, ncclComm_t c) {
  ncclResult_t r;
  int i = (int)op - (int)ncclNumOps;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclRedOpDestroy");
  if (r == ncclSuccess && (i < 0 || i >= SI_MAXOPS || !c->premul_live[i])) {
    si_misuse("ncclRedOpDestroy of an op that is not live");
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    c->premul_live[i] = 0;
    si.st.ops_live--;
  }
  uv_mutex_unlock(&si.mu);
  return r;
}

void standin_fail_next(ncclResult_t r) {
  uv_mutex_lock(&si.mu);
  si.fail_next = r;
  uv_mutex_unlock(&si.mu);
}

void standin_fail_init(int rank, ncclResult_t r) {
  uv_mutex_lock(&si.mu);
  si.fail_init_rank = rank;
  si.fail_init = r;
  uv_mutex_unlock(&si.mu);
}

void standin_inject_async_error(ncclResult_t r) {
  struct ncclComm *c;
  uv_mutex_lock(&si.mu);
  for (c = si.comms; c != NULL; c = c->next_all)
    if (!c->freed) c->async_err = r;
  uv_mutex_unlock(&si.mu);
}

void standin_set_hang(int hang) {
  uv_mutex_lock(&si.mu);
  si.hang = hang;
  uv_mutex_unlock(&si.mu);
}

void si_nccl_free_all(void) {
  si_launch_free_all();
  si_clique_t *q;
  si_slot_t *sl;
  struct ncclComm *c;
  while ((q = si.cliques) != NULL) {
    si.cliques = q->next;
    while ((sl = q->slots) != NULL) {
      q->slots = sl->next;
      free(sl);
    }
    free(q);
  }
  while ((c = si.comms) != NULL) {
    si.comms = c->next_all;
    free(c);
  }
}

void si_nccl_fill(coll_nccl_table_t *t) {
  t->have_nccl = 1;
  t->nccl_get_version = get_version;
  t->nccl_get_error_string = error_string;
  t->nccl_get_last_error = get_last_error;
  t->nccl_get_unique_id = get_unique_id;
  t->nccl_comm_init_rank_config = comm_init_rank_config;
  t->nccl_comm_abort = comm_abort;
  t->nccl_comm_destroy = comm_destroy;
  t->nccl_comm_get_async_error = get_async_error;
  si_nccl_fill_colls(t);
  t->nccl_group_start = group_start;
  t->nccl_group_end = group_end;
  /* Before 2.11 the library has no pre-multiplied sums at all. */
  if (si.cfg.version >= 21100) {
    t->nccl_red_op_create_pre_mul_sum = premul_create;
    t->nccl_red_op_destroy = premul_destroy;
  }
  if (si.cfg.version >= 22703) si_shrink_fill(t);
}
