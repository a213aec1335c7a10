/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_int.h: the TCP transport's internal objects (transport, connection,
 * request, early message) and the calls between its files.
 *
 * Threads. The caller's thread posts and waits, and while it waits it
 * drives every connection with pending work itself, in both directions
 * (a ring step's send to the right moves while it waits for the left):
 * it reads and writes those sockets and sleeps in one poll() over them,
 * so an arrival wakes one thread, as with a plain blocking socket. Two
 * callers may post and wait at once (a comm's worker and the user's
 * point-to-point calls); both then drive. A request may be waited by
 * another thread than the one that posted it. One libuv loop thread per
 * transport is the backstop: it always watches every connection for the
 * peer closing (so a lost peer fails everything at once, whoever waits),
 * sends heartbeats, answers desync queries, and moves the pending work
 * while no caller waits (requests posted and not waited on). Abort may
 * come from any thread.
 *
 * Locks. Each connection has a receive lock (rmu: matching lists and the
 * receive state machine) and a send lock (smu: the send queue and the
 * write state). Bytes move into or out of a caller's buffer only under the
 * lock of that direction. No thread ever holds two of these locks. */
#ifndef COLL_TRANSPORT_TCP_INT_H
#define COLL_TRANSPORT_TCP_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "coll_transport.h"
#include "core/env.h"
#include "core/origin.h"
#include "core/position.h"
#include "transport/common/liveness.h"
#include "transport/common/match.h"
#include "transport/common/silence.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/wire.h"

/* Longest congestion control name and its NUL (the kernel's
 * TCP_CA_NAME_MAX). */
#define COLL_TCP_CC_NAME_MAX 16

/* Knobs the public options do not carry; tests and benchmarks set them. */
typedef struct coll_tcp_xopts {
  size_t frame_cap;      /* longest frame payload sent or accepted */
  int64_t hs_timeout_ms; /* per accepted connection's handshake */
  int sock_buf;          /* SO_SNDBUF/SO_RCVBUF; 0 = kernel autotuning */
  /* SO_SNDBUF/SO_RCVBUF of a connection within a host whose ranks
   * outnumber its cores, set once it is up (0: sock_buf stays; < 0:
   * COLL_TCP_LOCAL_BUFFER_BYTES). */
  int local_buf;
  unsigned host_cores; /* the host's cores for that (0: coll__host_cores) */
  /* wait() retries without sleeping this long (< 0: COLL_TCP_SPIN_US) */
  int64_t spin_ns;
  /* A peer silent this long while a request on its connection is pending
   * is unresponsive (0: no heartbeats; < 0: COLL_HEARTBEAT_TIMEOUT_MS). */
  int64_t hb_timeout_ms;
  /* The congestion control of every connection to a peer ("": the host's
   * default; COLL_TCP_CONGESTION fills it when empty). */
  char congestion[COLL_TCP_CC_NAME_MAX];
} coll_tcp_xopts_t;

#define COLL_TCP_FRAME_CAP_DEFAULT ((size_t)1 << 30)
#define COLL_TCP_HS_TIMEOUT_DEFAULT 5000
#define COLL_TCP_SOCK_BUF_DEFAULT (4 << 20)
/* wait() drives its connections without sleeping this long first, giving
 * the core away (sched_yield) between turns, then sleeps in poll(). On a
 * loaded 2-core machine, 2 ranks, allreduce under coll-run (coll-perf
 * --peer-protocol): 4 KiB 18-19 us against 24-25 us sleeping at once,
 * 64 KiB 46 against 59 us; spinning without yielding was worse than not
 * spinning (4 KiB 40-44 us), as a spinning rank takes the core its peer
 * needs; 50 us with yields no better than 20. */
#define COLL_TCP_SPIN_NS_DEFAULT ((int64_t)COLL_DEFAULT_TCP_SPIN_US * 1000)

void coll__tcp_xopts_default(coll_tcp_xopts_t *x);

/* coll__tcp_transport_create with the extra knobs. One thread. */
coll_status_t coll__tcp_transport_create_x(const coll_tcp_opts_t *o,
                                           const coll_tcp_rdv_t *rdv,
                                           const coll_tcp_xopts_t *x,
                                           coll_transport_t **out);

/* Listens, publishes, and connects the full mesh: on success fds[j] is the
 * established socket to rank j (fds[rank] = -1). One thread. */
coll_status_t coll__tcp_mesh_connect(const coll_tcp_opts_t *o,
                                     const coll_tcp_rdv_t *rdv,
                                     const coll_tcp_xopts_t *x, int *fds);

/* coll__tcp_mesh_connect on a listener the caller made (lfd >= 0, taken
 * over: closed on return) whose address it already told its peers. */
coll_status_t coll__tcp_mesh_connect_fd(const coll_tcp_opts_t *o,
                                        const coll_tcp_rdv_t *rdv,
                                        const coll_tcp_xopts_t *x, int lfd,
                                        int *fds);

/* ------------------------------------------------------------------------ */

typedef struct tcp_transport tcp_transport_t;
typedef struct tcp_elastic tcp_elastic_t; /* tcp_elastic.h */
typedef struct tcp_conn tcp_conn_t;

/* A request's direction; also the index of its connection's counter. */
enum { TCP_REQ_RECV = 0, TCP_REQ_SEND = 1 };

/* One posted send or receive. Owned by the caller between isend/irecv and
 * wait; sits in at most one list of its connection while pending. */
typedef struct tcp_req {
  struct tcp_req *next; /* send: in its connection's send queue */
  coll_match_item_t m;  /* receive: in its connection's posted receives */
  tcp_conn_t *conn;
  int kind;
  uint32_t tag;
  char *buf;  /* send: payload (never written); recv: destination */
  size_t len; /* send: payload bytes; recv: capacity */
  size_t got; /* recv: the length the sender sent */
  /* send progress: the frame being written */
  size_t fstart, flen, poff;
  unsigned hoff;
  uint8_t hdr[COLL_TCP_FRAME_BYTES];
  int counted; /* counted in its connection's npend (under its lock) */
  /* completion: status and errtext are written before done (release) */
  coll_status_t status;
  const char *errtext; /* sticky text of the failure; stable until destroy */
  atomic_int done;
} tcp_req_t;

/* A message that arrived before its receive was posted (or is arriving). */
typedef struct tcp_umsg {
  struct tcp_umsg *next; /* among the spare buffers */
  coll_match_item_t m;   /* in its connection's early messages */
  size_t len;            /* bytes announced so far (grows with CONT frames) */
  size_t cap;            /* allocated bytes of buf */
  char *buf;
  int complete;
} tcp_umsg_t;

enum { RS_HDR = 0, RS_BODY, RS_CLOSED, RS_DEAD };

/* A failure that sticks to a connection or the whole transport: claimed
 * once, then the origin and text are written, then the status published
 * (release). */
typedef struct tcp_fail {
  atomic_int claimed;
  atomic_int status; /* coll_status_t, 0 while none */
  coll_origin_t origin;
  char text[256];
} tcp_fail_t;

struct tcp_conn {
  tcp_transport_t *t;
  int peer;
  int fd; /* -1 for the loopback connection to self */

  /* loop thread only */
  uv_poll_t poll;
  int poll_init, poll_events;

  /* Pending requests per direction (posted receives, queued sends): what
   * the loop thread may have to move when the caller is elsewhere. Changed
   * under the direction's lock, read anywhere. */
  atomic_int npend[2];

  tcp_fail_t fail; /* this peer only: PROTOCOL, or PEER_LOST after goodbye */

  /* receive side, under rmu */
  uv_mutex_t rmu;
  coll_match_q_t posted; /* tcp_req_t, in posting order */
  coll_match_q_t unexp;  /* tcp_umsg_t, oldest first */
  tcp_umsg_t *ufree;     /* spare early-message buffers */
  int nfree;
  size_t unexp_bytes; /* announced bytes of the early messages kept */
  /* Reading stopped at the header of an early message too big to keep:
   * its bytes wait in the kernel (TCP flow control holds the sender back)
   * until a receive is posted. */
  int rpaused;
  int rstate;
  uint8_t *rbuf; /* staging: headers and small payloads */
  size_t rpos, rend;
  /* The last data frame was large enough for its payload to be read
   * straight into its destination: the next one probably is too, so its
   * header is read alone (tcp_rx.c, read_some). */
  int bulk;
  int in_msg; /* a message is being read (more frames may follow) */
  uint32_t cur_tag;
  int cur_more;       /* the frame being read is not the message's last */
  size_t cur_left;    /* payload bytes of the frame still to read */
  size_t cur_off;     /* payload bytes of the message delivered so far */
  size_t cur_total;   /* message bytes announced so far */
  tcp_req_t *cur_req; /* the matched receive, or NULL */
  tcp_umsg_t *cur_umsg;
  int cur_discard;   /* too long for cur_req: drain, then LENGTH_MISMATCH */
  coll_origin_t bye; /* what the peer's goodbye said, once RS_CLOSED */
  /* How the connection ended without goodbye: the errno, 0 for EOF.
   * Written by the thread that saw it, before it reports TCP_EV_LOST. */
  atomic_int lost_err;

  /* send side, under smu */
  uv_mutex_t smu;
  tcp_req_t *sq, *sq_tail;
  /* The farewell: once this side ends the connection, the rest of the
   * frame being written (copied, so no caller buffer is read after abort
   * returns) and the goodbye, flushed by whoever gets to the socket next;
   * then the write side is shut. */
  atomic_int bye_state; /* TCP_BYE_*; read without the lock by the loop */
  uint8_t *tail;
  size_t tail_len, tail_off;

  /* Desync control (tcp_desync.c). The query and the answer travel as
   * requests of the connection's own through the send queue (under smu),
   * so they go out whole, between messages. */
  tcp_req_t ctl_query, ctl_reply;
  uint8_t ctl_reply_buf[COLL_TCP_POS_BYTES];
  atomic_int want_reply; /* a query was read: the loop thread answers */
  atomic_int drain;      /* an urgent byte came: read on until the query */
  /* The peer's answer: written under rmu, then `answered` (release). */
  atomic_int answered;
  coll_pos_snap_t answer;
};

enum { TCP_BYE_NONE = 0, TCP_BYE_FLUSHING, TCP_BYE_SENT };

struct tcp_transport {
  int rank, world;
  coll_tcp_xopts_t x;
  tcp_conn_t *conns; /* world of them; conns[rank] is the loopback */
  tcp_fail_t fail;   /* whole transport: a peer lost (abort has its own flag) */
  atomic_int aborted;
  atomic_int stopping; /* the loop thread is asked to end */
  atomic_int closing;  /* destroy began: peers leaving is expected */

  /* The callers' waits: how many callers drive the connections (while
   * any does, the loop thread keeps off their data and watches only for
   * closes, urgent queries and farewells), and how many sleep in poll()
   * (while any does, a completion or a post by another thread writes
   * wake_fd; the last sleeper to leave drains it, so a wakeup is never
   * taken from a sleeper still counted). */
  atomic_int npend_all; /* sum of every connection's npend */
  atomic_int drivers;
  atomic_int pollers;
  int wake_fd; /* eventfd */

  /* free requests; callers of isend/irecv/wait, under req_mu */
  uv_mutex_t req_mu;
  tcp_req_t *req_free;
  int nreq_free;

  /* Desync (tcp_desync.c): where this rank's comm is (the endpoint's, see
   * transport.h), whether this rank is asking its peers (the loop thread
   * then reads every connection), and the report: this rank's own or the
   * first a peer carried here, claimed once, written, then published. */
  _Atomic(const coll_pos_t *) pos; /* set once the endpoint exists */
  atomic_int asking;
  coll_report_cell_t report;

  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t hb_timer; /* heartbeats: sent on idle links, silence judged */
  coll_silence_t hb_silence; /* the loop thread's watch (common/silence.h) */
  uv_signal_t urg;           /* SIGURG: a peer's desync query (tcp_desync.c) */
  uv_thread_t thread;
  int loop_init, async_init, hb_init, urg_init, thread_started, req_mu_init;

  tcp_elastic_t *el; /* what a shrink needs; NULL unless COLL_ELASTIC=1 */
};

/* 1 once nothing may move on c any more: the transport was aborted or
 * failed, or this peer failed. (A farewell may still be flushing.) Any
 * thread. */
static inline int coll__tcp_conn_stopped(const tcp_conn_t *c) {
  return atomic_load(&c->t->aborted) || atomic_load(&c->t->fail.status) != 0 ||
         atomic_load(&c->fail.status) != 0;
}

/* Events a progress call reports after dropping its lock. */
typedef enum tcp_ev {
  TCP_EV_NONE = 0,
  TCP_EV_LOST,    /* closed or reset without goodbye: the transport fails */
  TCP_EV_PROTO,   /* malformed frame: this peer fails */
  TCP_EV_NOMEM,   /* no memory for an early message: this peer fails */
  TCP_EV_GOODBYE, /* the peer closed cleanly: its pending work fails */
  TCP_EV_FAILED,  /* the peer's goodbye names a failure: the transport fails */
  TCP_EV_PAUSE,   /* tcp_rx.c only: a header is held back */
} tcp_ev_t;

#define TCP_WHY_MAX 200
/* A connection's receive staging buffer (rbuf), bytes. */
#define COLL_TCP_RBUF_BYTES (64 * 1024)

/* tcp_rx.c: receive side (rmu held by the caller of each). With force,
 * reads to the end even past the early-message budget (the peer is
 * closing, so what it still sends is bounded). */
tcp_ev_t coll__tcp_rx_progress(tcp_conn_t *c, int force, char *why);
/* The probe hook (transport.h), tcp_probe.c. */
int coll__tcp_probe(void *ctx, int peer, uint32_t tag);
/* The frame state machine over the bytes already staged in rbuf
 * (rbuf[rpos..rend)), with no I/O: TCP_EV_NONE once it needs more bytes or
 * held a header back (rpaused set), else the event that stopped it. The
 * progress call above reads and calls it; the frame fuzzer calls it
 * directly. rbuf holds COLL_TCP_RBUF_BYTES. */
tcp_ev_t coll__tcp_rx_staged(tcp_conn_t *c, int force, char *why);
/* Matches r against the early messages: returns 1 if one was found (r is
 * complete, or now receives the message still arriving), else 0. */
int coll__tcp_rx_match(tcp_conn_t *c, tcp_req_t *r);
/* Appends r to the posted receives. */
void coll__tcp_rx_append(tcp_conn_t *c, tcp_req_t *r);
/* A send to self: delivered into a posted receive or kept as early. */
coll_status_t coll__tcp_rx_loopback(tcp_conn_t *c, uint32_t tag,
                                    const void *buf, size_t len);
/* Fails every posted receive (and the one being filled). */
void coll__tcp_rx_fail_all(tcp_conn_t *c, coll_status_t s, const char *text);
void coll__tcp_rx_free(tcp_conn_t *c); /* destroy: early messages, staging */

/* tcp_tx.c: send side (smu held by the caller of each). */
void coll__tcp_tx_prepare(tcp_transport_t *t, tcp_req_t *r);
tcp_ev_t coll__tcp_tx_progress(tcp_conn_t *c, char *why);
void coll__tcp_tx_fail_all(tcp_conn_t *c, coll_status_t s, const char *text);
/* Queues the farewell naming o (once per connection; later calls do
 * nothing), copies what is left of a frame begun, and writes what the
 * socket takes now. Nothing queued is sent after it. */
void coll__tcp_tx_farewell(tcp_conn_t *c, const coll_origin_t *o);
/* Writes more of the farewell without blocking; shuts the write side once
 * all of it went (or the socket failed). Returns 1 when nothing is left. */
int coll__tcp_tx_flush(tcp_conn_t *c);

/* tcp_bye.c: the last words of destroy. Queues this rank's goodbye
 * (COLL_CAUSE_DESTROYED) on every connection that has none queued yet. */
void coll__tcp_bye_queue(tcp_transport_t *t);
/* After the loop thread stopped: writes what is left of every goodbye and
 * waits until each peer's kernel took all we sent, until deadline (ms). */
void coll__tcp_bye_finish(tcp_transport_t *t, int64_t deadline);

/* tcp_desync.c: the control frames of a desync query. A QUERY, POSITION
 * or REPORT frame whose header is at c->rbuf + c->rpos - header bytes
 * (its payload staged behind it): judged, acted on, consumed. rmu held.
 * TCP_EV_NONE, or TCP_EV_PROTO with why. */
tcp_ev_t coll__tcp_rx_control(tcp_conn_t *c, const coll_tcp_frame_t *f,
                              char *why);
/* Keeps report (first wins) for the farewell and the peers. Any thread. */
void coll__tcp_report_keep(tcp_transport_t *t, const char *report, size_t n);
/* 1 if c's send queue holds a caller's send (not only control frames,
 * whose bytes the connection owns). smu held. */
int coll__tcp_sq_has_user_sends(const tcp_conn_t *c);
/* Loop thread: answers the queries read on every connection. */
void coll__tcp_answer_queries(tcp_transport_t *t);
/* Loop thread: takes the urgent byte pending on c, if any, and then reads
 * on to the query (1); 0 when none was pending. */
int coll__tcp_take_urgent(tcp_conn_t *c);
/* The desync hooks (transport.h). */
void coll__tcp_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered);
void coll__tcp_tell(void *ctx, const char *report);
int coll__tcp_heard(void *ctx, char *buf, size_t n);

