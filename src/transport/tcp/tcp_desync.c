/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_desync.c: "where are you?" over the TCP transport. The rank whose
 * collective timed out queues a QUERY frame to every peer and sends one
 * urgent byte (MSG_OOB) beside it: a peer's loop thread normally reads a
 * connection only while a receive is posted on it, and the urgent byte
 * (kept out of the stream) raises SIGURG there (tcp_loop.c), which wakes
 * it to read on until the query, even when the peer is in user code or
 * blocked on another connection. The loop
 * thread answers with a POSITION frame read from the comm's position; the
 * asking rank's loop thread reads every connection meanwhile. The report
 * that follows travels as a REPORT frame just before the goodbye. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "transport/tcp/tcp_int.h"

/* A report kept in the cell (cut to fit) goes out whole in one frame. */
_Static_assert(COLL_TCP_REPORT_MAX == COLL_DESYNC_REPORT_MAX - 1,
               "a REPORT frame carries what a report cell holds");

/* How often the asking thread looks at the answers. */
#define ASK_TICK_NS 1000000L

/* Queues a control frame of the connection's own (smu held): once, while
 * an earlier one of the same request is still queued nothing more goes. */
static void ctl_queue(tcp_conn_t *c, tcp_req_t *r, uint8_t kind,
                      const void *payload, size_t len) {
  if (c->fd < 0 || coll__tcp_conn_stopped(c) ||
      atomic_load(&c->bye_state) != TCP_BYE_NONE)
    return;
  if (r->conn != NULL && !atomic_load(&r->done)) return;
  memset(r, 0, sizeof *r);
  r->conn = c;
  r->kind = TCP_REQ_SEND;
  r->buf = (char *)payload; /* sends only read it */
  r->len = len;
  r->flen = len; /* one frame whatever the frame cap: the peer expects so */
  atomic_init(&r->done, 0);
  coll__tcp_frame_encode(r->hdr, kind, 0, (uint32_t)c->t->rank, 0, len);
  if (c->sq_tail != NULL)
    c->sq_tail->next = r;
  else
    c->sq = r;
  c->sq_tail = r;
  coll__tcp_req_count(r);
}

int coll__tcp_sq_has_user_sends(const tcp_conn_t *c) {
  const tcp_req_t *r;
  for (r = c->sq; r != NULL; r = r->next)
    if (r != &c->ctl_query && r != &c->ctl_reply) return 1;
  return 0;
}

/* Writes what c's queue lets go now; the loop thread does the rest. */
static void ctl_push(tcp_conn_t *c) {
  char why[TCP_WHY_MAX];
  tcp_ev_t ev = coll__tcp_tx_progress(c, why);
  uv_mutex_unlock(&c->smu);
  coll__tcp_handle_ev(c, ev, why);
}

static void answer(tcp_conn_t *c) {
  tcp_transport_t *t = c->t;
  const coll_pos_t *pos = atomic_load(&t->pos);
  coll_pos_snap_t p;
  coll_tcp_pos_t w;
  memset(&p, 0, sizeof p);
  if (pos != NULL) coll__pos_read(pos, &p);
  memset(&w, 0, sizeof w);
  w.seq = p.seq;
  w.count = p.count;
  w.root1 = p.root >= 0 ? (uint32_t)p.root + 1 : 0;
  w.kind = (uint8_t)(p.seq != 0 ? p.kind : 0);
  w.op = (uint8_t)p.op;
  w.dtype = (uint8_t)p.dtype;
  w.in_call = (uint8_t)(p.seq != 0 && p.in_call);
  w.p2p = (uint8_t)p.p2p;
  w.p2p_peer = p.p2p != COLL_POS_P2P_NONE ? (uint32_t)p.p2p_peer : 0;
  w.p2p_tag = p.p2p != COLL_POS_P2P_NONE ? p.p2p_tag : 0;
  uv_mutex_lock(&c->smu);
  if (c->ctl_reply.conn != NULL && !atomic_load(&c->ctl_reply.done)) {
    uv_mutex_unlock(&c->smu); /* the last answer is still going out */
    return;
  }
  coll__tcp_pos_encode(c->ctl_reply_buf, &w);
  ctl_queue(c, &c->ctl_reply, COLL_TCP_K_POSITION, c->ctl_reply_buf,
            COLL_TCP_POS_BYTES);
  ctl_push(c);
}

void coll__tcp_answer_queries(tcp_transport_t *t) {
  int i;
  /* Every kick of the loop comes here: a plain load first keeps the
   * common case (no query) free of writes. */
  for (i = 0; i < t->world; i++)
    if (atomic_load_explicit(&t->conns[i].want_reply, memory_order_relaxed) &&
        atomic_exchange(&t->conns[i].want_reply, 0))
      answer(&t->conns[i]);
}

int coll__tcp_take_urgent(tcp_conn_t *c) {
  char b;
  /* Taken whatever it says; EINVAL: none is pending on this connection. */
  if (recv(c->fd, &b, 1, MSG_OOB | MSG_DONTWAIT) != 1) return 0;
  atomic_store(&c->drain, 1);
  return 1;
}

