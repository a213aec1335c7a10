/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_fail.c: completing requests and spreading failures: a lost peer, or
 * a goodbye that names a failure, fails the whole transport and is
 * forwarded to every peer with its origin; a peer that left on its own or
 * broke the protocol fails only the work that involves it. Errors are
 * sticky. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "transport/tcp/tcp_int.h"

void coll__tcp_req_count(tcp_req_t *r) {
  tcp_conn_t *c = r->conn;
  r->counted = 1;
  atomic_fetch_add(&c->npend[r->kind], 1);
  atomic_fetch_add(&c->t->npend_all, 1);
}

void coll__tcp_req_complete(tcp_req_t *r, coll_status_t s, const char *text) {
  tcp_conn_t *c = r->conn;
  tcp_transport_t *t = c->t;
  if (r->counted) {
    r->counted = 0;
    atomic_fetch_sub(&c->npend[r->kind], 1);
    atomic_fetch_sub(&t->npend_all, 1);
  }
  r->status = s;
  r->errtext = text;
  /* The waiter may free r as soon as it sees done: touch it no more. The
   * waiter counts itself in `pollers` before it last checks done (both
   * seq_cst), so either it sees done or this sees it sleeping. */
  atomic_store(&r->done, 1);
  if (atomic_load(&t->pollers) > 0) {
    uint64_t one = 1;
    /* Cannot fail short of a counter overflow, which still wakes it. */
    ssize_t k = write(t->wake_fd, &one, sizeof one);
    (void)k;
  }
}

/* Claims f for origin o with local status s; 0 if an earlier failure
 * holds it (then waits until that one is published: its claimer is a few
 * instructions from it). */
static int fail_claim(tcp_fail_t *f, coll_status_t s, const coll_origin_t *o,
                      int seen_by, const char *detail) {
  size_t n;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&f->claimed, &expected, 1)) {
    while (atomic_load_explicit(&f->status, memory_order_acquire) == 0) {
    }
    return 0;
  }
  f->origin = *o;
  coll__origin_text(o, seen_by, f->text, sizeof f->text);
  n = strlen(f->text);
  if (detail != NULL) snprintf(f->text + n, sizeof f->text - n, ": %s", detail);
  atomic_store_explicit(&f->status, (int)s, memory_order_release);
  return 1;
}

coll_status_t coll__tcp_fail_get(const tcp_fail_t *f, const char **text) {
  int s = atomic_load_explicit(&f->status, memory_order_acquire);
  if (s != 0) *text = f->text;
  return (coll_status_t)s;
}

/* Fails everything pending on c, one lock at a time, after queueing the
 * farewell (o, or NULL for none): the goodbye goes out before anything is
 * closed. The failure flag was published before, so nothing new is queued
 * once the lock was taken. */
static void fail_pending(tcp_conn_t *c, coll_status_t s, const char *text,
                         const coll_origin_t *o) {
  uv_mutex_lock(&c->smu);
  if (o != NULL) coll__tcp_tx_farewell(c, o);
  coll__tcp_tx_fail_all(c, s, text);
  uv_mutex_unlock(&c->smu);
  uv_mutex_lock(&c->rmu);
  coll__tcp_rx_fail_all(c, s, text);
  uv_mutex_unlock(&c->rmu);
}

/* The status this rank's own work ends with: its owner's abort or destroy
 * is ABORTED here, whatever its peers call it, and a timeout (this rank's
 * or another's) ends requests as ABORTED too, never TIMEOUT, which would
 * tell their waiters they are still pending. The callers report the
 * origin's own status (coll__origin_status) above the transport. */
static coll_status_t local_status(const tcp_transport_t *t,
                                  const coll_origin_t *o) {
  if (o->rank == t->rank &&
      (o->cause == COLL_CAUSE_ABORTED || o->cause == COLL_CAUSE_DESTROYED))
    return COLL_ERR_ABORTED;
  return coll__origin_req_status(o);
}

void coll__tcp_fail_transport(tcp_transport_t *t, const coll_origin_t *o) {
  int i;
  if (fail_claim(&t->fail, local_status(t, o), o, t->rank, NULL))
    COLL_WARN(COLL_LOG_NET, "%s; failing all pending work", t->fail.text);
  /* Whoever claimed, every call visits every connection (see tcp_int.h),
   * and forwards the origin that won. */
  for (i = 0; i < t->world; i++)
    fail_pending(&t->conns[i], (coll_status_t)atomic_load(&t->fail.status),
                 t->fail.text, &t->fail.origin);
  coll__tcp_loop_kick(t);
}

