/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_probe.c: whether a send waits here unmatched (the transport's
 * probe, for receives from any source). Sends to an endpoint queue at that
 * endpoint, so a look under its lock is the whole answer. */
#include "transport/inproc/inproc.h"

/* A send no receive has started to copy yet. */
static int queued(const coll_match_item_t *it) {
  return inproc_state(inproc_req_of(it)) == INPROC_QUEUED;
}

int coll__inproc_probe(void *ctx, int peer, uint32_t tag) {
  inproc_ep_t *ep = ctx;
  int hit;
  uv_mutex_lock(&ep->mu);
  hit = coll__match_find(&ep->unexpected, peer, tag, queued) != NULL;
  uv_mutex_unlock(&ep->mu);
  return hit;
}
