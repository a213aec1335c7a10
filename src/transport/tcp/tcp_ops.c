/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_ops.c: isend, irecv and wait. A send with nothing queued ahead is
 * written at once by the caller's thread; wait drives every connection
 * with pending work from the caller's thread and sleeps in one poll() over
 * them, because a handoff between threads costs more than a small
 * message. */
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "transport/common/waiter.h"
#include "transport/tcp/tcp_int.h"

#define REQ_CACHE_MAX 64

static const char *const aborted_text = "tcp: transport aborted";

/* Requests are recycled: no malloc per message. The lock is uncontended
 * unless two callers post or finish at the same moment. */
static tcp_req_t *req_alloc(tcp_transport_t *t) {
  tcp_req_t *r;
  uv_mutex_lock(&t->req_mu);
  r = t->req_free;
  if (r != NULL) {
    t->req_free = r->next;
    t->nreq_free--;
  }
  uv_mutex_unlock(&t->req_mu);
  if (r == NULL && (r = malloc(sizeof *r)) == NULL) return NULL;
  r->next = NULL;
  r->got = 0;
  /* A receive that an early message completes at once is never counted:
   * a fresh request's garbage here would uncount another, and a peer's
   * silence on a pending receive would go unjudged (heartbeats). */
  r->counted = 0;
  r->status = COLL_OK;
  r->errtext = NULL;
  atomic_init(&r->done, 0);
  return r;
}

static void req_release(tcp_transport_t *t, tcp_req_t *r) {
  uv_mutex_lock(&t->req_mu);
  if (t->nreq_free < REQ_CACHE_MAX) {
    r->next = t->req_free;
    t->req_free = r;
    t->nreq_free++;
    r = NULL;
  }
  uv_mutex_unlock(&t->req_mu);
  free(r);
}

void coll__tcp_req_cache_free(tcp_transport_t *t) {
  tcp_req_t *r;
  while ((r = t->req_free) != NULL) {
    t->req_free = r->next;
    free(r);
  }
  t->nreq_free = 0;
}

/* The failure that refuses new work on c, if any: the transport's own
 * (an abort is one, claimed just after the flag is set), then c's. */
static coll_status_t refused(tcp_transport_t *t, tcp_conn_t *c) {
  const char *text = NULL;
  coll_status_t s;
  if ((s = coll__tcp_fail_get(&t->fail, &text)) != COLL_OK ||
      (c != NULL && (s = coll__tcp_fail_get(&c->fail, &text)) != COLL_OK))
    return coll_set_last_error(s, "%s", text);
  if (atomic_load(&t->aborted))
    return coll_set_last_error(COLL_ERR_ABORTED, "%s", aborted_text);
  return COLL_OK;
}

static coll_status_t check_args(tcp_transport_t *t, int peer, const void *buf,
                                size_t len, void **req, const char *what) {
  if (req == NULL)
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "tcp: %s: req is NULL",
                               what);
  *req = NULL;
  if (peer < 0 || peer >= t->world)
    return coll_set_last_error(COLL_ERR_INVALID_ARG,
                               "tcp: %s: peer %d out of range for world %d",
                               what, peer, t->world);
  if (buf == NULL && len > 0)
    return coll_set_last_error(COLL_ERR_INVALID_ARG,
                               "tcp: %s: NULL buffer of %zu bytes", what, len);
  return COLL_OK;
}

/* Work was posted that a caller asleep in wait() may not be polling for
 * (it took its set before): it takes the set again. Free unless another
 * thread is waiting. */
static void wake_sleepers(tcp_transport_t *t) {
  if (atomic_load(&t->pollers) > 0) {
    uint64_t one = 1;
    ssize_t k = write(t->wake_fd, &one, sizeof one);
    (void)k;
  }
}

static void req_init(tcp_req_t *r, tcp_conn_t *c, int kind, uint32_t tag,
                     const void *buf, size_t len) {
  r->conn = c;
  r->kind = kind;
  r->tag = tag;
  r->buf = (char *)buf; /* sends only read it */
  r->len = len;
}

