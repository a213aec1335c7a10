/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_fail.c: completing requests and spreading failures: a lost peer fails
 * the whole transport, a peer that said goodbye or broke the protocol fails
 * only the work that involves it. Errors are sticky. */
#include <stdio.h>
#include <sys/socket.h>
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

/* Claims f for (s, text); 0 if an earlier failure holds it. */
static int fail_claim(tcp_fail_t *f, coll_status_t s, const char *text) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&f->claimed, &expected, 1)) return 0;
  snprintf(f->text, sizeof f->text, "%.*s", (int)sizeof f->text - 1, text);
  atomic_store_explicit(&f->status, (int)s, memory_order_release);
  return 1;
}

coll_status_t coll__tcp_fail_get(const tcp_fail_t *f, const char **text) {
  int s = atomic_load_explicit(&f->status, memory_order_acquire);
  if (s != 0) *text = f->text;
  return (coll_status_t)s;
}

/* Fails everything pending on c, one lock at a time. The failure flag was
 * published before, so nothing new is queued once the lock was taken. */
static void fail_pending(tcp_conn_t *c, coll_status_t s, const char *text) {
  uv_mutex_lock(&c->rmu);
  coll__tcp_rx_fail_all(c, s, text);
  uv_mutex_unlock(&c->rmu);
  uv_mutex_lock(&c->smu);
  coll__tcp_tx_fail_all(c, s, text);
  uv_mutex_unlock(&c->smu);
}

void coll__tcp_fail_transport(tcp_transport_t *t, coll_status_t s,
                              const char *text) {
  int i;
  if (!fail_claim(&t->fail, s, text)) return;
  COLL_WARN(COLL_LOG_NET, "%s; failing all pending work", t->fail.text);
  for (i = 0; i < t->world; i++) fail_pending(&t->conns[i], s, t->fail.text);
  coll__tcp_loop_kick(t);
}

void coll__tcp_fail_conn(tcp_conn_t *c, coll_status_t s, const char *text) {
  if (!fail_claim(&c->fail, s, text)) return;
  fail_pending(c, s, c->fail.text);
  /* A peer that broke the protocol is cut off; it sees a lost connection. */
  if (s != COLL_ERR_PEER_LOST && c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  coll__tcp_loop_kick(c->t);
}

void coll__tcp_handle_ev(tcp_conn_t *c, tcp_ev_t ev, const char *why) {
  char text[TCP_WHY_MAX + 64];
  switch (ev) {
    case TCP_EV_NONE:
    case TCP_EV_PAUSE: return;
    case TCP_EV_LOST:
      /* After a goodbye (or a protocol failure) the close is expected, and
       * so it is while this side is closing too. */
      if (atomic_load(&c->fail.status) != 0 || atomic_load(&c->t->closing))
        return;
      snprintf(text, sizeof text, "tcp: %s", why);
      coll__tcp_fail_transport(c->t, COLL_ERR_PEER_LOST, text);
      return;
    case TCP_EV_PROTO:
    case TCP_EV_NOMEM:
      snprintf(text, sizeof text, "tcp: %s", why);
      COLL_WARN(COLL_LOG_NET, "%s; dropping the connection to rank %d", text,
                c->peer);
      coll__tcp_fail_conn(
          c, ev == TCP_EV_PROTO ? COLL_ERR_PROTOCOL : COLL_ERR_NO_MEMORY, text);
      return;
    case TCP_EV_GOODBYE:
      snprintf(text, sizeof text, "tcp: rank %d left: it closed its transport",
               c->peer);
      COLL_INFO(COLL_LOG_NET, "%s", text);
      coll__tcp_fail_conn(c, COLL_ERR_PEER_LOST, text);
      return;
  }
}
