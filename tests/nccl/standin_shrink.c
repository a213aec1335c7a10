/* SPDX-License-Identifier: Apache-2.0 */
/* standin_shrink.c: the stand-in's ncclCommSplit (NCCL 2.18+) and
 * ncclCommShrink (2.27.3+) as 2.28.9 runs them (init.cc:2545-2680): the
 * call checks its arguments (shrink refuses an empty list and a list with
 * the caller in it), NCCL_SHRINK_ABORT first stops the parent's kernels and
 * waits for its streams in the call, the parent must be ready (its error is
 * returned), *newcomm is set to NULL, and a job on a thread of its own,
 * carried by the PARENT (ncclInProgress until it ends), makes the child
 * and writes it into *newcomm when it ends (init.cc:1611-1615), a failed
 * child included. The survivors meet in a clique named after the parent's
 * clique and its child count; ranks keep their order (shrink) or follow
 * (key, rank) within their color (split). Ranks whose lists differ all
 * get an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin_impl.h"

/* Every rank's call to the k-th split of a clique: a split needs them all
 * (NCCL allgathers colors and keys over the parent). */
typedef struct si_split {
  si_clique_t *q;
  unsigned idx;
  unsigned called; /* bit r: rank r called */
  int color[SI_MAXR], key[SI_MAXR];
  struct si_split *next;
} si_split_t;

static si_split_t *splits; /* under si.mu; freed at uninstall */

/* 1 if list (n ranks of a world-rank comm) is valid for rank `me`. */
static int list_ok(const int *list, int n, int world, int me) {
  int i, j;
  if (list == NULL || n <= 0 || n >= world) return 0;
  for (i = 0; i < n; i++) {
    if (list[i] < 0 || list[i] >= world || list[i] == me) return 0;
    for (j = 0; j < i; j++)
      if (list[j] == list[i]) return 0;
  }
  return 1;
}

/* 1 if the two lists hold the same ranks (any order). */
static int same_ranks(const int *a, int na, const int *b, int nb) {
  int i, j, found;
  if (na != nb) return 0;
  for (i = 0; i < na; i++) {
    for (found = 0, j = 0; j < nb; j++) found |= a[i] == b[j];
    if (!found) return 0;
  }
  return 1;
}

/* Every rank already in the clique fails with r; so does every later one. */
static void clique_spoil(si_clique_t *q, ncclResult_t r) {
  int i;
  q->bad = 1;
  for (i = 0; i < q->world; i++)
    if (q->comms[i] != NULL && !q->comms[i]->freed) q->comms[i]->async_err = r;
  uv_cond_broadcast(&si.cv);
}

static si_clique_t *find_clique(const char *id) {
  si_clique_t *q;
  for (q = si.cliques; q != NULL; q = q->next)
    if (memcmp(q->id, id, sizeof q->id) == 0) return q;
  return NULL;
}

static si_split_t *split_get(si_clique_t *q, unsigned idx) {
  si_split_t *s;
  for (s = splits; s != NULL; s = s->next)
    if (s->q == q && s->idx == idx) return s;
  s = calloc(1, sizeof *s);
  s->q = q;
  s->idx = idx;
  s->next = splits;
  splits = s;
  return s;
}

/* A split's child: waits for every rank of the parent, then takes the
 * world and rank of this rank's color. 0 when aborted. */
static int split_place(si_job_t *job, si_split_t *sp) {
  struct ncclComm *p = job->parent;
  int world = p->q->world, me = p->rank, r, n = 0, below = 0;
  while ((sp->called & ((1u << world) - 1)) != ((1u << world) - 1u)) {
    if (p->abort_flag || p->freed) return 0;
    si_wait_a_bit();
  }
  for (r = 0; r < world; r++) {
    if (sp->color[r] != sp->color[me]) continue;
    n++;
    if (sp->key[r] < sp->key[me] || (sp->key[r] == sp->key[me] && r < me))
      below++;
  }
  job->world = n;
  job->rank = below;
  snprintf(job->id + strlen(job->id), sizeof job->id - strlen(job->id),
           " color %d", sp->color[me]);
  return 1;
}