coll_status_t coll__tcp_isend(void *ctx, int peer, uint32_t tag,
                              const void *buf, size_t len, void **req) {
  tcp_transport_t *t = ctx;
  tcp_conn_t *c;
  tcp_req_t *r;
  tcp_ev_t ev = TCP_EV_NONE;
  coll_status_t s;
  char why[TCP_WHY_MAX];
  COLL_CHECK(check_args(t, peer, buf, len, req, "isend"));
  c = &t->conns[peer];
  COLL_CHECK(refused(t, c));
  if ((r = req_alloc(t)) == NULL)
    return coll_set_last_error(COLL_ERR_NO_MEMORY, "tcp: isend: out of memory");
  req_init(r, c, TCP_REQ_SEND, tag, buf, len);
  if (peer == t->rank) {
    uv_mutex_lock(&c->rmu);
    s = refused(t, NULL);
    if (s == COLL_OK) s = coll__tcp_rx_loopback(c, tag, buf, len);
    uv_mutex_unlock(&c->rmu);
    if (s != COLL_OK) goto refuse;
    atomic_store(&r->done, 1);
    *req = r;
    return COLL_OK;
  }
  coll__tcp_tx_prepare(t, r);
  uv_mutex_lock(&c->smu);
  /* Checked again under the lock: a failure published before it will not
   * visit this queue again. */
  if ((s = refused(t, c)) != COLL_OK) {
    uv_mutex_unlock(&c->smu);
    goto refuse;
  }
  r->next = NULL;
  if (c->sq_tail != NULL)
    c->sq_tail->next = r;
  else
    c->sq = r;
  c->sq_tail = r;
  coll__tcp_req_count(r);
  /* Nothing queued ahead: write now, from this thread. What the socket
   * does not take moves when someone waits (this thread, or the loop
   * thread if this one waits for something else). */
  if (c->sq == r) ev = coll__tcp_tx_progress(c, why);
  uv_mutex_unlock(&c->smu);
  coll__tcp_handle_ev(c, ev, why);
  if (!atomic_load_explicit(&r->done, memory_order_acquire)) wake_sleepers(t);
  *req = r;
  return COLL_OK;
refuse:
  req_release(t, r);
  return s;
}

coll_status_t coll__tcp_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                              size_t cap, void **req) {
  tcp_transport_t *t = ctx;
  tcp_conn_t *c;
  tcp_req_t *r;
  coll_status_t s = COLL_OK;
  COLL_CHECK(check_args(t, peer, buf, cap, req, "irecv"));
  c = &t->conns[peer];
  if ((r = req_alloc(t)) == NULL)
    return coll_set_last_error(COLL_ERR_NO_MEMORY, "tcp: irecv: out of memory");
  req_init(r, c, TCP_REQ_RECV, tag, buf, cap);
  uv_mutex_lock(&c->rmu);
  /* A peer that left may still have messages here to match; a transport
   * failure refuses everything. */
  s = refused(t, NULL);
  if (s == COLL_OK && !coll__tcp_rx_match(c, r)) {
    s = refused(t, c);
    if (s == COLL_OK) coll__tcp_rx_append(c, r);
  }
  uv_mutex_unlock(&c->rmu);
  if (s != COLL_OK) {
    req_release(t, r);
    return s;
  }
  if (c->fd >= 0 && !atomic_load_explicit(&r->done, memory_order_acquire))
    wake_sleepers(t);
  *req = r;
  return COLL_OK;
}

static int req_done(tcp_req_t *r) {
  return atomic_load_explicit(&r->done, memory_order_acquire);
}

/* One wait's view of the connections it drives: a pollfd per connection
 * with pending work (wake_fd first), and each one's connection. */
