/* SPDX-License-Identifier: Apache-2.0 */
/* standin_comm.c: the stand-in's comm lifecycle as NCCL 2.28.9 runs it:
 * unique ids, init (ranks meet by id), the state ncclCommGetAsyncError
 * reports, abort, revoke and destroy, and the entry of every call that
 * names a comm (si_enter), which sees two threads inside one comm. */
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
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
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

ncclResult_t si_enter(struct ncclComm *c, const char *what) {
  void (*hook)(void *) = NULL;
  void *arg = NULL;
  uv_thread_t self = uv_thread_self();
  uv_mutex_lock(&si.mu);
  if (si.hook_fn != NULL && strcmp(si.hook_call, what) == 0) {
    hook = si.hook_fn;
    arg = si.hook_arg;
    si.hook_fn = NULL;
  }
  uv_mutex_unlock(&si.mu);
  if (hook != NULL) hook(arg);
  uv_mutex_lock(&si.mu);
  if (si_comm_ok(c, what) != ncclSuccess) return ncclInvalidUsage;
  if (c->busy > 0 && !uv_thread_equal(&c->busy_tid, &self))
    si_misuse(
        "%s on a comm while another thread is inside %s on it (NCCL "
        "has no lock there)",
        what, c->busy_call);
  c->busy++;
  c->busy_tid = self;
  c->busy_call = what;
  /* The window in which an overlapping call finds the comm busy. */
  uv_mutex_unlock(&si.mu);
  uv_mutex_lock(&si.mu);
  return ncclSuccess;
}

void si_leave(struct ncclComm *c) {
  if (c != NULL && c->busy > 0) c->busy--;
  uv_mutex_unlock(&si.mu);
}

