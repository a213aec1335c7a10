/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_rx.c: the receive side of a connection: the frame state machine,
 * matching against posted receives, and early ("unexpected") messages.
 * Every function here runs with the connection's rmu held. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport/tcp/tcp_int.h"

/* Staging for headers and small payloads: one recv() often brings a header
 * and its payload, or several small frames, at once. */
#define RBUF_SIZE COLL_TCP_RBUF_BYTES
/* A payload remainder this long is read straight into its destination. */
#define DIRECT_MIN (16 * 1024)
/* Spare early-message buffers kept per connection, and their largest size. */
#define UFREE_MAX 8
#define UFREE_BYTES_MAX ((size_t)16 << 20)
/* Syscalls per progress call, so one busy peer cannot hold the lock long. */
#define RX_BUDGET 32
/* A connection is read while receives are posted on it (or its peer is
 * closing). Reading for one receive may pass messages meant for others:
 * those are kept as early messages. Once nothing is posted, a message that
 * would push the kept bytes past this budget is left in the kernel (TCP
 * flow control holds its sender back) and read in place when its receive
 * is posted. */
#define UNEXP_CAP ((size_t)256 * 1024)

/* ---- early-message buffers ---------------------------------------------- */

static tcp_umsg_t *umsg_get(tcp_conn_t *c, size_t len) {
  tcp_umsg_t **pp, **best = NULL, *u;
  /* The smallest spare that fits and is not absurdly larger. */
  for (pp = &c->ufree; *pp != NULL; pp = &(*pp)->next) {
    size_t cap = (*pp)->cap;
    if (cap >= len && cap <= 4 * len + 65536 &&
        (best == NULL || cap < (*best)->cap))
      best = pp;
  }
  if (best != NULL) {
    u = *best;
    *best = u->next;
    c->nfree--;
  } else {
    u = calloc(1, sizeof *u);
    if (u == NULL) return NULL;
    if (len > 0 && (u->buf = malloc(len)) == NULL) {
      free(u);
      return NULL;
    }
    u->cap = len;
  }
  u->next = NULL;
  u->len = len;
  u->complete = 0;
  return u;
}

static void umsg_put(tcp_conn_t *c, tcp_umsg_t *u) {
  if (c->nfree < UFREE_MAX && u->cap <= UFREE_BYTES_MAX) {
    u->next = c->ufree;
    c->ufree = u;
    c->nfree++;
    return;
  }
  free(u->buf);
  free(u);
}

/* Room for `need` bytes, doubling so that a message of many frames costs
 * a few copies, not one per frame. */
static int umsg_grow(tcp_umsg_t *u, size_t need) {
  size_t cap = u->cap;
  char *p;
  if (need <= cap) return 0;
  cap = cap > need / 2 ? 2 * cap : need;
  if (cap < need) cap = need;
  p = realloc(u->buf, cap);
  if (p == NULL && cap > need) p = realloc(u->buf, cap = need);
  if (p == NULL) return -1;
  u->buf = p;
  u->cap = cap;
  return 0;
}

static tcp_umsg_t *umsg_of(const coll_match_item_t *it) {
  return COLL_MATCH_OWNER(it, tcp_umsg_t, m);
}

static tcp_req_t *req_of(const coll_match_item_t *it) {
  return COLL_MATCH_OWNER(it, tcp_req_t, m);
}

/* ---- posted receives ----------------------------------------------------- */

void coll__tcp_rx_append(tcp_conn_t *c, tcp_req_t *r) {
  coll__tcp_req_count(r);
  coll__match_push(&c->posted, &r->m, c->peer, r->tag);
}

/* The oldest posted receive for tag, taken off the list. */
static tcp_req_t *posted_take(tcp_conn_t *c, uint32_t tag) {
  coll_match_item_t *it = coll__match_take(&c->posted, c->peer, tag);
  return it != NULL ? req_of(it) : NULL;
}

/* Completes a receive with the length the sender sent. */
static void recv_done(tcp_req_t *r, size_t sent, int too_long) {
  r->got = sent;
  coll__tcp_req_complete(r, too_long ? COLL_ERR_LENGTH_MISMATCH : COLL_OK,
                         NULL);
}

