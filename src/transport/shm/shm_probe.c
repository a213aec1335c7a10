/* SPDX-License-Identifier: Apache-2.0 */
/* shm_probe.c: whether a message from a peer waits here unmatched (the
 * transport's probe, for receives from any source). Shared memory moves
 * only while a thread of this rank works on it: the probe makes one
 * progress pass, which takes what the rings hold into early buffers, then
 * looks at them. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "transport/shm/shm_int.h"

/* An early message no receive has claimed yet. */
static int unclaimed(const coll_match_item_t *it) {
  return coll__shm_unx_of(it)->recv == NULL;
}

int coll__shm_probe(void *ctx, int peer, uint32_t tag) {
  shm_ep_t *ep = ctx;
  int p = coll__shm_member(ep, peer), hit;
  if (p < 0 || p == ep->rank) return 0;
  pthread_mutex_lock(&ep->mu);
  /* The pass may complete what another thread of this rank waits for:
   * wake it (on the condition variable, or in the kernel). */
  if (coll__shm_progress(ep)) {
    pthread_cond_broadcast(&ep->cv);
    if (ep->leader) {
      uint64_t one = 1;
      ssize_t n = write(ep->bell, &one, sizeof one);
      (void)n;
    }
  }
  hit = coll__match_find(&ep->peers[p].in.early, p, tag, unclaimed) != NULL;
  pthread_mutex_unlock(&ep->mu);
  return hit;
}
