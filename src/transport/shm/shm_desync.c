/* SPDX-License-Identifier: Apache-2.0 */
/* shm_desync.c: the desync hooks of the shared-memory transport. Every
 * rank keeps its position in the header of its own region, which every
 * peer maps: asking is reading, and every rank whose region is mapped
 * answers at once, whatever its threads are doing (a stopped process
 * reads as where it stopped). The rank that timed out leaves its report
 * in its header before it closes; the peers read it from there. */
#include <string.h>

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

void coll__shm_tell(void *ctx, const char *report) {
  shm_ep_t *ep = ctx;
  (void)coll__report_cell_keep(&ep->hdr->report, report, strlen(report));
}

/* A report from region h, if its rank wrote one. */
static int copy_report(shm_hdr_t *h, char *buf, size_t n) {
  return h != NULL && coll__report_cell_get(&h->report, buf, n);
}

int coll__shm_heard(void *ctx, char *buf, size_t n) {
  shm_ep_t *ep = ctx;
  coll_origin_t seen;
  int r, first = -1;
  /* The origin is a comm rank: its member, if it is one. */
  if (coll__origin_cell_get(&ep->origins.heard, &seen))
    first = coll__shm_member(ep, seen.rank);
  /* The rank where the failure started first, then any that wrote one. */
  if (first >= 0 && copy_report(hdr_of(ep, first), buf, n)) return 1;
  for (r = 0; r < ep->world; r++)
    if (copy_report(hdr_of(ep, r), buf, n)) return 1;
  return 0;
}