int coll__tcp_rx_match(tcp_conn_t *c, tcp_req_t *r) {
  coll_match_item_t *it = coll__match_take(&c->unexp, c->peer, r->tag);
  tcp_umsg_t *u;
  if (it == NULL) return 0;
  u = umsg_of(it);
  c->unexp_bytes -= u->len;
  if (u->complete) {
    if (u->len <= r->len && u->len > 0) memcpy(r->buf, u->buf, u->len);
    recv_done(r, u->len, u->len > r->len);
  } else {
    /* Still arriving: what came so far moves over, the rest lands in place. */
    coll__tcp_req_count(r);
    c->cur_umsg = NULL;
    c->cur_req = r;
    if (u->len > r->len)
      c->cur_discard = 1;
    else if (c->cur_off > 0)
      memcpy(r->buf, u->buf, c->cur_off);
  }
  umsg_put(c, u);
  return 1;
}

coll_status_t coll__tcp_rx_loopback(tcp_conn_t *c, uint32_t tag,
                                    const void *buf, size_t len) {
  tcp_req_t *r = posted_take(c, tag);
  tcp_umsg_t *u;
  if (r != NULL) {
    if (len <= r->len && len > 0) memcpy(r->buf, buf, len);
    recv_done(r, len, len > r->len);
    return COLL_OK;
  }
  u = umsg_get(c, len);
  if (u == NULL)
    return coll_set_last_error(COLL_ERR_NO_MEMORY,
                               "tcp: no memory to keep a %zu-byte message to "
                               "self",
                               len);
  if (len > 0) memcpy(u->buf, buf, len);
  u->complete = 1;
  coll__match_push(&c->unexp, &u->m, c->peer, tag);
  c->unexp_bytes += len;
  return COLL_OK;
}

/* ---- the frame state machine --------------------------------------------- */

static void msg_done(tcp_conn_t *c) {
  if (c->cur_req != NULL)
    recv_done(c->cur_req, c->cur_total, c->cur_discard);
  else if (c->cur_umsg != NULL)
    c->cur_umsg->complete = 1;
  c->cur_req = NULL;
  c->cur_umsg = NULL;
  c->cur_discard = 0;
  c->in_msg = 0;
  c->rstate = RS_HDR;
}

static void frame_end(tcp_conn_t *c) {
  if (c->cur_more)
    c->rstate = RS_HDR; /* a CONT frame of the same message follows */
  else
    msg_done(c);
}

static void frame_begin(tcp_conn_t *c, const coll_tcp_frame_t *f) {
  c->cur_left = (size_t)f->len;
  c->bulk = c->cur_left >= DIRECT_MIN;
  c->cur_more = (f->flags & COLL_TCP_F_MORE) != 0;
  c->rstate = RS_BODY;
  if (c->cur_left == 0) frame_end(c);
}

static tcp_ev_t start_message(tcp_conn_t *c, const coll_tcp_frame_t *f,
                              char *why) {
  tcp_req_t *r = posted_take(c, f->tag);
  c->in_msg = 1;
  c->cur_tag = f->tag;
  c->cur_total = (size_t)f->len;
  c->cur_off = 0;
  c->cur_discard = 0;
  if (r != NULL) {
    c->cur_req = r;
    c->cur_discard = c->cur_total > r->len;
  } else {
    /* Early: buffered at the announced size, already checked against the
     * frame cap. */
    tcp_umsg_t *u = umsg_get(c, c->cur_total);
    if (u == NULL) {
      snprintf(why, TCP_WHY_MAX,
               "no memory for an early %zu-byte message from rank %d",
               c->cur_total, c->peer);
      return TCP_EV_NOMEM;
    }
    coll__match_push(&c->unexp, &u->m, c->peer, f->tag);
    c->unexp_bytes += c->cur_total;
    c->cur_umsg = u;
  }
  frame_begin(c, f);
  return TCP_EV_NONE;
}

static tcp_ev_t continue_message(tcp_conn_t *c, const coll_tcp_frame_t *f,
                                 char *why) {
  if (f->len > SIZE_MAX - c->cur_total) {
    snprintf(why, TCP_WHY_MAX, "rank %d sent a message longer than memory",
             c->peer);
    return TCP_EV_PROTO;
  }
  c->cur_total += (size_t)f->len;
  if (c->cur_req != NULL) {
    if (c->cur_total > c->cur_req->len) c->cur_discard = 1;
  } else {
    if (umsg_grow(c->cur_umsg, c->cur_total) != 0) {
      snprintf(why, TCP_WHY_MAX,
               "no memory for an early %zu-byte message from rank %d",
               c->cur_total, c->peer);
      return TCP_EV_NOMEM;
    }
    c->cur_umsg->len = c->cur_total;
    c->unexp_bytes += (size_t)f->len;
  }
  frame_begin(c, f);
  return TCP_EV_NONE;
}

