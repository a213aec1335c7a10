/* SPDX-License-Identifier: Apache-2.0 */
/* standin_comm.c: the stand-in's comm lifecycle: unique ids, init (ranks
 * meet by id; groups by device list), abort, destroy, async errors, groups
 * and pre-multiplied sum ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_impl.h"

static ncclResult_t get_version(int *v) {
  *v = si.cfg.version;
  return ncclSuccess;
}

static const char *error_string(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    default:
      return "unknown result code";
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

/* Blocks until every rank joined, like NCCL's bootstrap (bounded here). */
static ncclResult_t comm_init_rank(ncclComm_t *out, int nranks, ncclUniqueId id,
                                   int rank) {
  si_clique_t *q;
  struct ncclComm *c;
  int waited = 0;
  if (nranks < 1 || nranks > SI_MAXR || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  uv_mutex_lock(&si.mu);
  for (q = si.cliques; q != NULL; q = q->next)
    if (memcmp(q->id, id.internal, sizeof q->id) == 0) break;
  if (q == NULL) q = clique_new(id.internal, nranks);
  if (q->world != nranks || q->comms[rank] != NULL) {
    uv_mutex_unlock(&si.mu);
    return ncclInvalidUsage;
  }
  c = comm_new(q, rank, si_cur_dev);
  uv_cond_broadcast(&si.cv);
  while (q->joined < q->world && waited < 20000) {
    uv_cond_timedwait(&si.cv, &si.mu, 1000000);
    waited++;
  }
  uv_mutex_unlock(&si.mu);
  if (q->joined < q->world) return ncclSystemError;
  *out = c;
  return ncclSuccess;
}

static ncclResult_t comm_init_all(ncclComm_t *out, int ndev,
                                  const int *devlist) {
  char id[NCCL_UNIQUE_ID_BYTES] = {0};
  si_clique_t *q;
  int i, j;
  if (ndev < 1 || ndev > SI_MAXR) return ncclInvalidArgument;
  for (i = 0; i < ndev; i++) {
    int d = devlist ? devlist[i] : i;
    if (d < 0 || d >= si.cfg.ndev) return ncclInvalidArgument;
    for (j = 0; j < i; j++)
      if (devlist && devlist[j] == d) return ncclInvalidUsage;
  }
  uv_mutex_lock(&si.mu);
  snprintf(id, sizeof id, "stand-in group %llu",
           (unsigned long long)++si.uid_counter);
  q = clique_new(id, ndev);
  for (i = 0; i < ndev; i++) out[i] = comm_new(q, i, devlist ? devlist[i] : i);
  uv_mutex_unlock(&si.mu);
  return ncclSuccess;
}

static ncclResult_t comm_abort(ncclComm_t c) {
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclCommAbort");
  if (r == ncclSuccess) {
    c->freed = 1;
    si.st.comms_live--;
    si.st.comm_aborts++;
    si_progress_all(); /* its stuck kernels exit */
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
    si_progress_all();
  }
  uv_mutex_unlock(&si.mu);
  return r;
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
  if (si_group_depth <= 0) return ncclInvalidUsage;
  if (--si_group_depth == 0) {
    uv_mutex_lock(&si.mu);
    si.st.group_ends++;
    uv_mutex_unlock(&si.mu);
  }
  return ncclSuccess;
}

static ncclResult_t premul_create(ncclRedOp_t *op, void *scalar,
                                  ncclDataType_t dt, ncclScalarResidence_t res,
                                  ncclComm_t c) {
  ncclResult_t r;
  int i;
  if (dt != ncclFloat32 || res != ncclScalarHostImmediate)
    return ncclInvalidArgument; /* only what libcoll uses is modelled */
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclRedOpCreatePreMulSum");
  for (i = 0; r == ncclSuccess && i < SI_MAXOPS; i++)
    if (!c->premul_live[i]) break;
  if (r == ncclSuccess && i == SI_MAXOPS) r = ncclInternalError;
  if (r == ncclSuccess) {
    c->premul_live[i] = 1;
    c->premul[i] = *(float *)scalar;
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
  t->nccl_get_last_error = NULL;
  t->nccl_get_unique_id = get_unique_id;
  t->nccl_comm_init_rank = comm_init_rank;
  t->nccl_comm_init_all = comm_init_all;
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
}
