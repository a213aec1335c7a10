/* SPDX-License-Identifier: Apache-2.0 */
/* standin_launch.c: when the stand-in's NCCL calls reach the streams, as in
 * NCCL 2.22+: calls inside a group are only collected, and launched at the
 * outermost ncclGroupEnd (a call outside a group is a group of one). The
 * first use of collectives on a comm, and of each point-to-point peer,
 * connects first, which needs the peers to reach their own first use: a
 * blocking comm waits inside the call for them (abortable only through
 * ncclCommAbort of that comm), a nonblocking comm answers ncclInProgress and
 * launches once they came. A call on a comm still in progress is misuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_impl.h"

#define SI_MAXCALLS 64

typedef struct si_call {
  struct ncclComm *c;
  int kind, peer; /* peer: -1 for collectives */
  si_arg_t arg;
  cudaStream_t st;
} si_call_t;

/* A launch waiting for connections (nonblocking comms). */
typedef struct si_launch {
  si_call_t calls[SI_MAXCALLS];
  int n;
  struct si_launch *next;
} si_launch_t;

static _Thread_local si_call_t group_calls[SI_MAXCALLS];
static _Thread_local int group_ncalls;
static si_launch_t *waiting; /* under si.mu */

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

static void post_all(const si_call_t *calls, int n) {
  int i;
  si_fuse_cur = n > 1 ? si_fuse_next++ : 0;
  for (i = 0; i < n; i++)
    if (!calls[i].c->freed)
      si_post_call(calls[i].c, calls[i].kind, calls[i].peer, &calls[i].arg,
                   calls[i].st);
  si_fuse_cur = 0;
}

/* Launches that waited and can go now (after an arrival or an abort). */
void si_launch_progress(void) {
  si_launch_t **pp = &waiting, *l;
  int i, any_freed;
  while ((l = *pp) != NULL) {
    any_freed = 0;
    for (i = 0; i < l->n; i++) any_freed |= l->calls[i].c->freed;
    if (!any_freed && !all_connected(l->calls, l->n)) {
      pp = &l->next;
      continue;
    }
    *pp = l->next;
    post_all(l->calls, l->n);
    for (i = 0; i < l->n; i++)
      if (!l->calls[i].c->freed) l->calls[i].c->async_err = ncclSuccess;
    free(l);
  }
  uv_cond_broadcast(&si.cv);
}

static ncclResult_t launch(si_call_t *calls, int n) {
  int i, nonblocking = 1, waited = 0, freed = 0;
  si_launch_t *l;
  for (i = 0; i < n; i++) nonblocking &= calls[i].c->nonblocking;
  if (all_connected(calls, n)) {
    post_all(calls, n);
    si_launch_progress(); /* our arrival may complete a peer's launch */
    return ncclSuccess;
  }
  si_launch_progress();
  if (nonblocking) {
    /* A group holds at most SI_MAXCALLS calls; saying so here also tells
     * gcc -O3 that the copy cannot exceed l->calls. */
    if (n < 0 || n > SI_MAXCALLS) return ncclInternalError;
    l = calloc(1, sizeof *l);
    if (l == NULL) return ncclSystemError;
    memcpy(l->calls, calls, (size_t)n * sizeof *calls);
    l->n = n;
    l->next = waiting;
    waiting = l;
    for (i = 0; i < n; i++) calls[i].c->async_err = ncclInProgress;
    return ncclInProgress;
  }
  /* Blocking: wait in the call for the peers, like NCCL's bootstrap
   * exchange. Bounded so a test that gets this wrong fails, not hangs. */
  for (;;) {
    for (i = 0; i < n; i++) freed |= calls[i].c->freed;
    if (freed) return ncclSystemError;
    if (all_connected(calls, n)) break;
    if (waited++ > 20000) {
      snprintf(si.last_error, sizeof si.last_error,
               "connect: timed out waiting for a peer");
      return ncclSystemError;
    }
    uv_cond_timedwait(&si.cv, &si.mu, 1000000);
  }
  post_all(calls, n);
  return ncclSuccess;
}

ncclResult_t si_launch_call(struct ncclComm *c, int kind, int peer,
                            const si_arg_t *arg, cudaStream_t st) {
  si_call_t k;
  if (c->async_err == ncclInProgress) {
    si_misuse("an NCCL call on a comm still in progress");
    return ncclInvalidUsage;
  }
  k.c = c;
  k.kind = kind;
  k.peer = peer;
  k.arg = *arg;
  k.st = st;
  if (si_group_depth > 0) {
    if (group_ncalls == SI_MAXCALLS) return ncclInternalError;
    group_calls[group_ncalls++] = k;
    return ncclSuccess;
  }
  return launch(&k, 1);
}

ncclResult_t si_launch_group_end(void) {
  ncclResult_t r;
  int n = group_ncalls;
  group_ncalls = 0;
  if (n == 0) return ncclSuccess;
  r = launch(group_calls, n);
  return r;
}

void si_launch_free_all(void) {
  si_launch_t *l;
  while ((l = waiting) != NULL) {
    waiting = l->next;
    free(l);
  }
}
