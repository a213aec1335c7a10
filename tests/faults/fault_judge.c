/* SPDX-License-Identifier: Apache-2.0 */
/* fault_judge.c: the verdict on a fault job (fault_judge.h). */
#include "fault_judge.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

/* Bounds for a loaded machine: what a test asserts, not what the figures
 * show (tools/fault-harness.sh prints those). */
#define RELEASE_SLACK_MS 3000

/* The earliest a stopped rank may be named after the stop: T of silence,
 * counted from its last sign of life. That sign comes every fiftieth of T
 * while its liveness thread runs, but a loaded machine can starve that
 * thread just before the stop, so its silence began a little earlier:
 * T less a twentieth (a stall judged from its last data, as before, was
 * named up to a quarter of T early). */
static int64_t not_before(int64_t hb) { return hb - hb / 20; }

void fj_expect_for(const fj_spec_t *s, fj_expect_t *e) {
  memset(e, 0, sizeof *e);
  e->origins[0] = s->victim;
  e->norigins = 1;
  e->release_ms = RELEASE_SLACK_MS;
  switch (s->fault) {
    case FJ_NONE: e->all_ok = 1; break;
    case FJ_KILL:
      e->word = "lost";
      e->status = COLL_ERR_PEER_LOST;
      break;
    case FJ_ABORT:
      e->word = "aborted";
      e->status = COLL_ERR_ABORTED;
      e->victim_status = COLL_ERR_ABORTED;
      break;
    case FJ_STOP:
      if (s->hb_ms == 0) {
        /* No heartbeats: the comm's timeout, and the report must say the
         * stopped rank did not answer (it cannot say where it is). */
        e->word = "did not answer";
        e->status = COLL_ERR_TIMEOUT;
        e->release_ms = s->timeout_ms + RELEASE_SLACK_MS;
      } else if (s->hb_ms > 0 && s->stop_ms >= 0 && s->stop_ms < s->hb_ms) {
        e->all_ok = 1;
      } else {
        int64_t hb = s->hb_ms > 0 ? s->hb_ms : 10000;
        e->word = "unresponsive";
        e->status = COLL_ERR_PEER_LOST;
        e->victim_word = "unresponsive";
        e->not_before_ms = not_before(hb);
        e->release_ms = hb + RELEASE_SLACK_MS;
        /* The others may all wait on another, late rank, never on the
         * stopped one: nobody may name it then. */
        e->ok_allowed = s->late >= 0 && s->late != s->victim;
      }
      break;
    case FJ_GARBAGE: e->word = "broke the wire protocol"; break;
    case FJ_PARTITION: {
      int64_t hb = s->hb_ms > 0 ? s->hb_ms : 10000;
      e->origins[0] = s->proxy_lo;
      e->origins[1] = s->proxy_hi;
      e->norigins = 2;
      e->word = "unresponsive";
      e->status = COLL_ERR_PEER_LOST;
      e->not_before_ms = not_before(hb);
      e->release_ms = hb + RELEASE_SLACK_MS;
      e->ok_allowed = 1;
      break;
    }
  }
}

/* The allreduces every rank must have done when none failed: the count
 * asked for, or as many as rank 0 did in a stream (at least to the
 * fault's). */
static int calls_due(const fj_spec_t *s, const fj_result_t *res) {
  if (s->after != FJ_STREAM) return s->before + 1 + s->after;
  return res->r[0].ok_calls > s->before ? res->r[0].ok_calls : s->before + 1;
}

/* Every rank ended every allreduce right. */
static int all_right(const fj_spec_t *s, const fj_result_t *res) {
  for (int r = 0; r < s->world; r++)
    if (res->r[r].status != 0 || res->r[r].exit_code != 0 ||
        res->r[r].ok_calls != calls_due(s, res))
      return 0;
  return 1;
}