/* The job: NCCL's ncclCommInitRankFunc for a child. */
static void child_run(void *p) {
  si_job_t *job = p;
  struct ncclComm *parent = job->parent, *child = NULL;
  ncclResult_t r = ncclSuccess;
  si_clique_t *q;
  int i, waited = 0;
  if (job->delay_us > 0) {
    struct timespec ts = {job->delay_us / 1000000,
                          (long)(job->delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  uv_mutex_lock(&si.mu);
  if (job->nexcl < 0 && !split_place(job, split_get(parent->q, job->rank)))
    r = ncclSystemError;
  q = r == ncclSuccess ? find_clique(job->id) : NULL;
  if (q != NULL && job->nexcl >= 0 &&
      (q->bad || !same_ranks(q->excl, q->nexcl, job->excl, job->nexcl))) {
    snprintf(si.last_error, sizeof si.last_error,
             "ncclCommShrink: ranks passed different exclude lists");
    clique_spoil(q, ncclInvalidUsage);
    r = ncclInvalidUsage;
  }
  if (r == ncclSuccess)
    r = si_join(&child, job->world, job->id, job->rank, parent->dev,
                parent->bus, job->nonblocking);
  if (r == ncclSuccess && job->nexcl >= 0 && !child->q->shrunk) {
    child->q->shrunk = 1;
    child->q->nexcl = job->nexcl;
    for (i = 0; i < job->nexcl; i++) child->q->excl[i] = job->excl[i];
  }
  /* The parent's abort flags reach the child's init (childAbortFlag). */
  while (r == ncclSuccess && child->async_err == ncclInProgress &&
         !parent->abort_flag && !parent->freed && waited++ < 20000)
    si_wait_a_bit();
  if (r == ncclSuccess && child->async_err == ncclInProgress)
    child->async_err = ncclSystemError;
  if (r == ncclSuccess) r = child->async_err;
  *job->out = child; /* NCCL writes it when the job ends, failed or not */
  if (!parent->freed && parent->job == job &&
      parent->async_err == ncclInProgress)
    parent->async_err = r;
  job->result = r;
  job->done = 1;
  uv_cond_broadcast(&si.cv);
  uv_mutex_unlock(&si.mu);
}

/* Starts the child job on the parent; a blocking parent waits for it. */
static ncclResult_t start_child(si_job_t *job) {
  struct ncclComm *parent = job->parent;
  ncclResult_t r;
  parent->async_err = ncclInProgress;
  parent->job = job;
  job->refs = 1;
  r = si_job_start(job, child_run);
  if (r != ncclSuccess) return r;
  if (parent->nonblocking) return ncclInProgress;
  while (!job->done) si_wait_a_bit();
  si_job_join(parent);
  return job->result;
}

static si_job_t *child_job(struct ncclComm *c, ncclComm_t *out,
                           ncclConfig_t *config, const char *kind) {
  si_job_t *job = calloc(1, sizeof *job);
  job->kind = SI_JOB_CHILD;
  job->delay_us = si.cfg.launch_delay_us;
  job->parent = c;
  job->out = out;
  job->nonblocking = si_nonblocking(config, c->nonblocking);
  snprintf(job->id, sizeof job->id, "%s of %p #%u", kind, (void *)c->q,
           c->children++);
  *out = NULL; /* until the job ends (init.cc:2573) */
  return job;
}

static ncclResult_t comm_shrink(ncclComm_t c, int *exclude, int nexclude,
                                ncclComm_t *out, ncclConfig_t *config,
                                int flags) {
  si_job_t *job;
  ncclResult_t r;
  int i;
  if (out == NULL ||
      (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT))
    return ncclInvalidArgument;
  r = si_enter(c, "ncclCommShrink");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  if (flags == NCCL_SHRINK_ABORT) {
    /* Stops the parent's kernels and waits, in the call, for its device
     * stream, which waits on the user's streams (init.cc:2650-2654). */
    c->abort_flag = 1;
    si_wait_streams(c, "ncclCommShrink(NCCL_SHRINK_ABORT)");
    c->abort_flag = 0;
  }
  if (!list_ok(exclude, nexclude, c->q->world, c->rank)) {
    snprintf(si.last_error, sizeof si.last_error,
             "ncclCommShrink: rank %d passed an invalid exclude list (%d "
             "ranks)",
             c->rank, nexclude);
    si_leave(c);
    return ncclInvalidArgument;
  }
  r = si_ensure_ready(c);
  if (r != ncclSuccess) {
    si_leave(c);
    return r;
  }
  job = child_job(c, out, config, "shrink");
  job->world = c->q->world - nexclude;
  job->nexcl = nexclude;
  for (job->rank = c->rank, i = 0; i < nexclude; i++) {
    job->excl[i] = exclude[i];
    if (exclude[i] < c->rank) job->rank--;
  }
  si.st.shrinks++;
  if (flags == NCCL_SHRINK_ABORT) si.st.shrink_aborts++;
  r = start_child(job);
  si_leave(c);
  return r;
}

static ncclResult_t comm_split(ncclComm_t c, int color, int key,
                               ncclComm_t *out, ncclConfig_t *config) {
  si_split_t *sp;
  si_job_t *job;
  ncclResult_t r;
  if (out == NULL || color < 0)
    return ncclInvalidArgument; /* NOCOLOR: not
                                    modelled */
  r = si_enter(c, "ncclCommSplit");
  if (r != ncclSuccess) {
    si_leave(NULL);
    return r;
  }
  r = si_ensure_ready(c);
  if (r != ncclSuccess) {
    si_leave(c);
    return r;
  }
  job = child_job(c, out, config, "split");
  job->nexcl = -1;
  job->rank = (int)(c->children - 1); /* the split's index until placed */
  sp = split_get(c->q, (unsigned)job->rank);
  sp->called |= 1u << c->rank;
  sp->color[c->rank] = color;
  sp->key[c->rank] = key;
  uv_cond_broadcast(&si.cv);
  si.st.splits++;
  r = start_child(job);
  si_leave(c);
  return r;
}

void si_shrink_free_all(void) {
  si_split_t *s;
  while ((s = splits) != NULL) {
    splits = s->next;
    free(s);
  }
}

void si_shrink_fill(coll_nccl_table_t *t) {
  if (si.cfg.version >= 21800) t->nccl_comm_split = comm_split;
  if (si.cfg.version >= 22703) t->nccl_comm_shrink = comm_shrink;
}