/* tcp_heartbeat.c: one tick of the heartbeat timer. Loop thread only. */
void coll__tcp_heartbeat_tick(tcp_transport_t *t);

/* tcp_loop.c: the loop thread. */
coll_status_t coll__tcp_loop_start(tcp_transport_t *t);
/* Has the loop thread re-judge what it watches. Any thread. */
void coll__tcp_loop_kick(tcp_transport_t *t);
void coll__tcp_loop_stop(tcp_transport_t *t); /* joins the thread */

/* tcp_ops.c: the vtable's data slots (see coll_transport_ops_t). */
coll_status_t coll__tcp_isend(void *ctx, int peer, uint32_t tag,
                              const void *buf, size_t len, void **req);
coll_status_t coll__tcp_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                              size_t cap, void **req);
coll_status_t coll__tcp_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len);
void coll__tcp_req_cache_free(tcp_transport_t *t);

/* tcp_fail.c: failure propagation. Call with no connection lock held.
 * Fails the whole transport for a failure that started at o (the first
 * origin wins), says so to every peer, and fails every pending request.
 * Every call visits every connection, so no caller buffer is touched once
 * any call returned. */
void coll__tcp_fail_transport(tcp_transport_t *t, const coll_origin_t *o);
/* Fails only the work that involves c's peer, for a failure that started
 * at o with local status s (detail, if not NULL, ends the text); unless
 * the peer left on its own (DESTROYED), says o to it and shuts the
 * connection. */
void coll__tcp_fail_conn(tcp_conn_t *c, coll_status_t s, const coll_origin_t *o,
                         const char *detail);
/* Acts on an event from a progress call (no lock held). */
void coll__tcp_handle_ev(tcp_conn_t *c, tcp_ev_t ev, const char *why);
/* Reads what c's peer sent that nobody read yet (a goodbye naming where a
 * failure began, say) and handles what it says, before a silence on c is
 * judged. 1 when c or the transport has failed since (there is nothing
 * left to judge), else 0. No lock held. */
int coll__tcp_read_before_judging(tcp_conn_t *c);
/* Counts r as pending on its connection (its direction's lock held). */
void coll__tcp_req_count(tcp_req_t *r);
/* Marks r complete (its direction's lock held) and wakes a sleeping
 * waiter. */
void coll__tcp_req_complete(tcp_req_t *r, coll_status_t s, const char *text);
/* The status stuck to t or c (0 if none); *text is its sentence. */
coll_status_t coll__tcp_fail_get(const tcp_fail_t *f, const char **text);

#endif
