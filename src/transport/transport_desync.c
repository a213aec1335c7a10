/* SPDX-License-Identifier: Apache-2.0 */
/* transport_desync.c: "who is missing" when a collective times out. The
 * rank that timed out asks every peer where it is over the transport's
 * control path (answered even while the peer is in user code or blocked in
 * another call), writes the report and hands it to the peers before the
 * failure reaches them, so every rank's error names the same ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "transport/endpoint.h"
#include "transport/transport.h"

/* The longest the peers are asked for: an answer takes a round trip, and
 * every rank waits on this one's failure meanwhile. */
#define DESYNC_BUDGET_MAX_MS 1000

coll_pos_t *coll__t_position(coll_transport_t *t) { return t->pos; }

void coll__t_adopt(coll_transport_t *t, int64_t timeout_ms) {
  t->timeout_ms = timeout_ms;
}

/* min(1 s, half the timeout): never longer than the timeout itself. */
static int64_t ask_budget(int64_t timeout_ms) {
  if (timeout_ms < 0 || timeout_ms / 2 > DESYNC_BUDGET_MAX_MS)
    return DESYNC_BUDGET_MAX_MS;
  return timeout_ms / 2 > 0 ? timeout_ms / 2 : 1;
}

static int all_answered(const unsigned char *answered, int world) {
  for (int r = 0; r < world; r++)
    if (!answered[r]) return 0;
  return 1;
}

void coll__t_desync(coll_transport_t *t) {
  coll_pos_snap_t *pos;
  unsigned char *answered;
  coll_origin_t seen;
  char report[COLL_DESYNC_REPORT_MAX];
  if (t->p.ask == NULL) return;
  /* A timeout this rank only heard of: the rank where it started asks. */
  if (coll__t_origin(t, &seen) && seen.rank != t->rank) return;
  if (!coll__report_cell_claim(&t->report)) return;
  pos = calloc((size_t)t->world, sizeof *pos);
  answered = calloc((size_t)t->world, 1);
  if (pos == NULL || answered == NULL) {
    /* Best effort: the failure goes out with the old text. */
    free(pos);
    free(answered);
    return;
  }
  t->p.ask(t->ctx, ask_budget(t->timeout_ms), pos, answered);
  coll__pos_read(t->pos, &pos[t->rank]);
  answered[t->rank] = 1;
  /* A peer that timed out first asked while every rank was there; those
   * that did not answer this rank may have left since, their call ended by
   * that peer's report. On a loaded host that report is the better one,
   * and sharing it keeps every rank's text the same. */
  if (all_answered(answered, t->world) || t->p.heard == NULL ||
      !t->p.heard(t->ctx, report, sizeof report))
    coll__desync_report(t->rank, t->world, pos, answered, t->timeout_ms, report,
                        sizeof report);
  free(pos);
  free(answered);
  coll__report_cell_publish(&t->report, report, strlen(report));
  COLL_WARN(COLL_LOG_COLL, "%s", report);
  if (t->p.tell != NULL) t->p.tell(t->ctx, report);
}

int coll__t_report(coll_transport_t *t, char *buf, size_t n) {
  coll_origin_t o;
  /* A failure that started elsewhere: the report of the rank where it
   * started, which every rank it ends shares (this rank may have asked
   * too, and heard less while the failure reached it). */
  if (coll__t_origin(t, &o) && o.rank != t->rank && t->p.heard != NULL &&
      t->p.heard(t->ctx, buf, n))
    return 1;
  if (coll__report_cell_get(&t->report, buf, n)) return 1;
  return t->p.heard != NULL && t->p.heard(t->ctx, buf, n);
}

void coll__t_origin_text(coll_transport_t *t, const coll_origin_t *o, char *buf,
                         size_t n) {
  char report[COLL_DESYNC_REPORT_MAX];
  size_t k;
  coll__origin_text(o, t->rank, buf, n);
  if (o->cause != COLL_CAUSE_TIMEOUT ||
      !coll__t_report(t, report, sizeof report))
    return;
  k = strlen(buf);
  if (k + 2 < n) snprintf(buf + k, n - k, ": %s", report);
}
