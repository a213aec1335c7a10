/* SPDX-License-Identifier: Apache-2.0 */
/* shm_progress.c: moving cells through the rings, matching messages to
 * receives, and failing what a lost peer leaves pending. Every function
 * here runs under the endpoint lock (ep->mu). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/shm/shm_int.h"

void coll__shm_complete(shm_req_t *r, coll_status_t s) {
  r->done = 1;
  r->status = s;
}

void coll__shm_ring_bell(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  shm_hdr_t *h = pr->region;
  uint64_t one = 1;
  /* Pairs with the sleeper's fence between announcing itself and looking
   * at the rings one last time: either it sees what we published, or we
   * see it sleeping. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&h->sleeping, memory_order_relaxed) > 0) {
    ssize_t n = write(pr->bell, &one, sizeof one);
    (void)n; /* a full counter (EAGAIN) still wakes */
  }
}

/* Hands a complete unexpected message to its receive and frees it. */
static void unx_deliver(shm_rx_t *in, shm_unx_t *u, shm_req_t *r) {
  size_t n = u->len < r->len ? u->len : r->len;
  if (n > 0) memcpy(r->rbuf, u->data, n);
  r->got = u->len;
  coll__shm_complete(r, u->len > r->len ? COLL_ERR_LENGTH_MISMATCH : COLL_OK);
  coll__match_remove(&in->early, &u->m);
  free(u->data);
  free(u);
}

/* An early message no receive has claimed yet (one still arriving may
 * have one). */
static int unclaimed(const coll_match_item_t *it) {
  return coll__shm_unx_of(it)->recv == NULL;
}

void coll__shm_post_recv(shm_ep_t *ep, shm_req_t *r) {
  shm_peer_t *pr = &ep->peers[r->peer];
  shm_rx_t *in = &pr->in;
  coll_match_item_t *it =
      coll__match_find(&in->early, r->peer, r->tag, unclaimed);
  if (it != NULL) {
    shm_unx_t *u = coll__shm_unx_of(it);
    if (u->off == u->len)
      unx_deliver(in, u, r);
    else
      u->recv = r; /* completes when the rest arrives */
    return;
  }
  if (pr->lost == 2) {
    coll__shm_complete(r, pr->lost_status);
    return;
  }
  coll__match_push(&in->posted, &r->m, r->peer, r->tag);
}

/* The oldest receive posted for (p, tag), taken out of the queue. */
static shm_req_t *take_posted(shm_rx_t *in, int p, uint32_t tag) {
  coll_match_item_t *it = coll__match_take(&in->posted, p, tag);
  return it != NULL ? coll__shm_req_of(it) : NULL;
}

/* Peer p sent something this rank cannot take: its requests fail with s
 * and the text "rank p ..." (p's comm rank). */
