/* SPDX-License-Identifier: Apache-2.0 */
/* standin_launch.c: when the stand-in's NCCL calls reach the streams, as in
 * NCCL 2.28. Calls inside a group are only collected and launched at the
 * outermost ncclGroupEnd (a call outside a group is a group of one). A
 * world-1 collective is copied in the call, group or not
 * (ncclLaunchOneRank, enqueue.cc:2569-2571). Otherwise the first use of
 * collectives on a comm, and of each point-to-point peer, connects first,
 * which needs the peers to reach their own first use:
 *  - a blocking group connects and launches inside the call, waiting for
 *    the peers (abortable only through ncclCommAbort of that comm);
 *  - a nonblocking group marks its comms ncclInProgress, hands the launch
 *    to a thread of its own and answers ncclInProgress, every time, not
 *    only at a first use (group.cc:706-738); the thread connects, puts the
 *    work on the streams (resolving them there, group.cc:259-331), and sets
 *    the comms' state; ncclCommGetAsyncError joins it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin_impl.h"

static _Thread_local si_call_t group_calls[SI_MAXCALLS];
static _Thread_local int group_ncalls;
static _Thread_local ncclResult_t group_error;

/* Records c's arrival at the connection a call needs. */
static void arrive(const si_call_t *k) {
  struct ncclComm *c = k->c;
  if (k->peer < 0)
    c->q->coll_arrived |= 1u << c->rank;
  else
    c->q->p2p_arrived[c->rank][k->peer] = 1;
}

/* 1 once every peer the call needs reached it too. */
static int connected(const si_call_t *k) {
  struct ncclComm *c = k->c;
  si_clique_t *q = c->q;
  int r;
  if (k->peer < 0) {
    for (r = 0; r < q->world; r++)
      if (!(q->coll_arrived & (1u << r))) return 0;
    return 1;
  }
  return q->p2p_arrived[k->peer][c->rank];
}

static int all_connected(const si_call_t *calls, int n) {
  int i, ok = 1;
  for (i = 0; i < n; i++) arrive(&calls[i]);
  for (i = 0; i < n; i++) ok &= connected(&calls[i]);
  return ok;
}

static int any_aborted(const si_call_t *calls, int n) {
  int i, aborted = 0;
  for (i = 0; i < n; i++)
    aborted |= calls[i].c->freed || calls[i].c->abort_flag;
  return aborted;
}

static void post_all(const si_call_t *calls, int n) {
  int i;
  si_fuse_cur = n > 1 ? si_fuse_next++ : 0;
  for (i = 0; i < n; i++)
    if (!calls[i].c->freed)
      si_post_call(calls[i].c, calls[i].kind, calls[i].peer, &calls[i].arg,
                   calls[i].st);
  si_fuse_cur = 0;
}

void si_launch_progress(void) { uv_cond_broadcast(&si.cv); }

