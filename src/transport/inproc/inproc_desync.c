/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_desync.c: the desync slots of the in-process transport. Every
 * rank's position lives in the shared world, so asking is reading: every
 * rank answers at once, whatever its thread is doing. The report is left
 * in the world for the peers. */
#include <string.h>

#include "transport/common/liveness.h"
#include "transport/inproc/inproc.h"

/* The world outlives every endpoint in it, a destroyed one included. */
static const coll_pos_t *pos_of(void *arg, int r) {
  return &((inproc_world_t *)arg)->eps[r].pos;
}

void coll__inproc_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                      unsigned char *answered) {
  inproc_world_t *w = ((inproc_ep_t *)ctx)->w;
  (void)budget_ms;
  coll__ask_mapped(w->size, pos_of, w, out, answered);
}

void coll__inproc_tell(void *ctx, const char *report) {
  inproc_world_t *w = ((inproc_ep_t *)ctx)->w;
  (void)coll__report_cell_keep(&w->report, report, strlen(report));
}

int coll__inproc_heard(void *ctx, char *buf, size_t n) {
  return coll__report_cell_get(&((inproc_ep_t *)ctx)->w->report, buf, n);
}
