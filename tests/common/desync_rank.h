/* SPDX-License-Identifier: Apache-2.0 */
/* desync_rank.h: the "who is missing" scenarios every transport's tests
 * run: ranks that time out in a collective while one rank is elsewhere,
 * and the check that every rank's error text names that rank and where
 * it was. Rank bodies record; the test thread checks. */
#ifndef COLL_TESTS_DESYNC_RANK_H
#define COLL_TESTS_DESYNC_RANK_H

#include <stdatomic.h>
#include <stddef.h>

#include "coll.h"

#define DS_WORLD 4
#define DS_ODD 3 /* the rank that is elsewhere */
/* The comm timeout of the scenarios: short, so a run takes seconds. */
#define DS_TIMEOUT_MS 1000
/* Bound of every wait of a rank for another. */
#define DS_WAIT_MS 60000
#define DS_TEXT 512

typedef enum {
  DS_SKIP = 0, /* the odd rank stays in user code during allreduce #2 */
  DS_RECV,     /* the odd rank waits in a recv from rank 0 that never comes */
  DS_STOPPED,  /* the odd rank is in allreduce #2 but stopped (SIGSTOP) */
} ds_scenario_t;

/* What the ranks record; in memory every rank can write (shared across
 * fork for processes). */
typedef struct ds_shared {
  atomic_int done[DS_WORLD];  /* the rank's failing call returned */
  atomic_int ready[DS_WORLD]; /* the rank is about to enter its call */
  atomic_int recorded[DS_WORLD];
  atomic_int go; /* DS_STOPPED: the odd rank is stopped, the others go on */
  /* DS_SKIP: the odd rank waits until its endpoint heard of the others'
   * failure before its call (set by a transport whose endpoint reads while
   * its rank is in user code: TCP's loop thread; shared memory learns
   * only in the call). */
  int heard_first;
  int status[DS_WORLD];
  char text[DS_WORLD][DS_TEXT];
} ds_shared_t;

void ds_shared_init(ds_shared_t *sh);

/* A rank's part of the scenario on comm c (world DS_WORLD): allreduce #1
 * on every rank (it must succeed), then allreduce #2 on all but the odd
 * rank, which stays in user code until the others returned and then calls
 * allreduce (DS_SKIP), or waits in coll_recv (DS_RECV), or enters
 * allreduce #2 too (DS_STOPPED: the test stops it, then sets `go` for
 * the others). The failing call's
 * status and text are recorded. Returns 0, or 1 if allreduce #1 failed
 * (recorded too). */
int ds_rank(coll_comm_t *c, int rank, ds_scenario_t sc, ds_shared_t *sh);

/* Checks every rank's record for scenario sc: a failure status (TIMEOUT on
 * the ranks in the collective) and a text that names the odd rank as the
 * scenario places it. A stopped rank only learns of it after it runs
 * again, when its own timeout may have passed too: its text must say that
 * the call timed out, nothing more. 0, or -1 with the first problem in
 * msg. */
int ds_check(const ds_shared_t *sh, ds_scenario_t sc, char *msg, size_t cap);

#endif
