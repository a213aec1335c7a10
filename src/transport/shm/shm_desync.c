/* SPDX-License-Identifier: Apache-2.0 */
/* shm_desync.c: the desync hooks of the shared-memory transport. Every
 * rank keeps its position in the header of its own region, which every
 * peer maps: asking is reading, and every rank whose region is mapped
 * answers at once, whatever its threads are doing (a stopped process
 * reads as where it stopped). The rank that timed out leaves its report
 * in its header before it closes; the peers read it from there. */
#include <stdio.h>

#include "transport/shm/shm_int.h"

static shm_hdr_t *hdr_of(shm_ep_t *ep, int r) {
  if (r == ep->rank) return ep->hdr;
  return ep->peers[r].region;
}

void coll__shm_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered) {
  shm_ep_t *ep = ctx;
  int r;
  (void)budget_ms;
  for (r = 0; r < ep->world; r++) {
    shm_hdr_t *h = hdr_of(ep, r);
    if (h == NULL) continue;
    coll__pos_read(&h->pos, &out[r]);
    answered[r] = 1;
  }
}

void coll__shm_tell(void *ctx, const char *report) {
  shm_ep_t *ep = ctx;
  if (atomic_load(&ep->hdr->report_ready)) return;
  snprintf(ep->hdr->report, sizeof ep->hdr->report, "%s", report);
  atomic_store_explicit(&ep->hdr->report_ready, 1, memory_order_release);
}

/* A report from region h, if its rank wrote one. */
static int copy_report(shm_hdr_t *h, char *buf, size_t n) {
  if (h == NULL ||
      !atomic_load_explicit(&h->report_ready, memory_order_acquire))
    return 0;
  /* Bounded whatever a peer wrote: %.*s stops at the array's end. */
  snprintf(buf, n, "%.*s", (int)sizeof h->report - 1, h->report);
  return 1;
}

int coll__shm_heard(void *ctx, char *buf, size_t n) {
  shm_ep_t *ep = ctx;
  int r, first = -1;
  pthread_mutex_lock(&ep->mu);
  /* The origin is a comm rank: its member, if it is one. */
  if (ep->seen_set) first = coll__shm_member(ep, ep->seen.rank);
  pthread_mutex_unlock(&ep->mu);
  /* The rank where the failure started first, then any that wrote one. */
  if (first >= 0 && copy_report(hdr_of(ep, first), buf, n)) return 1;
  for (r = 0; r < ep->world; r++)
    if (copy_report(hdr_of(ep, r), buf, n)) return 1;
  return 0;
}