static void bad(fj_verdict_t *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void bad(fj_verdict_t *v, const char *fmt, ...) {
  va_list ap;
  if (!v->ok) return; /* the first problem is the one reported */
  v->ok = 0;
  va_start(ap, fmt);
  vsnprintf(v->msg, sizeof v->msg, fmt, ap);
  va_end(ap);
}

/* "rank N <word>" for an origin N of e. */
static int names_origin(const fj_expect_t *e, const char *text) {
  char want[96];
  for (int i = 0; i < e->norigins; i++) {
    snprintf(want, sizeof want, "rank %d %s", e->origins[i], e->word);
    if (strstr(text, want) != NULL) return 1;
  }
  return 0;
}

static void judge_ok(const fj_spec_t *s, const fj_result_t *res, int r,
                     fj_verdict_t *v) {
  const fj_rank_out_t *o = &res->r[r];
  int want = calls_due(s, res);
  if (o->status != 0)
    bad(v, "rank %d: allreduce %d failed (%s): %s", r, o->failed_at,
        coll_status_name((coll_status_t)o->status), o->text);
  else if (o->ok_calls != want)
    bad(v, "rank %d: %d of %d allreduces done", r, o->ok_calls, want);
  else
    v->named++;
}

/* The victim: killed, or what it must say of itself. */
static void judge_victim(const fj_spec_t *s, const fj_rank_out_t *o,
                         const fj_expect_t *e, fj_verdict_t *v) {
  char want[96];
  int r = s->victim;
  if (s->fault == FJ_KILL) {
    if (o->exit_code != 128 + 9)
      bad(v, "rank %d was killed but exited %d", r, o->exit_code);
    return;
  }
  if (s->fault == FJ_STOP && s->stop_ms < 0) return; /* never ran again */
  v->judged++;
  if (o->status == 0) {
    bad(v, "rank %d (the %s's victim) never failed", r,
        fj_fault_name(s->fault));
    return;
  }
  snprintf(want, sizeof want, "rank %d %s", r,
           e->victim_word != NULL ? e->victim_word : "");
  if (e->victim_word != NULL && strstr(o->text, want) == NULL)
    bad(v, "rank %d does not name itself (\"%s\"): %s: %s", r, want,
        coll_status_name((coll_status_t)o->status), o->text);
  else if (e->victim_status != 0 && o->status != e->victim_status)
    bad(v, "rank %d: want %s, got %s: %s", r,
        coll_status_name((coll_status_t)e->victim_status),
        coll_status_name((coll_status_t)o->status), o->text);
  else
    v->named++;
}

static void judge_survivor(const fj_spec_t *s, const fj_result_t *res,
                           const fj_expect_t *e, int r, fj_verdict_t *v) {
  const fj_rank_out_t *o = &res->r[r];
  int64_t took;
  v->judged++;
  if (o->status == 0) {
    bad(v, "rank %d never failed", r);
    return;
  }
  if (!names_origin(e, o->text) || (e->status != 0 && o->status != e->status)) {
    bad(v, "rank %d: want %s naming rank %d %s, got %s: %s", r,
        e->status ? coll_status_name((coll_status_t)e->status) : "a failure",
        e->origins[0], e->word, coll_status_name((coll_status_t)o->status),
        o->text);
    return;
  }
  v->named++;
  /* A rank inside its call at the fault is released from the fault on; one
   * that entered later (the late rank) from its entry: it must fail at
   * once. */
  took =
      o->end_ms - (o->enter_ms > res->fault_ms ? o->enter_ms : res->fault_ms);
  v->release_ms[r] = took;
  if (took > v->slowest_ms) v->slowest_ms = took;
  if (v->fastest_ms < 0 || took < v->fastest_ms) v->fastest_ms = took;
  if (took > e->release_ms)
    bad(v, "rank %d was released %lld ms after the %s (bound %lld)%s: %s", r,
        (long long)took,
        o->enter_ms > res->fault_ms ? "call it entered after the fault began"
                                    : "fault",
        (long long)e->release_ms, r == s->late ? " (the late rank)" : "",
        o->text);
  else if (o->enter_ms <= res->fault_ms && took < e->not_before_ms)
    bad(v, "rank %d named it %lld ms after the fault, before %lld: %s", r,
        (long long)took, (long long)e->not_before_ms, o->text);
}

void fj_judge(const fj_spec_t *s, const fj_result_t *res,
              const fj_expect_t *want, fj_verdict_t *v) {
  fj_expect_t ok_now;
  const fj_expect_t *e = want;
  if (want->ok_allowed && !res->hung && all_right(s, res)) {
    ok_now = *want;
    ok_now.all_ok = 1;
    e = &ok_now;
  }
  memset(v, 0, sizeof *v);
  v->ok = 1;
  v->fastest_ms = -1;
  for (int r = 0; r < FJ_MAXW; r++) v->release_ms[r] = -1;
  for (int r = 0; r < s->world; r++) v->wrong += res->r[r].wrong;
  if (v->wrong != 0) bad(v, "%d allreduces returned COLL_OK wrong", v->wrong);
  if (res->hung) {
    for (int r = 0; r < s->world; r++)
      if (res->r[r].exit_code == -1 ||
          (res->r[r].status == 0 && !e->all_ok &&
           !(s->fault == FJ_KILL && r == s->victim)))
        bad(v, "rank %d hung: still running %lld ms after the fault", r,
            (long long)s->bound_ms);
    bad(v, "a rank hung");
  }
  for (int r = 0; r < s->world; r++) {
    const fj_rank_out_t *o = &res->r[r];
    int victim = s->fault != FJ_NONE && s->fault != FJ_PARTITION &&
                 r == s->victim && !e->all_ok;
    if (!victim && o->exit_code != 0)
      bad(v, "rank %d exited %d: %s", r, o->exit_code, o->text);
    if (e->all_ok) {
      v->judged++;
      judge_ok(s, res, r, v);
    } else if (victim) {
      judge_victim(s, o, e, v);
    } else {
      judge_survivor(s, res, e, r, v);
    }
  }
}
