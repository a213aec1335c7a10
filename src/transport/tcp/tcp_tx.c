/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_tx.c: the send side of a connection: a FIFO of send requests written
 * with sendmsg() straight from the callers' buffers (header and payload in
 * one call, several small frames per call). Every function here runs with
 * the connection's smu held. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport/tcp/tcp_int.h"

#define IOV_BATCH 64
/* sendmsg() calls per progress call, so the lock is released regularly. */
#define TX_BUDGET 32

static void encode_frame(tcp_transport_t *t, tcp_req_t *r, uint8_t kind) {
  size_t left = r->len - r->fstart;
  r->flen = left < t->x.frame_cap ? left : t->x.frame_cap;
  r->hoff = 0;
  r->poff = 0;
  coll__tcp_frame_encode(r->hdr, kind,
                         r->fstart + r->flen < r->len ? COLL_TCP_F_MORE : 0,
                         (uint32_t)t->rank, r->tag, r->flen);
}

void coll__tcp_tx_prepare(tcp_transport_t *t, tcp_req_t *r) {
  r->fstart = 0;
  encode_frame(t, r, COLL_TCP_K_DATA);
}

/* The iovecs of the queue's current frames. A request with frames left
 * ends the batch: its next frame must go out before anything behind it. */
static int build_iov(tcp_conn_t *c, struct iovec *iov) {
  tcp_req_t *r;
  int n = 0;
  for (r = c->sq; r != NULL && n + 2 <= IOV_BATCH; r = r->next) {
    if (r->hoff < COLL_TCP_FRAME_BYTES) {
      iov[n].iov_base = r->hdr + r->hoff;
      iov[n++].iov_len = COLL_TCP_FRAME_BYTES - r->hoff;
    }
    if (r->poff < r->flen) {
      iov[n].iov_base = r->buf + r->fstart + r->poff;
      iov[n++].iov_len = r->flen - r->poff;
    }
    if (r->fstart + r->flen < r->len) break;
  }
  return n;
}

/* Accounts n written bytes against the queue, completing whole requests. */
static void advance(tcp_conn_t *c, size_t n) {
  tcp_req_t *r;
  while ((r = c->sq) != NULL) {
    size_t h = COLL_TCP_FRAME_BYTES - r->hoff, p;
    if (h > n) h = n;
    r->hoff += (unsigned)h;
    n -= h;
    p = r->flen - r->poff;
    if (p > n) p = n;
    r->poff += p;
    n -= p;
    if (r->hoff < COLL_TCP_FRAME_BYTES || r->poff < r->flen) break;
    if (r->fstart + r->flen < r->len) {
      r->fstart += r->flen;
      encode_frame(c->t, r, COLL_TCP_K_CONT);
      if (n == 0) break;
      continue;
    }
    c->sq = r->next;
    if (c->sq == NULL) c->sq_tail = NULL;
    coll__tcp_req_complete(r, COLL_OK, NULL);
  }
}

tcp_ev_t coll__tcp_tx_progress(tcp_conn_t *c, char *why) {
  struct iovec iov[IOV_BATCH];
  int budget = TX_BUDGET;
  if (coll__tcp_conn_stopped(c) || c->bye_state != TCP_BYE_NONE)
    return TCP_EV_NONE;
  while (c->sq != NULL && budget-- > 0) {
    struct msghdr mh;
    ssize_t n;
    size_t asked = 0, i;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)build_iov(c, iov);
    for (i = 0; i < mh.msg_iovlen; i++) asked += iov[i].iov_len;
    /* MSG_NOSIGNAL: a peer that vanished is an error code, not SIGPIPE. */
    n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return TCP_EV_NONE;
      snprintf(why, TCP_WHY_MAX, "rank %d lost: %s", c->peer, strerror(errno));
      atomic_store(&c->lost_err, errno);
      return TCP_EV_LOST;
    }
    advance(c, (size_t)n);
    /* The socket took less than it was given: it is full, and the next
     * call would fail with EAGAIN; the caller's poll() says when it has
     * room again. */
    if ((size_t)n < asked) return TCP_EV_NONE;
  }
  return TCP_EV_NONE;
}

