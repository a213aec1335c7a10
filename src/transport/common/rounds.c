/* SPDX-License-Identifier: Apache-2.0 */
/* rounds.c: posting and waiting on the rounds' flags (rounds.h), with the
 * waiter (waiter.h) spinning before the provider's sleep. */
#include "transport/common/rounds.h"

#include <inttypes.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/trace.h"

void coll__rounds_init(coll_rounds_t *R, const char *name, int rank, int world,
                       size_t slot_bytes, coll_round_ctl_t *const *ctl,
                       char *const *mem, const coll_rounds_ops_t *ops,
                       void *arg, const coll_wait_policy_t *policy) {
  R->name = name;
  R->rank = rank;
  R->world = world;
  R->slot_bytes = slot_bytes;
  R->ctl = ctl;
  R->mem = mem;
  R->round = 0;
  atomic_init(&R->waiters, 0);
  R->policy = *policy;
  R->ops = ops;
  R->arg = arg;
  R->allreduce_below = 0;
  R->others_below = 0;
  R->reduce_scatter_below = 0;
  R->direct_from = 0;
}

void coll__round_ctl_init(coll_round_ctl_t *c) {
  for (int k = 0; k < 3; k++) atomic_init(&c->flag[k].v, 0);
  memset(c->note, 0, sizeof c->note);
}

void coll__rounds_post(coll_rounds_t *R, int which, uint64_t v) {
  atomic_store_explicit(&R->ctl[R->rank]->flag[which].v, v,
                        memory_order_release);
  R->ops->wake(R->arg);
}

/* 1 if peer p left round v unfinished: gone before it posted OUT for v.
 * Its flags may all be there, but it gave up on the collective, so this
 * rank must not finish it either. */
static int gave_up(const coll_rounds_t *R, int p, uint64_t v) {
  return coll__rounds_flag(R, p, COLL_T_FLAG_OUT) < v &&
         R->ops->gone(R->arg, p);
}

int coll__rounds_blocked(const coll_rounds_t *R, int which, uint64_t v) {
  int behind = 0;
  if (R->ops->gone(R->arg, R->rank)) return 0;
  for (int p = 0; p < R->world; p++) {
    if (p == R->rank) continue;
    if (gave_up(R, p, v)) return 0;
    behind |= coll__rounds_flag(R, p, which) < v;
  }
  return behind;
}

/* One wait's state, for the waiter's look. */
typedef struct round_wait {
  coll_rounds_t *R;
  int which;
  uint64_t v;
  int behind;      /* the first peer behind, or -1 */
  int ender;       /* the rank whose failure ends the wait, or -1 */
  coll_status_t s; /* its failure */
  char why[192];
} round_wait_t;

/* Ends the wait with rank p's failure, if it has one. */
static int ended_by(round_wait_t *w, int p) {
  coll_status_t s = w->R->ops->why(w->R->arg, p, w->why, sizeof w->why);
  if (s == COLL_OK) return 0;
  w->s = s;
  w->ender = p;
  return 1;
}

static int look(void *arg) {
  round_wait_t *w = arg;
  coll_rounds_t *R = w->R;
  w->behind = -1;
  if (R->ops->gone(R->arg, R->rank) && ended_by(w, R->rank))
    return COLL_WAIT_DONE;
  for (int p = 0; p < R->world; p++) {
    if (p == R->rank) continue;
    if (coll__rounds_flag(R, p, w->which) < w->v) {
      if (w->behind < 0) w->behind = p;
      /* A peer lost while it is behind ends the wait; one that posted and
       * finished the round before it left does not. */
      if (ended_by(w, p) && coll__rounds_flag(R, p, w->which) < w->v)
        return COLL_WAIT_DONE;
      w->ender = -1;
    } else if (gave_up(R, p, w->v) && ended_by(w, p)) {
      return COLL_WAIT_DONE;
    }
  }
  return w->behind < 0 ? COLL_WAIT_DONE : COLL_WAIT_IDLE;
}

static void sleep_on(void *arg, int64_t ms) {
  round_wait_t *w = arg;
  w->R->ops->sleep(w->R->arg, w->R, w->which, w->v, ms);
}

static coll_status_t fail(const round_wait_t *w) {
  const coll_rounds_t *R = w->R;
  if (w->ender == R->rank)
    return coll__err(w->s, "%s rank %d: collective round %" PRIu64 ": %s",
                     R->name, R->rank, w->v, w->why);
  coll__trace_note_failed_peer(w->ender);
  return coll__err(w->s,
                   "%s rank %d: waiting for rank %d in collective round "
                   "%" PRIu64 ": %s",
                   R->name, R->rank, w->ender, w->v, w->why);
}

coll_status_t coll__rounds_wait(coll_rounds_t *R, int which, uint64_t v,
                                int64_t deadline_ms) {
  round_wait_t w = {R, which, v, -1, -1, COLL_OK, {0}};
  int done = look(&w) == COLL_WAIT_DONE;
  if (!done) {
    atomic_fetch_add(&R->waiters, 1);
    done = coll__wait_loop(&R->policy, coll__remaining_ms(deadline_ms), look,
                           sleep_on, &w);
    atomic_fetch_sub(&R->waiters, 1);
  }
  if (w.ender >= 0) return fail(&w);
  if (done) return COLL_OK;
  coll__trace_note_failed_peer(w.behind);
  return coll__err(COLL_ERR_TIMEOUT,
                   "%s: rank %d did not reach round %" PRIu64
                   " of the collective in time",
                   R->name, w.behind, v);
}

coll_status_t coll__rounds_read_begin(coll_rounds_t *R) {
  if (R->ops->read_begin == NULL)
    return coll__err(COLL_ERR_INTERNAL, "%s: no direct reads of peers' buffers",
                     R->name);
  return R->ops->read_begin(R->arg);
}

void coll__rounds_read_end(coll_rounds_t *R) {
  if (R->ops->read_end != NULL) R->ops->read_end(R->arg);
}