#define DRIVE_STACK 64
typedef struct drive_set {
  tcp_transport_t *t;
  tcp_req_t *r; /* the request waited for */
  struct pollfd *pf;
  tcp_conn_t **conn;
  nfds_t n;
  int all; /* the next turn drives every connection of the set */
  struct pollfd pf_stack[DRIVE_STACK + 1];
  tcp_conn_t *conn_stack[DRIVE_STACK + 1];
} drive_set_t;

static int set_init(tcp_transport_t *t, drive_set_t *d) {
  d->pf = d->pf_stack;
  d->conn = d->conn_stack;
  if (t->world > DRIVE_STACK) {
    /* Large worlds only: one allocation per blocking wait. */
    d->pf = malloc(((size_t)t->world + 1) * sizeof *d->pf);
    d->conn = malloc(((size_t)t->world + 1) * sizeof *d->conn);
    if (d->pf == NULL || d->conn == NULL) {
      free(d->pf);
      free(d->conn);
      return -1;
    }
  }
  return 0;
}

static void set_free(drive_set_t *d) {
  if (d->pf == d->pf_stack) return;
  free(d->pf);
  free(d->conn);
}

/* Fills d with every connection that has pending work, for reading where
 * receives are posted and for writing where sends are queued. */
static void set_fill(tcp_transport_t *t, drive_set_t *d) {
  int i;
  d->pf[0] = (struct pollfd){t->wake_fd, POLLIN, 0};
  d->conn[0] = NULL;
  d->n = 1;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    short ev = 0;
    if (c->fd < 0 || coll__tcp_conn_stopped(c)) continue;
    if (atomic_load(&c->npend[TCP_REQ_RECV]) > 0) ev |= POLLIN;
    if (atomic_load(&c->npend[TCP_REQ_SEND]) > 0) ev |= POLLOUT;
    if (ev == 0) continue;
    d->pf[d->n] = (struct pollfd){c->fd, ev, 0};
    d->conn[d->n++] = c;
  }
}

/* Moves c along in the directions asked: sends first, so that a ring
 * step's bytes to the right are on their way while it reads the left. */
static void drive_conn(tcp_conn_t *c, int rd, int wr) {
  char why[TCP_WHY_MAX];
  tcp_ev_t ev;
  if (wr) {
    uv_mutex_lock(&c->smu);
    ev = coll__tcp_tx_progress(c, why);
    uv_mutex_unlock(&c->smu);
    coll__tcp_handle_ev(c, ev, why);
  }
  if (rd) {
    uv_mutex_lock(&c->rmu);
    ev = coll__tcp_rx_progress(c, 0, why);
    uv_mutex_unlock(&c->rmu);
    coll__tcp_handle_ev(c, ev, why);
  }
}

/* Moves r's connection along in r's direction, from the caller's thread. */
static void drive(tcp_req_t *r) {
  if (r->conn->fd >= 0)
    drive_conn(r->conn, r->kind == TCP_REQ_RECV, r->kind == TCP_REQ_SEND);
}

/* One turn: drives the connections the last poll() found ready (all of
 * them on the first turn, after a spin, and after a wakeup through
 * wake_fd, which may mean new work). The set is taken again for the next
 * turn, which drives all of it unless a sleep says otherwise. */
static int drive_turn(void *arg) {
  drive_set_t *d = arg;
  nfds_t k;
  for (k = 1; k < d->n; k++) {
    short ev = d->all ? d->pf[k].events : d->pf[k].revents;
    if (ev != 0)
      drive_conn(d->conn[k], (ev & (POLLIN | POLLERR | POLLHUP)) != 0,
                 (ev & (POLLOUT | POLLERR | POLLHUP)) != 0);
  }
  if (req_done(d->r)) return COLL_WAIT_DONE;
  d->all = 1;
  set_fill(d->t, d);
  return COLL_WAIT_IDLE;
}