static struct ncclComm *comm_new(si_clique_t *q, int rank, int dev,
                                 const char *bus) {
  struct ncclComm *c = calloc(1, sizeof *c);
  c->q = q;
  c->rank = rank;
  c->dev = dev;
  snprintf(c->bus, sizeof c->bus, "%s", bus);
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
 * one GPU ("Duplicate GPU detected", init.cc:903-907), every rank seeing
 * it. Like NCCL it compares PCI bus ids, not device numbers: ranks that
 * each see only their own GPU all call it device 0. The stand-in's ranks
 * are one host. */
static void clique_init_done(si_clique_t *q) {
  int r, k;
  ncclResult_t res = ncclSuccess;
  for (r = 0; r < q->world && res == ncclSuccess; r++)
    for (k = 0; k < r; k++)
      if (strcmp(q->comms[k]->bus, q->comms[r]->bus) == 0) {
        snprintf(si.last_error, sizeof si.last_error,
                 "Duplicate GPU detected : rank %d and rank %d both on CUDA "
                 "device %s",
                 k, r, q->comms[r]->bus);
        res = ncclInvalidUsage;
        break;
      }
  q->init_done = 1;
  for (r = 0; r < q->world; r++)
    if (!q->comms[r]->freed && !q->comms[r]->abort_flag)
      q->comms[r]->async_err = res;
  uv_cond_broadcast(&si.cv);
}

ncclResult_t si_join(ncclComm_t *out, int nranks, const char *id, int rank,
                     int dev, const char *bus, int nonblocking) {
  si_clique_t *q;
  struct ncclComm *c;
  if (nranks < 1 || nranks > SI_MAXR || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  for (q = si.cliques; q != NULL; q = q->next)
    if (memcmp(q->id, id, sizeof q->id) == 0) break;
  if (q == NULL) q = clique_new(id, nranks);
  if (q->world != nranks || q->comms[rank] != NULL) return ncclInvalidUsage;
  c = comm_new(q, rank, dev, bus);
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
  while (c->async_err == ncclInProgress && !c->freed && !c->abort_flag &&
         waited < 20000) {
    si_wait_a_bit();
    waited++;
  }
  if (c->freed || c->abort_flag) return ncclSystemError;
  if (c->async_err == ncclInProgress) {
    snprintf(si.last_error, sizeof si.last_error,
             "bootstrap: timed out waiting for peers");
    return ncclSystemError;
  }
  return c->async_err;
}

int si_nonblocking(const ncclConfig_t *config, int inherit) {
  const char *env = getenv("NCCL_COMM_BLOCKING");
  int nonblocking = config != NULL ? config->blocking == 0 : inherit;
  if (env != NULL && strcmp(env, "1") == 0) nonblocking = 0;
  if (env != NULL && strcmp(env, "0") == 0) nonblocking = 1;
  return nonblocking;
}

/* ncclCommInitRankConfig: a nonblocking comm returns ncclInProgress at once
 * and reports through ncclCommGetAsyncError; inside a group, even a blocking
 * one waits only at ncclGroupEnd (which is how ncclCommInitAll is built). */
static ncclResult_t comm_init_rank_config(ncclComm_t *out, int nranks,
                                          ncclUniqueId id, int rank,
                                          ncclConfig_t *config) {
  int nonblocking = si_nonblocking(config, 0);
  ncclResult_t r;
  uv_mutex_lock(&si.mu);
  if (rank == si.fail_init_rank) {
    uv_mutex_unlock(&si.mu);
    return si.fail_init;
  }
  r = si_join(out, nranks, id.internal, rank, si_cur_dev, si_bus_id(si_cur_dev),
              nonblocking);
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

ncclResult_t si_ensure_ready(struct ncclComm *c) {
  if (c->abort_flag) {
    si_job_join(c);
    return ncclSuccess;
  }
  if (c->async_err == ncclSuccess && c->job != NULL) si_job_join(c);
  if (c->async_err == ncclInProgress) {
    snprintf(si.last_error, sizeof si.last_error,
             "Attempt to use communicator before the previous operation "
             "returned ncclSuccess");
    return ncclInvalidArgument;
  }
  return c->async_err;
}

/* commReclaim after an abort: the comm's kernels were told to quit; the
 * device stream is synchronised, which waits on the user's streams up to
 * the comm's last kernel (init.cc:2219-2228, enqueue.cc:1715-1725). */
void si_reclaim_abort(struct ncclComm *c) {
  int64_t t0 = si_now_ms(), waited;
  c->abort_flag = 1;
  c->destroy_flag = 1;
  si_progress_all();
  uv_cond_broadcast(&si.cv);
  si_job_join(c);
  si_wait_streams(c, "ncclCommAbort");
  waited = si_now_ms() - t0;
  if (waited > si.st.abort_waited_ms) si.st.abort_waited_ms = (int)waited;
  c->freed = 1;
  si.st.comms_live--;
  si.st.comm_aborts++;
  release_ops(c);
  si_progress_all();
}

static ncclResult_t comm_abort(ncclComm_t c) {
  ncclResult_t r = si_enter(c, "ncclCommAbort");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  if (si_group_depth > 0 && si_group_naborts < SI_MAXR) {
    /* Inside an open group NCCL only sets the flags; the reclaim job waits
     * for the group's end, which it makes blocking (group.cc:36-66). */
    c->abort_flag = 1;
    c->destroy_flag = 1;
    si_progress_all();
    si_group_aborts[si_group_naborts++] = c;
    si.st.aborts_in_group++;
  } else {
    si_reclaim_abort(c);
  }
  si_leave(c);
  return ncclSuccess;
}

/* Work of c on a stream that can never end: a collective waiting for a
 * rank that never posted its half, or one that hangs. NCCL's destroy would
 * wait for it forever. */
static int has_stuck_work(struct ncclComm *c) {
  struct CUstream_st *s;
  si_op_t *op;
  int r;
  for (s = si.streams; s != NULL; s = s->next_all)
    for (op = s->head; op != NULL; op = op->next) {
      si_slot_t *sl = op->slot;
      if (op->kind != SI_OP_COLL || op->comm != c || op->finished || sl->done)
        continue;
      if (sl->hang) return 1;
      for (r = 0; r < SI_MAXR; r++)
        if ((sl->want & (1u << r)) && !sl->a[r].posted) return 1;
    }
  return 0;
}

/* ncclCommDestroy (init.cc:2360-2395): opens a group, then
 * ncclCommEnsureReady; an error (or ncclInProgress, which is answered as
 * ncclInvalidArgument) is returned without destroying anything and without
 * closing the group, so the thread's group depth stays one too high. */
static ncclResult_t comm_destroy(ncclComm_t c) {
  ncclResult_t r = si_enter(c, "ncclCommDestroy");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  si_group_depth++;
  c->destroy_flag = 1;
  r = si_ensure_ready(c);
  if (r != ncclSuccess) {
    si.st.destroy_refused++;
    si_leave(c);
    return r;
  }
  si_progress_all();
  if (has_stuck_work(c))
    si.st.destroy_blocked++; /* NCCL would wait here forever */
  else
    si_wait_streams(c, "ncclCommDestroy");
  c->freed = 1;
  si.st.comms_live--;
  si.st.comm_destroys++;
  release_ops(c);
  si_progress_all();
  si_group_depth--;
  si_leave(c);
  return ncclSuccess;
}

/* ncclCommRevoke (init.cc:2446-2500): sets the abort flags (the comm's
 * kernels quit), joins a pending job, and starts one that waits for the
 * streams; the comm is ncclInProgress until then, ncclSuccess after, with
 * its flags cleared and collectives refused. */
static ncclResult_t comm_revoke(ncclComm_t c, int flags) {
  ncclResult_t r = si_enter(c, "ncclCommRevoke");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  if (flags != 0 || c->destroy_flag || c->revoked) {
    si_leave(c);
    return ncclInvalidArgument;
  }
  c->abort_flag = 1;
  c->revoked = 1;
  (void)si_ensure_ready(c);
  si_progress_all();
  uv_cond_broadcast(&si.cv);
  si.st.revokes++;
  c->revoking = 1;
  c->async_err = ncclInProgress;
  if (!c->nonblocking) {
    si_wait_streams(c, "ncclCommRevoke");
    c->revoking = c->abort_flag = 0;
    c->async_err = ncclSuccess;
  }
  r = c->async_err;
  si_leave(c);
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

/* The comm's state; a job that ended is joined on ncclSuccess
 * (init.cc:2732-2735); a revoke ends once the streams passed the comm's
 * work. */
static ncclResult_t get_async_error(ncclComm_t c, ncclResult_t *e) {
  ncclResult_t r = si_enter(c, "ncclCommGetAsyncError");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  if (c->revoking) {
    si_progress_all();
    if (!si_comm_has_work(c)) {
      c->revoking = c->abort_flag = 0;
      if (c->async_err == ncclInProgress) c->async_err = ncclSuccess;
    }
  }
  *e = c->async_err;
  if (*e == ncclSuccess && c->job != NULL && c->job->done) si_job_join(c);
  si_leave(c);
  return ncclSuccess;
}

void standin_inject_async_error(ncclResult_t r) {
  struct ncclComm *c;
  uv_mutex_lock(&si.mu);
  for (c = si.comms; c != NULL; c = c->next_all)
    if (!c->freed) c->async_err = r;
  uv_mutex_unlock(&si.mu);
}

void si_nccl_free_all(void) {
  si_clique_t *q;
  si_slot_t *sl;
  struct ncclComm *c;
  /* Jobs still waiting for a peer end once their comms are aborted. */
  for (c = si.comms; c != NULL; c = c->next_all) c->abort_flag = 1;
  uv_cond_broadcast(&si.cv);
  si_jobs_free_all();
  si_shrink_free_all();
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

void si_group_fill(coll_nccl_table_t *t);

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
  if (si.cfg.version >= 22800) t->nccl_comm_revoke = comm_revoke;
  si_nccl_fill_colls(t);
  si_group_fill(t);
  si_shrink_fill(t);
}