void coll__tcp_report_keep(tcp_transport_t *t, const char *report, size_t n) {
  if (n > COLL_TCP_REPORT_MAX) n = COLL_TCP_REPORT_MAX;
  (void)coll__report_cell_keep(&t->report, report, n);
}

tcp_ev_t coll__tcp_rx_control(tcp_conn_t *c, const coll_tcp_frame_t *f,
                              char *why) {
  const uint8_t *p = c->rbuf + c->rpos;
  coll_tcp_pos_t w;
  switch (f->kind) {
    case COLL_TCP_K_QUERY:
      if (f->len != 0) break;
      atomic_store(&c->drain, 0);
      atomic_store(&c->want_reply, 1);
      coll__tcp_loop_kick(c->t);
      return TCP_EV_NONE;
    case COLL_TCP_K_POSITION:
      if (f->len != COLL_TCP_POS_BYTES) break;
      if (!coll__tcp_pos_decode(p, &w) ||
          !coll__tcp_pos_valid(&w, (uint32_t)c->t->world)) {
        snprintf(why, TCP_WHY_MAX, "rank %d sent a malformed position",
                 c->peer);
        return TCP_EV_PROTO;
      }
      c->rpos += COLL_TCP_POS_BYTES;
      /* One answer per query: a second one changes nothing. */
      if (atomic_load(&c->answered)) return TCP_EV_NONE;
      memset(&c->answer, 0, sizeof c->answer);
      c->answer.seq = w.seq;
      c->answer.count = w.count;
      c->answer.kind = w.kind;
      c->answer.op = w.op;
      c->answer.dtype = w.dtype;
      c->answer.root = (int)w.root1 - 1;
      c->answer.in_call = w.in_call;
      c->answer.p2p = w.p2p;
      c->answer.p2p_peer = (int)w.p2p_peer;
      c->answer.p2p_tag = w.p2p_tag;
      atomic_store_explicit(&c->answered, 1, memory_order_release);
      return TCP_EV_NONE;
    case COLL_TCP_K_REPORT:
      if (!coll__tcp_report_valid(p, f->len)) {
        snprintf(why, TCP_WHY_MAX,
                 "rank %d sent a malformed report (%llu bytes)", c->peer,
                 (unsigned long long)f->len);
        return TCP_EV_PROTO;
      }
      coll__tcp_report_keep(c->t, (const char *)p, (size_t)f->len);
      c->rpos += (size_t)f->len;
      return TCP_EV_NONE;
    default: break;
  }
  snprintf(why, TCP_WHY_MAX, "rank %d sent a frame of kind %u with %llu bytes",
           c->peer, f->kind, (unsigned long long)f->len);
  return TCP_EV_PROTO;
}

/* Sends the query to c: the frame through the queue, the urgent byte
 * beside it. */
static void query(tcp_conn_t *c) {
  static const char urgent = '?';
  atomic_store(&c->answered, 0);
  uv_mutex_lock(&c->smu);
  ctl_queue(c, &c->ctl_query, COLL_TCP_K_QUERY, NULL, 0);
  if (c->fd >= 0 && !coll__tcp_conn_stopped(c)) {
    ssize_t n = send(c->fd, &urgent, 1, MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* a peer that does not take it does not answer */
  }
  ctl_push(c);
}

static int all_answered(tcp_transport_t *t) {
  int i;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (i == t->rank || c->fd < 0 || coll__tcp_conn_stopped(c)) continue;
    if (!atomic_load_explicit(&c->answered, memory_order_acquire)) return 0;
  }
  return 1;
}

void coll__tcp_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered) {
  tcp_transport_t *t = ctx;
  int64_t deadline = coll__now_ms() + budget_ms;
  int i;
  atomic_store(&t->asking, 1);
  for (i = 0; i < t->world; i++)
    if (i != t->rank) query(&t->conns[i]);
  coll__tcp_loop_kick(t);
  while (!all_answered(t) && coll__now_ms() < deadline) {
    struct timespec ts = {0, ASK_TICK_NS};
    nanosleep(&ts, NULL);
  }
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (i == t->rank ||
        !atomic_load_explicit(&c->answered, memory_order_acquire))
      continue;
    out[i] = c->answer;
    answered[i] = 1;
  }
  atomic_store(&t->asking, 0);
  coll__tcp_loop_kick(t);
}

static coll_report_cell_t *cell_of(void *arg, int i) {
  (void)i;
  return &((tcp_transport_t *)arg)->report;
}

/* One cell: this rank's report, or the first a peer's REPORT frame
 * brought (common/liveness.h). It holds what a frame carries: a report
 * kept here goes out whole in the goodbye. */
static coll_report_board_t board(void *ctx) {
  return (coll_report_board_t){1, 0, cell_of, ctx};
}

void coll__tcp_tell(void *ctx, const char *report) {
  coll_report_board_t b = board(ctx);
  coll__board_tell(&b, report);
}

int coll__tcp_heard(void *ctx, char *buf, size_t n) {
  coll_report_board_t b = board(ctx);
  return coll__board_heard(&b, -1, buf, n);
}