/* Sleeps in one poll() over the set, for at most ms. */
static void drive_sleep(void *arg, int64_t ms) {
  drive_set_t *d = arg;
  tcp_transport_t *t = d->t;
  nfds_t k;
  /* Counted before the set is taken again: a post by another thread
   * either lands in it or sees this sleeper and writes wake_fd. */
  atomic_fetch_add(&t->pollers, 1);
  set_fill(t, d);
  for (k = 0; k < d->n; k++) d->pf[k].revents = 0;
  if (!req_done(d->r))
    (void)poll(d->pf, d->n, ms < 0 || ms > INT_MAX ? -1 : (int)ms);
  /* Only the last sleeper out drains the wakeups: one written for another
   * sleeper that is still counted (perhaps not yet inside poll()) must
   * stay until it has seen it. A later wakeup only makes the next poll()
   * return. */
  if (atomic_fetch_sub(&t->pollers, 1) == 1) {
    uint64_t v;
    ssize_t n = read(t->wake_fd, &v, sizeof v);
    (void)n;
  }
  d->all = d->pf[0].revents != 0;
  if (d->all) set_fill(t, d);
}

/* Drives r to completion on this thread until the deadline, and with it
 * every other connection's pending work: the loop thread keeps off the
 * data while any caller drives (tcp_loop.c), and is kicked for what is
 * left when the wait ends. A peer on this core gets it first while this
 * one spins (see COLL_TCP_SPIN_NS_DEFAULT). Returns 1 if done. */
static int drive_until(tcp_transport_t *t, tcp_req_t *r, int64_t timeout_ms) {
  coll_wait_policy_t pol = {(uint64_t)t->x.spin_ns, 1, -1, 0};
  drive_set_t d;
  int done;
  if (set_init(t, &d) != 0) {
    /* No memory for the set: drive r's own connection only, as a poll
     * loop; the loop thread keeps the rest. */
    uint64_t end = coll__now_ns() + (uint64_t)timeout_ms * 1000000u;
    coll__tcp_loop_kick(t);
    while (!req_done(r) && (timeout_ms < 0 || coll__now_ns() < end)) {
      drive(r);
      if (!req_done(r)) (void)poll(NULL, 0, 1);
    }
    return req_done(r);
  }
  d.t = t;
  d.r = r;
  d.all = 1;
  atomic_fetch_add(&t->drivers, 1);
  set_fill(t, &d);
  done = coll__wait_loop(&pol, timeout_ms, drive_turn, drive_sleep, &d);
  atomic_fetch_sub(&t->drivers, 1);
  set_free(&d);
  if (atomic_load(&t->npend_all) > 0) coll__tcp_loop_kick(t);
  return done;
}

coll_status_t coll__tcp_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len) {
  tcp_transport_t *t = ctx;
  tcp_req_t *r = req;
  coll_status_t s;
  if (r == NULL)
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "tcp: wait: req is NULL");
  if (!req_done(r)) {
    /* A zero timeout is a poll: still move the connection along once. */
    if (timeout_ms == 0) drive(r);
    if (!req_done(r) && (timeout_ms == 0 || !drive_until(t, r, timeout_ms)))
      return coll_set_last_error(
          COLL_ERR_TIMEOUT, "tcp: %s rank %d (tag %u) not done within %lld ms",
          r->kind == TCP_REQ_RECV ? "receive from" : "send to", r->conn->peer,
          r->tag, (long long)timeout_ms);
  }
  s = r->status;
  if (len != NULL) *len = r->kind == TCP_REQ_RECV ? r->got : r->len;
  if (s == COLL_ERR_LENGTH_MISMATCH)
    coll_set_last_error(s,
                        "tcp: rank %d sent %zu bytes on tag %u, but the "
                        "receive holds only %zu",
                        r->conn->peer, r->got, r->tag, r->len);
  else if (s != COLL_OK)
    coll_set_last_error(s, "%s", r->errtext ? r->errtext : coll_strerror(s));
  req_release(t, r);
  return s;
}