/* 1 when the frame f would become (part of) an early message that does not
 * fit the budget while nothing is posted: better left in the kernel. */
static int hold_back(const tcp_conn_t *c, const coll_tcp_frame_t *f) {
  if (!coll__match_q_empty(&c->posted) || c->cur_req != NULL) return 0;
  return c->unexp_bytes + f->len > UNEXP_CAP;
}

/* The peer's last frame: a bye payload (staged behind the header, see
 * staged_need) that names where its failure started. It may come between
 * two frames of a message (a rank that fails stops mid-message): that
 * message fails with the rest of the peer's work. */
static tcp_ev_t on_goodbye(tcp_conn_t *c, const coll_tcp_frame_t *f,
                           char *why) {
  uint32_t origin, detail;
  uint16_t cause;
  if (f->len != COLL_TCP_BYE_BYTES) {
    snprintf(why, TCP_WHY_MAX,
             "rank %d sent a goodbye of %llu bytes, not %d (out of order?)",
             c->peer, (unsigned long long)f->len, COLL_TCP_BYE_BYTES);
    return TCP_EV_PROTO;
  }
  if (!coll__tcp_bye_decode(c->rbuf + c->rpos, &origin, &cause, &detail) ||
      origin >= (uint32_t)c->t->world) {
    snprintf(why, TCP_WHY_MAX, "rank %d sent a malformed goodbye", c->peer);
    return TCP_EV_PROTO;
  }
  c->bye.rank = (int)origin;
  c->bye.cause = cause;
  c->bye.detail = detail;
  if (!coll__origin_valid(&c->bye, c->t->world)) {
    snprintf(why, TCP_WHY_MAX,
             "rank %d sent a goodbye with unknown cause %u (detail %u)",
             c->peer, cause, detail);
    return TCP_EV_PROTO;
  }
  c->rpos += COLL_TCP_BYE_BYTES;
  c->rstate = RS_CLOSED;
  snprintf(why, TCP_WHY_MAX, "rank %d said goodbye", c->peer);
  if (c->bye.cause == COLL_CAUSE_DESTROYED && c->bye.rank == c->peer)
    return TCP_EV_GOODBYE;
  return TCP_EV_FAILED;
}

/* Bytes the header at rpos needs staged before it is judged: a goodbye
 * brings its payload along. */
static size_t staged_need(const tcp_conn_t *c) {
  const uint8_t *h = c->rbuf + c->rpos;
  if (c->rend - c->rpos < COLL_TCP_FRAME_BYTES) return COLL_TCP_FRAME_BYTES;
  if (h[6] == COLL_TCP_K_GOODBYE &&
      coll__get_le64(h + 16) == COLL_TCP_BYE_BYTES)
    return COLL_TCP_FRAME_BYTES + COLL_TCP_BYE_BYTES;
  /* So do the control frames, within their bounds (tcp_desync.c). */
  if ((h[6] == COLL_TCP_K_POSITION || h[6] == COLL_TCP_K_REPORT) &&
      coll__get_le64(h + 16) <= COLL_TCP_REPORT_MAX)
    return COLL_TCP_FRAME_BYTES + (size_t)coll__get_le64(h + 16);
  return COLL_TCP_FRAME_BYTES;
}

/* Judges a header before anything is allocated or written for it; a header
 * held back stays staged (TCP_EV_PAUSE) and is judged again later. */
