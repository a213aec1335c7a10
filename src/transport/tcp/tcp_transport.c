/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_transport.c: creating the TCP transport (mesh, then loop thread),
 * aborting it from any thread, and tearing it down with a goodbye. */
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/tcp/tcp_int.h"
#include "transport/transport.h"

/* How long destroy tries to get its goodbyes to the peers, in total. */
#define GOODBYE_BUDGET_MS 1000
/* Over sockets a 1 MiB pipeline segment amortises the framing, the
 * syscalls and the hand-off to the loop thread (measured). */
#define TCP_SEGMENT_BYTES (1u << 20)

void coll__tcp_xopts_default(coll_tcp_xopts_t *x) {
  x->frame_cap = COLL_TCP_FRAME_CAP_DEFAULT;
  x->hs_timeout_ms = COLL_TCP_HS_TIMEOUT_DEFAULT;
  x->sock_buf = COLL_TCP_SOCK_BUF_DEFAULT;
  x->spin_ns = COLL_TCP_SPIN_NS_DEFAULT;
  x->hb_timeout_ms = -1;
}

/* COLL_HEARTBEAT_TIMEOUT_MS into x when x leaves it to the environment;
 * a value that is not a number of milliseconds >= 0 is refused. */
static coll_status_t heartbeat_from_env(coll_tcp_xopts_t *x) {
  int64_t v = COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS;
  if (x->hb_timeout_ms >= 0) return COLL_OK;
  if (coll__env_parse_int(COLL_ENV_HEARTBEAT_TIMEOUT_MS, &v) < 0 || v < 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "COLL_HEARTBEAT_TIMEOUT_MS='%s' is not a number of "
                     "milliseconds >= 0 (0: no heartbeats; unset: %d)",
                     coll__env(COLL_ENV_HEARTBEAT_TIMEOUT_MS),
                     COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS);
  x->hb_timeout_ms = v;
  return COLL_OK;
}

/* Ends the transport for a failure that started at o, or at the origin
 * this rank already holds: its own transport's first, else a connection's
 * (a peer that left or broke the protocol). Every pending request fails,
 * every peer hears the origin in a goodbye, then the sockets' write sides
 * are shut. Any thread. */
static void tcp_fail(void *ctx, const coll_origin_t *o) {
  tcp_transport_t *t = ctx;
  coll_origin_t use = *o;
  int i;
  atomic_store(&t->aborted, 1);
  if (atomic_load(&t->fail.status) == 0)
    for (i = 0; i < t->world; i++)
      if (atomic_load_explicit(&t->conns[i].fail.status,
                               memory_order_acquire) != 0) {
        use = t->conns[i].fail.origin;
        break;
      }
  coll__tcp_fail_transport(t, &use);
}

/* The owner's abort: this rank is the origin, unless a failure that
 * started elsewhere came first. Any thread. */
static void tcp_abort(void *ctx) {
  tcp_transport_t *t = ctx;
  coll_origin_t o = {t->rank, COLL_CAUSE_ABORTED, 0};
  if (!atomic_exchange(&t->aborted, 1))
    COLL_INFO(COLL_LOG_NET, "tcp: rank %d: aborting the transport", t->rank);
  tcp_fail(ctx, &o);
}

static int tcp_origin(void *ctx, coll_origin_t *o) {
  tcp_transport_t *t = ctx;
  if (atomic_load_explicit(&t->fail.status, memory_order_acquire) == 0)
    return 0;
  *o = t->fail.origin;
  return 1;
}

/* Tells every live peer we leave on purpose (so it fails only the work
 * that involves this rank), or finishes telling them why we failed, within
 * the budget; then the write sides are shut. */