void coll__tcp_fail_conn(tcp_conn_t *c, coll_status_t s, const coll_origin_t *o,
                         const char *detail) {
  if (!fail_claim(&c->fail, s, o, c->t->rank, detail)) return;
  /* A peer that left on its own hears nothing more; one that broke the
   * protocol (or that we cannot keep up with) is told why and cut off. */
  fail_pending(c, s, c->fail.text,
               o->cause == COLL_CAUSE_DESTROYED ? NULL : &c->fail.origin);
  coll__tcp_loop_kick(c->t);
}

/* Reads what c's peer sent before its connection broke, to the end: a
 * send that fails (the peer reset the connection) may be ahead of a
 * goodbye that is waiting in the receive buffer. Returns the event that
 * reading ended with. No lock held. */
static tcp_ev_t read_to_end(tcp_conn_t *c, char *why) {
  tcp_ev_t ev = TCP_EV_NONE;
  int k;
  uv_mutex_lock(&c->rmu);
  /* Bounded: the kernel holds at most a socket buffer of it. */
  for (k = 0; k < 256 && ev == TCP_EV_NONE && c->rstate < RS_CLOSED; k++)
    ev = coll__tcp_rx_progress(c, 1, why);
  /* Another thread may have read the goodbye just before (it reports it
   * once it dropped the lock): it counts the same. */
  if (ev == TCP_EV_NONE && c->rstate == RS_CLOSED) {
    snprintf(why, TCP_WHY_MAX, "rank %d said goodbye", c->peer);
    ev = c->bye.cause == COLL_CAUSE_DESTROYED && c->bye.rank == c->peer
             ? TCP_EV_GOODBYE
             : TCP_EV_FAILED;
  }
  uv_mutex_unlock(&c->rmu);
  return ev;
}

int coll__tcp_read_before_judging(tcp_conn_t *c) {
  char why[TCP_WHY_MAX];
  tcp_ev_t ev = read_to_end(c, why);
  if (ev != TCP_EV_NONE) coll__tcp_handle_ev(c, ev, why);
  return atomic_load(&c->fail.status) != 0 ||
         atomic_load(&c->t->fail.status) != 0;
}

void coll__tcp_handle_ev(tcp_conn_t *c, tcp_ev_t ev, const char *why) {
  coll_origin_t o = {c->peer, COLL_CAUSE_LOST, 0};
  char rwhy[TCP_WHY_MAX];
  tcp_ev_t rev;
  switch (ev) {
    case TCP_EV_NONE:
    case TCP_EV_PAUSE: return;
    case TCP_EV_LOST:
      /* After a goodbye (or a protocol failure) the close is expected, and
       * so it is while this side is closing, or ending the transport itself
       * (an abort sets `aborted` just before it claims the origin). A
       * goodbye that named another rank failed the transport first: that
       * origin stands. */
      if (atomic_load(&c->fail.status) != 0 || atomic_load(&c->t->closing) ||
          atomic_load(&c->t->aborted) || atomic_load(&c->t->fail.status) != 0)
        return;
      /* A goodbye read now says who the failure really came from. */
      rev = read_to_end(c, rwhy);
      if (rev != TCP_EV_NONE && rev != TCP_EV_LOST) {
        coll__tcp_handle_ev(c, rev, rwhy);
        return;
      }
      if (atomic_load(&c->t->fail.status) != 0) return;
      o.detail = (uint32_t)atomic_load(&c->lost_err);
      COLL_INFO(COLL_LOG_NET, "tcp: %s", why);
      coll__tcp_fail_transport(c->t, &o);
      return;
    case TCP_EV_PROTO:
    case TCP_EV_NOMEM:
      COLL_WARN(COLL_LOG_NET, "tcp: %s; dropping the connection to rank %d",
                why, c->peer);
      if (ev == TCP_EV_PROTO) {
        o.cause = COLL_CAUSE_PROTOCOL;
      } else {
        o = coll__origin_local(c->t->rank, COLL_ERR_NO_MEMORY);
      }
      coll__tcp_fail_conn(
          c, ev == TCP_EV_PROTO ? COLL_ERR_PROTOCOL : COLL_ERR_NO_MEMORY, &o,
          why);
      return;
    case TCP_EV_GOODBYE:
      COLL_INFO(COLL_LOG_NET, "tcp: rank %d left: it closed its transport",
                c->peer);
      coll__tcp_fail_conn(c, COLL_ERR_PEER_LOST, &c->bye, NULL);
      return;
    case TCP_EV_FAILED:
      o = c->bye;
      COLL_INFO(COLL_LOG_NET, "tcp: %s: rank %d's failure", why, o.rank);
      coll__tcp_fail_transport(c->t, &o);
      return;
  }
}
