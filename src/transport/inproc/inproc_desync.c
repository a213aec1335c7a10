/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_desync.c: the desync hooks of the in-process transport. Every
 * rank's position lives in the shared world, so asking is reading: every
 * rank answers at once, whatever its thread is doing. The report is left
 * in the world for the peers. */
#include <stdio.h>

#include "transport/inproc/inproc.h"

void coll__inproc_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                      unsigned char *answered) {
  inproc_ep_t *ep = ctx;
  inproc_world_t *w = ep->w;
  int r;
  (void)budget_ms;
  /* The world outlives every endpoint in it, a destroyed one included. */
  for (r = 0; r < w->size; r++) {
    coll__pos_read(&w->eps[r].pos, &out[r]);
    answered[r] = 1;
  }
}

void coll__inproc_tell(void *ctx, const char *report) {
  inproc_world_t *w = ((inproc_ep_t *)ctx)->w;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&w->report_claimed, &expected, 1)) return;
  snprintf(w->report, sizeof w->report, "%s", report);
  atomic_store_explicit(&w->report_ready, 1, memory_order_release);
}

int coll__inproc_heard(void *ctx, char *buf, size_t n) {
  inproc_world_t *w = ((inproc_ep_t *)ctx)->w;
  if (!atomic_load_explicit(&w->report_ready, memory_order_acquire)) return 0;
  snprintf(buf, n, "%s", w->report);
  return 1;
}