void coll__tcp_tx_fail_all(tcp_conn_t *c, coll_status_t s, const char *text) {
  tcp_req_t *r;
  while ((r = c->sq) != NULL) {
    c->sq = r->next;
    coll__tcp_req_complete(r, s, text);
  }
  c->sq_tail = NULL;
}

/* A frame begun after which no more than this is left is finished before
 * the goodbye; a longer rest (a frame cap raised far past the pipeline
 * segment) is not copied, and the peer sees the connection lost. */
#define TAIL_REST_MAX ((size_t)64 << 20)

void coll__tcp_tx_farewell(tcp_conn_t *c, const coll_origin_t *o) {
  tcp_req_t *r = c->sq;
  size_t hrest = 0, prest = 0, off, rlen = 0;
  char report[COLL_DESYNC_REPORT_MAX];
  if (c->bye_state != TCP_BYE_NONE || c->fd < 0) return;
  /* A desync report goes just before the goodbye (tcp_desync.c). */
  if (coll__report_cell_get(&c->t->report, report, sizeof report))
    rlen = strlen(report);
  c->bye_state = TCP_BYE_FLUSHING;
  /* A frame begun must end before the goodbye can be read as one. Frames
   * not begun are dropped: the receiver fails the message they belong to
   * when it reads the goodbye. */
  if (r != NULL && (r->hoff > 0 || r->poff > 0)) {
    hrest = COLL_TCP_FRAME_BYTES - r->hoff;
    prest = r->flen - r->poff;
  }
  c->tail_len = hrest + prest + (rlen > 0 ? COLL_TCP_FRAME_BYTES + rlen : 0) +
                COLL_TCP_FRAME_BYTES + COLL_TCP_BYE_BYTES;
  c->tail_off = 0;
  c->tail = prest <= TAIL_REST_MAX ? malloc(c->tail_len) : NULL;
  if (c->tail == NULL) {
    /* Cannot say goodbye: end the stream, the peer sees a loss. */
    c->tail_len = 0;
    c->bye_state = TCP_BYE_SENT;
    shutdown(c->fd, SHUT_WR);
    return;
  }
  off = 0;
  if (hrest > 0) memcpy(c->tail, r->hdr + r->hoff, hrest);
  off += hrest;
  if (prest > 0) memcpy(c->tail + off, r->buf + r->fstart + r->poff, prest);
  off += prest;
  if (rlen > 0) {
    coll__tcp_frame_encode(c->tail + off, COLL_TCP_K_REPORT, 0,
                           (uint32_t)c->t->rank, 0, rlen);
    memcpy(c->tail + off + COLL_TCP_FRAME_BYTES, report, rlen);
    off += COLL_TCP_FRAME_BYTES + rlen;
  }
  coll__tcp_frame_encode(c->tail + off, COLL_TCP_K_GOODBYE, 0,
                         (uint32_t)c->t->rank, 0, COLL_TCP_BYE_BYTES);
  coll__tcp_bye_encode(c->tail + off + COLL_TCP_FRAME_BYTES, (uint32_t)o->rank,
                       (uint16_t)o->cause, o->detail);
  (void)coll__tcp_tx_flush(c);
}

int coll__tcp_tx_flush(tcp_conn_t *c) {
  if (c->bye_state != TCP_BYE_FLUSHING) return 1;
  while (c->tail_off < c->tail_len) {
    ssize_t n = send(c->fd, c->tail + c->tail_off, c->tail_len - c->tail_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->tail_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    break; /* the peer is gone: there is no one left to tell */
  }
  free(c->tail);
  c->tail = NULL;
  c->tail_len = c->tail_off = 0;
  c->bye_state = TCP_BYE_SENT;
  shutdown(c->fd, SHUT_WR);
  return 1;
}