static void say_goodbye(tcp_transport_t *t, int64_t deadline) {
  coll_origin_t o = {t->rank, COLL_CAUSE_DESTROYED, 0};
  int i;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    /* Also to a peer that said goodbye first: it may still be listening
     * while it tears down, and must not take our close for a crash. */
    if (c->fd < 0) continue;
    uv_mutex_lock(&c->smu);
    /* Sends never waited for (a broken contract) may have freed buffers:
     * no goodbye after them, the peer sees the connection closed. */
    if (c->sq != NULL && atomic_load(&c->bye_state) == TCP_BYE_NONE) {
      atomic_store(&c->bye_state, TCP_BYE_SENT);
      shutdown(c->fd, SHUT_WR);
    }
    coll__tcp_tx_farewell(c, &o);
    uv_mutex_unlock(&c->smu);
  }
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    for (;;) {
      struct pollfd pf = {c->fd, POLLOUT, 0};
      int64_t left = deadline - coll__now_ms();
      int done;
      if (c->fd < 0) break;
      uv_mutex_lock(&c->smu);
      done = coll__tcp_tx_flush(c);
      uv_mutex_unlock(&c->smu);
      if (done) break;
      if (left <= 0 || poll(&pf, 1, (int)left) < 0) {
        COLL_INFO(COLL_LOG_NET, "tcp: rank %d: no goodbye sent to rank %d",
                  t->rank, c->peer);
        shutdown(c->fd, SHUT_WR);
        break;
      }
    }
  }
}

/* Requests never waited for (a broken contract) are freed, not leaked. */
static void free_leftovers(tcp_conn_t *c) {
  tcp_req_t *r;
  while ((r = c->posted) != NULL) {
    c->posted = r->next;
    free(r);
  }
  while ((r = c->sq) != NULL) {
    c->sq = r->next;
    free(r);
  }
  free(c->cur_req);
  c->cur_req = NULL;
}

/* Waits, within the budget, until the peer's kernel acknowledged all we
 * sent on fd, the goodbye last. A peer whose receive buffer is full (it
 * was not reading our stream) holds our goodbye back, and a close then
 * would reset the connection, dropping it: the peer would take this rank
 * for lost. Bytes that arrive meanwhile are read and dropped. */
static void linger(int fd, int64_t deadline) {
  char sink[4096];
  int eof = 0;
  for (;;) {
    int unacked = 0;
    int64_t left = deadline - coll__now_ms();
    struct pollfd pf = {fd, eof ? 0 : POLLIN, 0};
    if (ioctl(fd, SIOCOUTQ, &unacked) != 0 || unacked == 0 || left <= 0) return;
    /* The queue shrinks without an event: look again every few ms. */
    if (poll(&pf, 1, left < 5 ? (int)left : 5) < 0) return;
    if (pf.revents & (POLLERR | POLLNVAL)) return;
    if (pf.revents & POLLIN) {
      ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0) eof = 1;
      if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    }
  }
}

/* Closing a socket with unread bytes (a peer's goodbye, say) sends a reset
 * instead of a FIN; read what is there first. */
static void drain_close(int fd) {
  char sink[4096];
  int i;
  for (i = 0; i < 256; i++)
    if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
  close(fd);
}

static void tcp_destroy(void *ctx) {
  tcp_transport_t *t = ctx;
  int64_t deadline = coll__now_ms() + GOODBYE_BUDGET_MS;
  int i;
  if (t == NULL) return;
  atomic_store(&t->closing, 1);
  if (t->thread_started) say_goodbye(t, deadline);
  coll__tcp_loop_stop(t);
  for (i = 0; t->conns != NULL && i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (c->fd >= 0) linger(c->fd, deadline);
    if (c->fd >= 0) drain_close(c->fd);
    free_leftovers(c);
    free(c->tail);
    coll__tcp_rx_free(c);
    uv_mutex_destroy(&c->rmu);
    uv_mutex_destroy(&c->smu);
  }
  coll__tcp_req_cache_free(t);
  if (t->req_mu_init) uv_mutex_destroy(&t->req_mu);
  if (t->wake_fd >= 0) close(t->wake_fd);
  free(t->conns);
  free(t);
}

