/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_probe.c: whether a message from a peer waits here unmatched (the
 * transport's probe, for receives from any source). The loop thread reads
 * a connection only while receives are posted on it, so the probe reads
 * what the socket holds first (as a caller's wait drives it): early
 * messages are kept up to the transport's budget, and a larger one stops
 * at its header, which says its tag. */
#include <errno.h>

#include "transport/tcp/tcp_int.h"

/* The header reading stopped at (rpaused) is a new message on tag. */
static int held_header_is(const tcp_conn_t *c, uint32_t tag) {
  coll_tcp_frame_t f;
  if (!c->rpaused || c->rend - c->rpos < COLL_TCP_FRAME_BYTES) return 0;
  coll__tcp_frame_decode(c->rbuf + c->rpos, &f);
  return f.kind == COLL_TCP_K_DATA && f.tag == tag;
}

int coll__tcp_probe(void *ctx, int peer, uint32_t tag) {
  tcp_transport_t *t = ctx;
  tcp_conn_t *c;
  char why[TCP_WHY_MAX];
  tcp_ev_t ev = TCP_EV_NONE;
  int hit;
  if (peer < 0 || peer >= t->world) return 0;
  c = &t->conns[peer];
  uv_mutex_lock(&c->rmu);
  if (c->fd >= 0) ev = coll__tcp_rx_progress(c, 0, why);
  hit = coll__match_find(&c->unexp, c->peer, tag, NULL) != NULL;
  if (!hit) hit = held_header_is(c, tag);
  uv_mutex_unlock(&c->rmu);
  coll__tcp_handle_ev(c, ev, why);
  return hit;
}
