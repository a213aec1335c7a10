/* SPDX-License-Identifier: Apache-2.0 */
/* standin_shrink.c: the stand-in's ncclCommShrink (NCCL 2.27.3+). The
 * survivors of a clique meet in a new clique named after the old one and
 * the parent's shrink count; ranks keep their order. As in NCCL, the call
 * waits until every survivor called it (a nonblocking parent: the new comm
 * is ncclInProgress until then), NCCL_SHRINK_ABORT first ends the parent's
 * work on this rank, an excluded rank or a bad list is refused, and ranks
 * whose lists differ all get an error instead of a comm. */
#include <stdio.h>
#include <string.h>

#include "standin_impl.h"

/* 1 if list (n ranks of a world-rank comm) is valid for rank `me`. */
static int list_ok(const int *list, int n, int world, int me) {
  int i, j;
  if (n < 0 || n >= world || (n > 0 && list == NULL)) return 0;
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

static ncclResult_t comm_shrink(ncclComm_t c, int *exclude, int nexclude,
                                ncclComm_t *out, ncclConfig_t *config,
                                int flags) {
  char id[NCCL_UNIQUE_ID_BYTES];
  si_clique_t *q;
  ncclResult_t r;
  int nonblocking, rank, i;
  if (out == NULL ||
      (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT))
    return ncclInvalidArgument;
  uv_mutex_lock(&si.mu);
  r = si_comm_ok(c, "ncclCommShrink");
  if (r != ncclSuccess) goto done;
  if (!list_ok(exclude, nexclude, c->q->world, c->rank)) {
    snprintf(si.last_error, sizeof si.last_error,
             "ncclCommShrink: rank %d passed an invalid exclude list", c->rank);
    r = ncclInvalidArgument;
    goto done;
  }
  /* A NULL config inherits the parent's; libcoll always passes one. */
  nonblocking = config != NULL ? config->blocking == 0 : c->nonblocking;
  if (flags == NCCL_SHRINK_ABORT) {
    c->revoked = 1;
    si.st.shrink_aborts++;
    si_progress_all(); /* its stuck kernels exit */
  }
  for (rank = c->rank, i = 0; i < nexclude; i++)
    if (exclude[i] < c->rank) rank--;
  memset(id, 0, sizeof id);
  snprintf(id, sizeof id, "shrink of %p #%u", (void *)c->q, c->shrinks++);
  q = find_clique(id);
  if (q != NULL &&
      (q->bad || !same_ranks(q->excl, q->nexcl, exclude, nexclude))) {
    snprintf(si.last_error, sizeof si.last_error,
             "ncclCommShrink: ranks passed different exclude lists");
    clique_spoil(q, ncclInvalidUsage);
    r = ncclInvalidUsage;
    goto done;
  }
  r = si_join(out, c->q->world - nexclude, id, rank, nonblocking);
  if (r != ncclSuccess) goto done;
  q = (*out)->q;
  if (!q->shrunk) {
    q->shrunk = 1;
    q->nexcl = nexclude;
    for (i = 0; i < nexclude; i++) q->excl[i] = exclude[i];
  }
  si.st.shrinks++;
  if (nonblocking)
    r = (*out)->async_err == ncclSuccess ? ncclSuccess : ncclInProgress;
  else
    r = si_wait_init(*out);
done:
  uv_mutex_unlock(&si.mu);
  return r;
}

void si_shrink_fill(coll_nccl_table_t *t) { t->nccl_comm_shrink = comm_shrink; }
