/* SPDX-License-Identifier: Apache-2.0 */
/* shm_desync.c: the desync hooks of the shared-memory transport. Every
 * rank keeps its position in the header of its own region, which every
 * peer maps: asking is reading, and every rank whose region is mapped
 * answers at once, whatever its threads are doing (a stopped process
 * reads as where it stopped). The rank that timed out leaves its report
 * in its header before it closes; the peers read it from there. */
#include "transport/shm/shm_int.h"

static shm_hdr_t *hdr_of(shm_ep_t *ep, int r) {
  if (r == ep->rank) return ep->hdr;
  return ep->peers[r].region;
}

static const coll_pos_t *pos_of(void *arg, int r) {
  shm_hdr_t *h = hdr_of(arg, r);
  return h != NULL ? &h->pos : NULL;
}

void coll__shm_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered) {
  shm_ep_t *ep = ctx;
  (void)budget_ms;
  coll__ask_mapped(ep->world, pos_of, ep, out, answered);
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
