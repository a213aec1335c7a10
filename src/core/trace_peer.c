/* SPDX-License-Identifier: Apache-2.0 */
/* trace_peer.c: which peer a failed wait was on, for the flight recorder.
 * The transport layer names the peer of every request it posts in a small
 * per-thread ring; a failed wait looks its request up there. A collective
 * keeps only a few requests in flight, so the ring holds them all. */
#include "core/trace.h"

#define PEER_RING 16

static _Thread_local struct {
  const void *req[PEER_RING];
  int peer[PEER_RING];
  unsigned next;
  int failed; /* 0: none; else peer + 1 */
} tl_peers;

void coll__trace_note_req(const void *req, int peer) {
  unsigned i = tl_peers.next++ % PEER_RING;
  tl_peers.req[i] = req;
  tl_peers.peer[i] = peer;
}

void coll__trace_note_failed(const void *req) {
  unsigned k, i;
  /* Newest first: a freed request's address may be reused. */
  for (k = 1; k <= PEER_RING; k++) {
    i = (tl_peers.next - k) % PEER_RING;
    if (tl_peers.req[i] == req && req != NULL) {
      /* The first failure is the one the collective stopped on; what fails
       * after it is cleanup. */
      if (tl_peers.failed == 0) tl_peers.failed = tl_peers.peer[i] + 1;
      return;
    }
  }
}

void coll__trace_note_failed_peer(int peer) {
  if (tl_peers.failed == 0) tl_peers.failed = peer + 1;
}

int coll__trace_take_peer(void) {
  int p = tl_peers.failed - 1;
  tl_peers.failed = 0;
  return p;
}
