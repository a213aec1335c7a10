/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_desync.c: the desync slots of the in-process transport. Every
 * rank's position lives in the shared world, so asking is reading: every
 * rank answers at once, whatever its thread is doing. The report is left
 * in the world's one cell for the peers (common/liveness.h). */
#include "transport/common/liveness.h"
#include "transport/inproc/inproc.h"

/* The world outlives every endpoint in it, a destroyed one included. */
static const coll_pos_t *pos_of(void *arg, int r) {
  return &((inproc_world_t *)arg)->eps[r].pos;
}

static coll_report_cell_t *cell_of(void *arg, int i) {
  (void)i;
  return &((inproc_world_t *)arg)->report;
}

/* One cell for the whole world: every rank's report goes there. */
static coll_report_board_t board(void *ctx) {
  return (coll_report_board_t){1, 0, cell_of, ((inproc_ep_t *)ctx)->w};
}

void coll__inproc_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                      unsigned char *answered) {
  inproc_world_t *w = ((inproc_ep_t *)ctx)->w;
  (void)budget_ms;
  coll__ask_mapped(w->size, pos_of, w, out, answered);
}

void coll__inproc_tell(void *ctx, const char *report) {
  coll_report_board_t b = board(ctx);
  coll__board_tell(&b, report);
}

int coll__inproc_heard(void *ctx, char *buf, size_t n) {
  coll_report_board_t b = board(ctx);
  return coll__board_heard(&b, -1, buf, n);
}