/* The launch thread: NCCL's groupLaunch for a nonblocking group. */
static void launch_run(void *p) {
  si_job_t *job = p;
  int i;
  if (job->delay_us > 0) {
    struct timespec ts = {job->delay_us / 1000000,
                          (long)(job->delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  uv_mutex_lock(&si.mu);
  for (;;) {
    if (any_aborted(job->calls, job->n)) {
      job->result = ncclSystemError;
      break;
    }
    if (all_connected(job->calls, job->n)) {
      post_all(job->calls, job->n);
      job->result = ncclSuccess;
      break;
    }
    si_wait_a_bit();
  }
  for (i = 0; i < job->n; i++) {
    struct ncclComm *c = job->calls[i].c;
    if (!c->freed && c->job == job && c->async_err == ncclInProgress)
      c->async_err = job->result;
  }
  job->done = 1;
  uv_cond_broadcast(&si.cv);
  uv_mutex_unlock(&si.mu);
}

ncclResult_t si_job_start(si_job_t *job, void (*run)(void *)) {
  job->next_all = si.jobs;
  si.jobs = job;
  if (uv_thread_create(&job->th, run, job) != 0) {
    job->done = job->joined = 1;
    return ncclSystemError;
  }
  job->started = 1;
  return ncclSuccess;
}

static ncclResult_t launch_async(si_call_t *calls, int n) {
  si_job_t *job;
  int i;
  /* A group holds at most SI_MAXCALLS calls; saying so here also tells
   * gcc -O3 that the copy cannot exceed job->calls. */
  if (n < 0 || n > SI_MAXCALLS) return ncclInternalError;
  job = calloc(1, sizeof *job);
  if (job == NULL) return ncclSystemError;
  job->kind = SI_JOB_LAUNCH;
  job->delay_us = si.cfg.launch_delay_us;
  memcpy(job->calls, calls, (size_t)n * sizeof *calls);
  job->n = n;
  for (i = 0; i < n; i++) arrive(&calls[i]); /* peers may connect now */
  for (i = 0; i < n; i++) {
    struct ncclComm *c = calls[i].c;
    if (c->job == job) continue;
    c->async_err = ncclInProgress;
    c->job = job;
    job->refs++;
  }
  si.st.launches_async++;
  uv_cond_broadcast(&si.cv);
  if (si_job_start(job, launch_run) != ncclSuccess) return ncclSystemError;
  return ncclInProgress;
}

/* Blocking: wait in the call for the peers, like NCCL's bootstrap
 * exchange. Bounded so a test that gets this wrong fails, not hangs. */
static ncclResult_t launch_blocking(si_call_t *calls, int n) {
  int waited = 0;
  for (;;) {
    if (any_aborted(calls, n)) return ncclSystemError;
    if (all_connected(calls, n)) break;
    if (waited++ > 20000) {
      snprintf(si.last_error, sizeof si.last_error,
               "connect: timed out waiting for a peer");
      return ncclSystemError;
    }
    si_wait_a_bit();
  }
  post_all(calls, n);
  uv_cond_broadcast(&si.cv);
  return ncclSuccess;
}

static ncclResult_t launch(si_call_t *calls, int n, int force_blocking) {
  int i, nonblocking = calls[0].c->nonblocking;
  for (i = 1; i < n; i++)
    if (calls[i].c->nonblocking != nonblocking) {
      snprintf(si.last_error, sizeof si.last_error,
               "Blocking and nonblocking communicators are not allowed in "
               "the same group.");
      return ncclInvalidArgument;
    }
  if (nonblocking && !force_blocking) return launch_async(calls, n);
  return launch_blocking(calls, n);
}

ncclResult_t si_launch_call(struct ncclComm *c, int kind, int peer,
                            const si_arg_t *arg, cudaStream_t st) {
  si_call_t k;
  k.c = c;
  k.kind = kind;
  k.peer = peer;
  k.arg = *arg;
  k.st = st;
  if (peer < 0 && c->q->world == 1) {
    si_post_call(c, kind, peer, arg, st); /* ncclLaunchOneRank */
    return ncclSuccess;
  }
  if (si_group_depth > 0) {
    if (group_ncalls == SI_MAXCALLS) return ncclInternalError;
    group_calls[group_ncalls++] = k;
    return ncclSuccess;
  }
  return launch(&k, 1, 0);
}

void si_group_set_error(ncclResult_t r) {
  if (si_group_depth > 0 && r != ncclSuccess && r != ncclInProgress)
    group_error = r;
}

ncclResult_t si_launch_group_end(int force_blocking) {
  ncclResult_t r = group_error;
  int n = group_ncalls, i;
  group_ncalls = 0;
  group_error = ncclSuccess;
  if (r != ncclSuccess) {
    /* groupCleanup: nothing of the group runs, and every nonblocking comm
     * of it reports the error (group.cc:381-390). */
    for (i = 0; i < n; i++)
      if (group_calls[i].c->nonblocking && !group_calls[i].c->freed)
        group_calls[i].c->async_err = r;
    return r;
  }
  if (n == 0) return ncclSuccess;
  return launch(group_calls, n, force_blocking);
}

void si_job_join(struct ncclComm *c) {
  si_job_t *job = c->job;
  if (job == NULL) return;
  if (!job->done && !c->abort_flag) return;
  /* Aborting: the job sees the flag and ends (ncclGroupJobAbort). */
  while (!job->done) si_wait_a_bit();
  c->job = NULL;
  job->refs--;
  if (!job->joined) {
    job->joined = 1;
    if (job->started) uv_thread_join(&job->th);
  }
}

void si_jobs_free_all(void) {
  si_job_t *job;
  while ((job = si.jobs) != NULL) {
    si.jobs = job->next_all;
    if (!job->joined && job->started) {
      /* Ends once its comms are gone: uninstall frees them all. */
      while (!job->done) si_wait_a_bit();
      uv_thread_join(&job->th);
    }
    free(job);
  }
}