static tcp_ev_t on_header(tcp_conn_t *c, int force, char *why) {
  coll_tcp_frame_t f;
  coll__tcp_frame_decode(c->rbuf + c->rpos, &f);
  if (f.magic == COLL_TCP_MAGIC && f.version == COLL_TCP_WIRE_VERSION &&
      f.src == (uint32_t)c->peer && f.len <= c->t->x.frame_cap &&
      (f.kind == COLL_TCP_K_DATA || f.kind == COLL_TCP_K_CONT) && !force &&
      hold_back(c, &f))
    return TCP_EV_PAUSE;
  c->rpos += COLL_TCP_FRAME_BYTES;
  if (f.magic != COLL_TCP_MAGIC) {
    snprintf(why, TCP_WHY_MAX, "rank %d sent a frame with bad magic 0x%08x",
             c->peer, f.magic);
  } else if (f.version != COLL_TCP_WIRE_VERSION) {
    snprintf(why, TCP_WHY_MAX, "rank %d sent a frame of wire version %u",
             c->peer, f.version);
  } else if (f.src != (uint32_t)c->peer) {
    snprintf(why, TCP_WHY_MAX,
             "a frame on rank %d's connection claims to come from rank %u",
             c->peer, f.src);
  } else if (f.kind == COLL_TCP_K_QUERY || f.kind == COLL_TCP_K_POSITION ||
             f.kind == COLL_TCP_K_REPORT) {
    return coll__tcp_rx_control(c, &f, why); /* their own bounds */
  } else if (f.len > c->t->x.frame_cap) {
    snprintf(why, TCP_WHY_MAX,
             "rank %d sent a frame of %llu bytes, over the cap of %zu", c->peer,
             (unsigned long long)f.len, c->t->x.frame_cap);
  } else if (f.kind == COLL_TCP_K_GOODBYE) {
    return on_goodbye(c, &f, why);
  } else if (f.kind == COLL_TCP_K_HEARTBEAT && f.len == 0) {
    return TCP_EV_NONE; /* its arrival is all it says (tcp_heartbeat.c) */
  } else if (f.kind == COLL_TCP_K_DATA && !c->in_msg) {
    return start_message(c, &f, why);
  } else if (f.kind == COLL_TCP_K_CONT && c->in_msg && f.tag == c->cur_tag) {
    return continue_message(c, &f, why);
  } else {
    snprintf(why, TCP_WHY_MAX,
             "rank %d sent a frame of kind %u out of order (tag %u)", c->peer,
             f.kind, f.tag);
  }
  return TCP_EV_PROTO;
}

/* Moves staged bytes into the current destination (or drops them). */
static void consume_staged(tcp_conn_t *c) {
  size_t k = c->rend - c->rpos;
  if (k > c->cur_left) k = c->cur_left;
  if (!c->cur_discard) {
    char *dst = c->cur_req ? c->cur_req->buf : c->cur_umsg->buf;
    if (k > 0) memcpy(dst + c->cur_off, c->rbuf + c->rpos, k);
  }
  c->rpos += k;
  c->cur_off += k;
  c->cur_left -= k;
  if (c->cur_left == 0) frame_end(c);
}

/* One read from the socket: straight into the destination when much of the
 * payload is missing, else into staging. After a direct payload staging
 * catches only the next frame's header (and a goodbye's payload, which
 * staged_need reads on): a bulk frame follows a bulk frame in a pipelined
 * ring, and its payload then lands directly too. A full staging tail drew
 * up to 64 KiB of every 1 MiB segment through a second copy (about 2.5 % of
 * a rank's CPU in `perf record` of a 2-rank 64 MiB allreduce); small frames
 * after a large one cost one more recv() instead. For the same reason a
 * header read with nothing staged, after a bulk frame, reads the header
 * alone: a whole 64 KiB message that had arrived came through staging
 * (recursive doubling's steps: memmove was 9 % of a rank's CPU in a 4-rank
 * 64 KiB allreduce, bench/tcp-profile.sh with PERF_RECORD=1). Returns bytes
 * read, 0 at EOF, -errno. */
/* One read into the frame's destination or the staging buffer. *asked is
 * what it asked for: a read that brings less found the socket empty. */
static ssize_t read_some(tcp_conn_t *c, size_t *asked) {
  ssize_t n;
  size_t want;
  if (c->rpos == c->rend) c->rpos = c->rend = 0;
  if (c->rstate == RS_BODY && !c->cur_discard && c->rpos == c->rend &&
      c->cur_left >= DIRECT_MIN) {
    struct iovec iov[2];
    size_t k;
    iov[0].iov_base =
        (c->cur_req ? c->cur_req->buf : c->cur_umsg->buf) + c->cur_off;
    iov[0].iov_len = c->cur_left;
    iov[1].iov_base = c->rbuf;
    iov[1].iov_len = COLL_TCP_FRAME_BYTES;
    *asked = c->cur_left + COLL_TCP_FRAME_BYTES;
    n = readv(c->fd, iov, 2);
    if (n <= 0) return n < 0 ? -errno : 0;
    k = (size_t)n < c->cur_left ? (size_t)n : c->cur_left;
    c->cur_off += k;
    c->cur_left -= k;
    c->rend = (size_t)n - k;
    if (c->cur_left == 0) frame_end(c);
    return n;
  }
  if (c->rpos > 0) { /* keep a partial header at the front */
    memmove(c->rbuf, c->rbuf + c->rpos, c->rend - c->rpos);
    c->rend -= c->rpos;
    c->rpos = 0;
  }
  want = c->bulk && c->rend == 0 && c->rstate == RS_HDR ? COLL_TCP_FRAME_BYTES
                                                        : RBUF_SIZE - c->rend;
  *asked = want;
  n = recv(c->fd, c->rbuf + c->rend, want, 0);
  if (n <= 0) return n < 0 ? -errno : 0;
  c->rend += (size_t)n;
  return n;
}