static void peer_fail(shm_ep_t *ep, int p, coll_status_t s, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void peer_fail(shm_ep_t *ep, int p, coll_status_t s, const char *fmt,
                      ...) {
  shm_peer_t *pr = &ep->peers[p];
  coll_origin_t o =
      s == COLL_ERR_PROTOCOL
          ? (coll_origin_t){coll__shm_name(ep, p), COLL_CAUSE_PROTOCOL, 0}
          : coll__origin_local(coll__shm_name(ep, ep->rank), s);
  va_list ap;
  int n;
  if (pr->lost == 2) return;
  coll__shm_note_origin(ep, &o);
  pr->lost_origin = o;
  n = snprintf(pr->why, sizeof pr->why, "rank %d ", coll__shm_name(ep, p));
  va_start(ap, fmt);
  vsnprintf(pr->why + n, sizeof pr->why - (size_t)n, fmt, ap);
  va_end(ap);
  pr->lost = 1;
  pr->lost_status = s;
}

/* Opens a message from its first cell: its receive, or a buffer. */
static int rx_open(shm_ep_t *ep, int p, const shm_cell_hdr_t *h) {
  shm_rx_t *in = &ep->peers[p].in;
  shm_unx_t *u;
  in->active = 1;
  in->tag = h->tag;
  in->len = (size_t)h->msg_len;
  in->off = 0;
  in->unx = NULL;
  in->recv = take_posted(in, p, h->tag);
  if (in->recv != NULL) {
    in->recv->got = in->len;
    return 0;
  }
  u = calloc(1, sizeof *u);
  if (u != NULL && in->len > 0) u->data = malloc(in->len);
  if (u == NULL || (in->len > 0 && u->data == NULL)) {
    free(u);
    in->active = 0;
    peer_fail(ep, p, COLL_ERR_NO_MEMORY,
              "sent a message of %zu bytes that found no receive, and "
              "there is no memory to hold it",
              in->len);
    return -1;
  }
  u->len = in->len;
  coll__match_push(&in->early, &u->m, p, h->tag);
  in->unx = u;
  return 0;
}

static void rx_close(shm_rx_t *in) {
  shm_req_t *r = in->recv;
  shm_unx_t *u = in->unx;
  in->active = 0;
  in->recv = NULL;
  in->unx = NULL;
  if (r != NULL)
    coll__shm_complete(r, r->got > r->len ? COLL_ERR_LENGTH_MISMATCH : COLL_OK);
  else if (u != NULL && u->recv != NULL)
    unx_deliver(in, u, u->recv);
}

/* One cell from peer p: 0, or -1 when it is malformed (p is then failed). */
static int rx_cell(shm_ep_t *ep, int p, const shm_cell_hdr_t *h,
                   const uint8_t *data) {
  shm_rx_t *in = &ep->peers[p].in;
  size_t chunk = h->chunk;
  if (h->first) {
    if (in->active) {
      peer_fail(ep, p, COLL_ERR_PROTOCOL,
                "began a message before its last one (%zu of %zu "
                "bytes) ended",
                in->off, in->len);
      return -1;
    }
    if (rx_open(ep, p, h) != 0) return -1;
  } else if (!in->active || h->tag != in->tag || h->msg_len != in->len) {
    peer_fail(ep, p, COLL_ERR_PROTOCOL,
              "sent a cell of a message that was not begun (%zu, "
              "%zu)",
              (size_t)h->msg_len, in->len);
    return -1;
  }
  if (chunk > SHM_CELL_DATA || chunk > in->len - in->off ||
      (chunk == 0 && in->len != 0)) {
    peer_fail(ep, p, COLL_ERR_PROTOCOL,
              "sent a cell of %zu bytes where at most %zu remain", chunk,
              in->len - in->off);
    in->active = 0;
    return -1;
  }
  if (in->recv != NULL) {
    shm_req_t *r = in->recv;
    if (in->off < r->len)
      memcpy(r->rbuf + in->off, data,
             chunk < r->len - in->off ? chunk : r->len - in->off);
  } else if (in->unx != NULL && chunk > 0) {
    memcpy(in->unx->data + in->off, data, chunk);
    in->unx->off += chunk;
  } /* else: its receive was failed; the rest is dropped */
  in->off += chunk;
  if (in->off == in->len) rx_close(in);
  return 0;
}

static int rx_progress(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  uint64_t head, tail;
  int moved = 0;
  if (pr->lost == 2) return 0;
  head = atomic_load_explicit(&pr->rx->head, memory_order_relaxed);
  tail = atomic_load_explicit(&pr->rx->tail, memory_order_acquire);
  if (tail - head > ep->lay.cells) {
    peer_fail(ep, p, COLL_ERR_PROTOCOL, "claims %llu cells in a ring of %u",
              (unsigned long long)(tail - head), ep->lay.cells);
    return 1;
  }
  while (head != tail) {
    shm_cell_hdr_t *c = coll__shm_cell(pr->rx, &ep->lay, head);
    /* One copy of the header: the peer cannot change it under the
     * checks. */
    shm_cell_hdr_t h = *c;
    if (rx_cell(ep, p, &h, (const uint8_t *)(c + 1)) != 0) return 1;
    head++;
    moved = 1;
  }
  if (moved) {
    atomic_store_explicit(&pr->rx->head, head, memory_order_release);
    coll__shm_ring_bell(ep, p);
  }
  return moved;
}

static int tx_progress(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  uint64_t tail, cells = ep->lay.cells;
  int moved = 0;
  if (pr->sq_head == NULL || pr->lost) return 0;
  tail = atomic_load_explicit(&pr->tx->tail, memory_order_relaxed);
  while (pr->sq_head != NULL) {
    shm_req_t *r = pr->sq_head;
    shm_cell_hdr_t *c;
    size_t chunk = r->len - r->off;
    if (tail - pr->tx_head >= cells) {
      pr->tx_head = atomic_load_explicit(&pr->tx->head, memory_order_acquire);
      if (tail - pr->tx_head >= cells) break;
    }
    if (chunk > SHM_CELL_DATA) chunk = SHM_CELL_DATA;
    c = coll__shm_cell(pr->tx, &ep->lay, tail);
    c->tag = r->tag;
    c->chunk = (uint32_t)chunk;
    c->msg_len = r->len;
    c->first = r->off == 0;
    if (chunk > 0) memcpy(c + 1, r->sbuf + r->off, chunk);
    r->off += chunk;
    tail++;
    moved = 1;
    if (r->off == r->len) {
      pr->sq_head = r->next;
      if (pr->sq_head == NULL) pr->sq_tail = NULL;
      coll__shm_complete(r, COLL_OK);
    }
  }
  if (moved) {
    atomic_store_explicit(&pr->tx->tail, tail, memory_order_release);
    coll__shm_ring_bell(ep, p);
  }
  return moved;
}

static void end_req(shm_req_t *r, coll_status_t s, int here) {
  r->closed_here = here;
  coll__shm_complete(r, s);
}

/* Fails the pending requests of peer p with s (here: by this endpoint's
 * own close); messages that arrived whole
 * stay receivable. */
static void fail_peer_reqs(shm_ep_t *ep, int p, coll_status_t s, int here) {
  shm_peer_t *pr = &ep->peers[p];
  shm_rx_t *in = &pr->in;
  coll_match_item_t *it;
  while (pr->sq_head != NULL) {
    shm_req_t *r = pr->sq_head;
    pr->sq_head = r->next;
    end_req(r, s, here);
  }
  pr->sq_tail = NULL;
  while ((it = in->posted.head) != NULL) {
    coll__match_remove(&in->posted, it);
    end_req(coll__shm_req_of(it), s, here);
  }
  if (in->recv != NULL) end_req(in->recv, s, here);
  in->recv = NULL;
  for (it = in->early.head; it != NULL; it = it->next) {
    shm_unx_t *u = coll__shm_unx_of(it);
    if (u->off == u->len) continue;
    if (u->recv != NULL) end_req(u->recv, s, here);
    u->recv = NULL;
  }
}

void coll__shm_fail_all(shm_ep_t *ep, coll_status_t s) {
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank) fail_peer_reqs(ep, p, s, 1);
}

