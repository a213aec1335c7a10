/* SPDX-License-Identifier: Apache-2.0 */
/* shm_desync.c: the desync hooks of the shared-memory transport. Every
 * rank keeps its position in the header of its own region, which every
 * peer maps: asking is reading. But a stopped process reads as where it
 * stopped, "in the allreduce" like the ranks that wait on it, so a peer is
 * asked first whether it is there: its liveness thread answers
 * (shm_heartbeat.c) whatever its own threads are doing, and one that does
 * not answer within the budget is reported as such. The rank that timed
 * out leaves its report in its header before it closes; the peers read it
 * from there. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "transport/shm/shm_int.h"

/* Between two looks at the answers. */
#define ASK_LOOK_MS 1

static shm_hdr_t *hdr_of(shm_ep_t *ep, int r) {
  if (r == ep->rank) return ep->hdr;
  return ep->peers[r].region;
}

/* 1 once peer r answered question `q` (counts wrap). */
static int answered_to(shm_hdr_t *h, uint32_t q) {
  return (int32_t)(atomic_load(&h->answer) - q) >= 0;
}

void coll__shm_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered) {
  shm_ep_t *ep = ctx;
  uint32_t *q = calloc((size_t)ep->world, sizeof *q);
  int64_t end = coll__now_ms() + budget_ms;
  int r, left = 0;
  if (q == NULL) return; /* nobody answered: the report says so */
  for (r = 0; r < ep->world; r++) {
    shm_hdr_t *h = hdr_of(ep, r);
    if (r == ep->rank || h == NULL) continue;
    q[r] = atomic_fetch_add(&h->ask, 1) + 1;
    coll__shm_futex_wake(&h->ask);
    left++;
  }
  for (;;) {
    for (r = 0; r < ep->world; r++) {
      shm_hdr_t *h = hdr_of(ep, r);
      if (r == ep->rank || h == NULL || answered[r] || !answered_to(h, q[r]))
        continue;
      /* It runs: where its memory says it is, it is. */
      coll__pos_read(&h->pos, &out[r]);
      answered[r] = 1;
      left--;
    }
    if (left == 0 || coll__now_ms() >= end) break;
    (void)poll(NULL, 0, ASK_LOOK_MS);
  }
  free(q);
}

static coll_report_cell_t *cell_of(void *arg, int r) {
  shm_hdr_t *h = hdr_of(arg, r);
  return h != NULL ? &h->report : NULL;
}

/* Every rank's report lies in its own header (common/liveness.h). */
static coll_report_board_t board(shm_ep_t *ep) {
  return (coll_report_board_t){ep->world, ep->rank, cell_of, ep};
}

void coll__shm_tell(void *ctx, const char *report) {
  coll_report_board_t b = board(ctx);
  coll__board_tell(&b, report);
}

int coll__shm_heard(void *ctx, char *buf, size_t n) {
  shm_ep_t *ep = ctx;
  coll_report_board_t b = board(ep);
  coll_origin_t seen;
  int first = -1;
  /* The origin is a comm rank: its member, if it is one. */
  if (coll__origin_cell_get(&ep->origins.heard, &seen))
    first = coll__shm_member(ep, seen.rank);
  return coll__board_heard(&b, first, buf, n);
}