static const coll_transport_ops_t tcp_ops = {
    sizeof(coll_transport_ops_t),
    COLL_TRANSPORT_OPS_VERSION,
    "tcp",
    coll__tcp_isend,
    coll__tcp_irecv,
    coll__tcp_wait,
    tcp_abort,
    tcp_destroy,
    NULL,
};

static coll_status_t check_opts(const coll_tcp_opts_t *o,
                                const coll_tcp_rdv_t *rdv,
                                const coll_tcp_xopts_t *x,
                                coll_transport_t **out) {
  if (out == NULL || o == NULL || rdv == NULL || x == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: NULL argument");
  *out = NULL;
  if (o->world < 1 || o->rank < 0 || o->rank >= o->world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp: rank %d out of range for "
                     "world %d",
                     o->rank, o->world);
  if (o->bind_ip == NULL || o->job_id == NULL || rdv->publish == NULL ||
      rdv->lookup == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp: bind_ip, job_id and the rendezvous calls are "
                     "required");
  if (x->frame_cap == 0)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: frame cap of 0 bytes");
  return COLL_OK;
}

static coll_status_t conns_init(tcp_transport_t *t) {
  int i;
  t->conns = calloc((size_t)t->world, sizeof *t->conns);
  if (t->conns == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    c->t = t;
    c->peer = i;
    c->fd = -1;
    uv_mutex_init(&c->rmu);
    uv_mutex_init(&c->smu);
  }
  return COLL_OK;
}

coll_status_t coll__tcp_transport_create_x(const coll_tcp_opts_t *o,
                                           const coll_tcp_rdv_t *rdv,
                                           const coll_tcp_xopts_t *x,
                                           coll_transport_t **out) {
  tcp_transport_t *t = NULL;
  coll_tcp_opts_t opts;
  int *fds = NULL, i;
  coll_status_t s;
  COLL_CHECK(check_opts(o, rdv, x, out));
  opts = *o;
  if (opts.timeout_ms == 0) opts.timeout_ms = coll__default_timeout_ms();
  t = calloc(1, sizeof *t);
  fds = calloc((size_t)o->world, sizeof *fds);
  if (t != NULL) t->wake_fd = -1;
  if (t == NULL || fds == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto fail;
  }
  t->rank = o->rank;
  t->world = o->world;
  t->x = *x;
  COLL_CHECK_GOTO(heartbeat_from_env(&t->x), s, fail);
  atomic_init(&t->wait_peer, -1);
  if (uv_mutex_init(&t->req_mu) != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: cannot create a mutex");
    goto fail;
  }
  t->req_mu_init = 1;
  t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->wake_fd < 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: eventfd(): %s", strerror(errno));
    goto fail;
  }
  COLL_CHECK_GOTO(conns_init(t), s, fail);
  if (o->world > 1)
    COLL_CHECK_GOTO(coll__tcp_mesh_connect(&opts, rdv, x, fds), s, fail);
  for (i = 0; i < o->world; i++) t->conns[i].fd = i == o->rank ? -1 : fds[i];
  COLL_CHECK_GOTO(coll__tcp_loop_start(t), s, fail);
  free(fds);
  fds = NULL;
  /* t belongs to the wrapper only once it was created. */
  COLL_CHECK_GOTO(coll_transport_create(&tcp_ops, t, o->rank, o->world, out), s,
                  fail);
  coll__t_set_segment_bytes(*out, TCP_SEGMENT_BYTES);
  coll__t_set_fail_hooks(*out, tcp_fail, tcp_origin);
  return COLL_OK;
fail:
  free(fds);
  tcp_destroy(t);
  return s;
}

coll_status_t coll__tcp_transport_create(const coll_tcp_opts_t *o,
                                         const coll_tcp_rdv_t *rdv,
                                         coll_transport_t **out) {
  coll_tcp_xopts_t x;
  coll__tcp_xopts_default(&x);
  return coll__tcp_transport_create_x(o, rdv, &x, out);
}