void coll__shm_note_origin(shm_ep_t *ep, const coll_origin_t *o) {
  /* The first failure sticks; a peer that only left is kept apart
   * (shm_int.h), so that a failure heard after it wins. */
  if (o->cause == COLL_CAUSE_DESTROYED)
    (void)coll__origin_cell_keep(&ep->left, o);
  else
    coll__origins_heard(&ep->origins, o);
}

/* Peer p's loss, once what it sent before it went was read: its pending
 * requests fail and, unless it left on its own (its owner destroyed its
 * comm, which ends only the work that involves it), the endpoint closes
 * with the loss's origin: a death, an abort or any failure of one rank
 * releases every wait of this one, on any peer, and reaches every other
 * rank through this rank's close. */
static void lost_done(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  coll_origin_t o = pr->lost_origin;
  fail_peer_reqs(ep, p, pr->lost_status, 0);
  pr->lost = 2;
  if (o.cause != COLL_CAUSE_DESTROYED || o.rank != coll__shm_name(ep, p))
    coll__shm_close_locked(ep, &o, coll__origin_req_status(&o));
}

void coll__shm_peer_lost(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  shm_hdr_t *ph = pr->region;
  coll_origin_t o = {coll__shm_name(ep, p), COLL_CAUSE_LOST, 0};
  if (pr->lost) return;
  /* A peer that closed says where its failure began; one that died says
   * nothing, and is itself the origin. What it says is a comm rank, which
   * may be no member (a failure that began on another host). */
  if (atomic_load_explicit(&ph->origin_set, memory_order_acquire)) {
    coll_origin_t said = {ph->origin_rank, ph->origin_cause, ph->origin_detail};
    if (coll__origin_valid(&said, ep->name_world)) o = said;
  }
  coll__shm_note_origin(ep, &o);
  coll__origin_text(&o, coll__shm_name(ep, ep->rank), pr->why, sizeof pr->why);
  pr->lost = 1;
  pr->lost_status = coll__origin_req_status(&o);
  pr->lost_origin = o;
  if (ep->closed) return; /* nothing pending is left to fail */
  (void)rx_progress(ep, p);
  if (pr->lost == 1) lost_done(ep, p);
}

int coll__shm_progress(shm_ep_t *ep) {
  int moved = 0;
  for (int p = 0; p < ep->world && !ep->closed; p++) {
    shm_peer_t *pr = &ep->peers[p];
    if (p == ep->rank || pr->lost == 2) continue;
    if (!pr->lost && atomic_load_explicit(&((shm_hdr_t *)pr->region)->gone,
                                          memory_order_acquire)) {
      coll__shm_peer_lost(ep, p);
      moved = 1;
      continue;
    }
    moved |= tx_progress(ep, p);
    moved |= rx_progress(ep, p);
    if (pr->lost == 1) {
      /* It broke the protocol, or a message from it found no memory. */
      lost_done(ep, p);
      moved = 1;
    }
  }
  return moved;
}