static tcp_ev_t lost(tcp_conn_t *c, ssize_t n, char *why) {
  if (n == 0)
    snprintf(why, TCP_WHY_MAX,
             "rank %d lost: connection closed without goodbye%s", c->peer,
             c->rstate == RS_BODY || c->rpos < c->rend ? " in mid-frame" : "");
  else
    snprintf(why, TCP_WHY_MAX, "rank %d lost: %s", c->peer, strerror((int)-n));
  atomic_store(&c->lost_err, (int)-n);
  c->rstate = RS_DEAD;
  return TCP_EV_LOST;
}

tcp_ev_t coll__tcp_rx_staged(tcp_conn_t *c, int force, char *why) {
  for (;;) {
    if (c->rstate == RS_HDR && c->rend - c->rpos >= staged_need(c)) {
      tcp_ev_t ev = on_header(c, force, why);
      if (ev == TCP_EV_PAUSE) {
        c->rpaused = 1;
        return TCP_EV_NONE;
      }
      if (ev != TCP_EV_NONE) return ev;
      continue;
    }
    if (c->rstate == RS_BODY && c->rpos < c->rend) {
      consume_staged(c);
      continue;
    }
    return TCP_EV_NONE;
  }
}

tcp_ev_t coll__tcp_rx_progress(tcp_conn_t *c, int force, char *why) {
  int budget = RX_BUDGET, empty = 0;
  if (c->rstate >= RS_CLOSED) return TCP_EV_NONE;
  if (coll__tcp_conn_stopped(c)) return TCP_EV_NONE;
  if (c->rbuf == NULL && (c->rbuf = malloc(RBUF_SIZE)) == NULL) {
    snprintf(why, TCP_WHY_MAX, "no memory for rank %d's receive buffer",
             c->peer);
    return TCP_EV_NOMEM;
  }
  c->rpaused = 0;
  for (;;) {
    ssize_t n;
    size_t asked = 0;
    tcp_ev_t ev = coll__tcp_rx_staged(c, force, why);
    if (ev != TCP_EV_NONE || c->rpaused) return ev;
    /* A read that brought less than it asked for emptied the socket: the
     * next would fail with EAGAIN, so poll() takes over (level-triggered,
     * it reports what comes later). In a 1 MiB allreduce over 4 ranks on 2
     * cores 12-28 of each rank's 29-53 receive calls came back empty, 5-7
     * without the extra read (BYTES=1 bench/tcp-profile.sh 4 1048576).
     * Reading to the end (a peer closing, an urgent byte, where a read
     * stops short at the mark) reads until the kernel says so. */
    if (empty || budget-- == 0) return TCP_EV_NONE;
    n = read_some(c, &asked);
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return TCP_EV_NONE;
    if (n <= 0) return lost(c, n, why);
    empty = (size_t)n < asked && !force && !atomic_load(&c->drain);
  }
}

void coll__tcp_rx_fail_all(tcp_conn_t *c, coll_status_t s, const char *text) {
  coll_match_item_t *it;
  while ((it = c->posted.head) != NULL) {
    coll__match_remove(&c->posted, it);
    coll__tcp_req_complete(req_of(it), s, text);
  }
  if (c->cur_req != NULL) coll__tcp_req_complete(c->cur_req, s, text);
  if (c->cur_umsg != NULL) {
    coll__match_remove(&c->unexp, &c->cur_umsg->m);
    c->unexp_bytes -= c->cur_umsg->len;
    umsg_put(c, c->cur_umsg);
  }
  c->cur_req = NULL;
  c->cur_umsg = NULL;
  c->in_msg = 0;
  c->rpaused = 0;
  c->rstate = RS_DEAD;
}

void coll__tcp_rx_free(tcp_conn_t *c) {
  coll_match_item_t *it;
  tcp_umsg_t *u;
  while ((it = c->unexp.head) != NULL) {
    u = umsg_of(it);
    coll__match_remove(&c->unexp, it);
    free(u->buf);
    free(u);
  }
  while ((u = c->ufree) != NULL) {
    c->ufree = u->next;
    free(u->buf);
    free(u);
  }
  free(c->rbuf);
  c->rbuf = NULL;
}
