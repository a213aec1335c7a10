/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_mesh.c: building the full mesh before any data moves: listen,
 * publish, dial every lower rank, accept every higher one, and run all
 * handshakes side by side in one poll() loop, so a foreign client that
 * stalls or babbles only ever costs its own slot (tcp_accept.c decides who
 * gets one). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/setup_warn.h"
#include "transport/tcp/tcp_mesh.h"

void coll__tcp_hs_close(tcp_hs_t *h) {
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
  h->state = TCP_HS_IDLE;
}

void coll__tcp_hs_io(tcp_hs_t *h, int kind, int writing, size_t need) {
  h->state = TCP_HS_IO;
  h->kind = kind;
  h->writing = writing;
  h->need = need;
  h->done = 0;
}

/* A dial that failed for a reason that may pass (peer not up, reset):
 * close and try again after a backoff. */
static void out_retry(tcp_mesh_t *m, tcp_hs_t *h, const char *why) {
  int64_t backoff = 10LL << (h->attempts < 6 ? h->attempts : 6);
  snprintf(m->why[h->peer], TCP_WHY_MAX, "%s", why);
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d: dialling rank %d at %s: %s; retrying",
            m->o->rank, h->peer, h->where, why);
  coll__tcp_hs_close(h);
  h->attempts++;
  h->retry_at = coll__now_ms() + backoff;
}

static void out_dial(tcp_mesh_t *m, int j) {
  tcp_hs_t *h = &m->outs[j];
  int fd = coll__tcp_socket(m->addrs[j].ss_family, m->x->sock_buf);
  if (fd < 0) {
    out_retry(m, h, strerror(-fd));
    return;
  }
  h->fd = fd;
  if (connect(fd, (struct sockaddr *)&m->addrs[j], m->alens[j]) == 0 ||
      errno == EINPROGRESS) {
    h->state = TCP_HS_CONNECT;
    return;
  }
  out_retry(m, h, strerror(errno));
}

static void established(tcp_mesh_t *m, tcp_hs_t *h) {
  m->fds[h->peer] = h->fd;
  h->fd = -1;
  h->state = TCP_HS_IDLE;
  m->missing--;
  if (!h->out) m->in_missing--;
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d: connected to rank %d (%s)", m->o->rank,
            h->peer, h->out ? "dialled" : "accepted");
}

/* Refuses an incoming connection: notes why and sends the verdict. A client
 * that claimed a rank we wait for leaves the reason for the timeout text. */
static void in_refuse(tcp_mesh_t *m, tcp_hs_t *h, coll_tcp_hs_result_t res,
                      uint32_t claimed) {
  const char *why = coll__tcp_hs_result_text(res);
  coll__refusal_note(&m->refusals, h->where, why);
  if (claimed < (uint32_t)m->o->world && (int)claimed > m->o->rank &&
      m->fds[claimed] < 0)
    snprintf(m->why[claimed], TCP_WHY_MAX,
             "a client at %s claiming it was "
             "refused: %s",
             h->where, why);
  h->refused = 1;
  coll__tcp_hs_welcome(&m->ctx, -1, res, h->nonce_s, h->nonce_c, h->buf);
  coll__tcp_hs_io(h, COLL_TCP_K_WELCOME, 1, COLL_TCP_WELCOME_BYTES);
}

/* One message of the handshake has been moved; take the next step. A final
 * failure (a refusal, an impostor) returns its status. */
static coll_status_t step_done(tcp_mesh_t *m, tcp_hs_t *h) {
  char why[TCP_WHY_MAX];
  coll_status_t s;
  if (h->out && h->kind == COLL_TCP_K_CHALLENGE) {
    s = coll__tcp_hs_check_challenge(&m->ctx, h->buf, h->peer, h->nonce_s, why,
                                     sizeof why);
    if (s != COLL_OK) goto final;
    s = coll__tcp_hs_nonce(h->nonce_c);
    if (s != COLL_OK) return s;
    coll__tcp_hs_hello(&m->ctx, h->peer, h->nonce_s, h->nonce_c, h->buf);
    coll__tcp_hs_io(h, COLL_TCP_K_HELLO, 1, COLL_TCP_HELLO_BYTES);
  } else if (h->out && h->kind == COLL_TCP_K_HELLO) {
    coll__tcp_hs_io(h, COLL_TCP_K_WELCOME, 0, COLL_TCP_WELCOME_BYTES);
  } else if (h->out) {
    s = coll__tcp_hs_check_welcome(&m->ctx, h->buf, h->peer, h->nonce_s,
                                   h->nonce_c, why, sizeof why);
    if (s != COLL_OK) goto final;
    established(m, h);
  } else if (h->kind == COLL_TCP_K_CHALLENGE) {
    coll__tcp_hs_io(h, COLL_TCP_K_HELLO, 0, COLL_TCP_HELLO_BYTES);
  } else if (h->kind == COLL_TCP_K_HELLO) {
    int peer = -1;
    coll_tcp_hs_result_t res = coll__tcp_hs_check_hello(
        &m->ctx, h->buf, h->nonce_s, &peer, h->nonce_c);
    if (res == COLL_TCP_HS_OK && m->fds[peer] >= 0) res = COLL_TCP_HS_DUPLICATE;
    if (res != COLL_TCP_HS_OK) {
      in_refuse(m, h, res, coll__get_le32(h->buf + 8));
      return COLL_OK;
    }
    h->peer = peer;
    coll__tcp_hs_welcome(&m->ctx, peer, COLL_TCP_HS_OK, h->nonce_s, h->nonce_c,
                         h->buf);
    coll__tcp_hs_io(h, COLL_TCP_K_WELCOME, 1, COLL_TCP_WELCOME_BYTES);
  } else if (h->refused) {
    coll__tcp_hs_close(h);
  } else {
    established(m, h);
  }
  return COLL_OK;
final:
  return coll__err(s, "tcp: rank %d: handshake with rank %d at %s: %s",
                   m->o->rank, h->peer, h->where, why);
}

/* An incoming client's bytes arrived: the first one earns it the whole
 * handshake bound; a stranger's are judged as soon as the magic is in.
 * Returns 1 when the connection was dropped. */
static int in_read(tcp_mesh_t *m, tcp_hs_t *h, size_t before) {
  if (before == 0) h->deadline = h->accepted_at + m->hs_ms;
  if (h->done >= 4 && coll__get_le32(h->buf) != COLL_TCP_MAGIC) {
    coll__tcp_in_drop(m, h, "not a libcoll handshake");
    return 1;
  }
  return 0;
}

coll_status_t coll__tcp_hs_pump(tcp_mesh_t *m, tcp_hs_t *h) {
  while (h->state == TCP_HS_IO) {
    size_t before = h->done;
    ssize_t n;
    if (h->writing)
      n = send(h->fd, h->buf + h->done, h->need - h->done, MSG_NOSIGNAL);
    else
      n = recv(h->fd, h->buf + h->done, h->need - h->done, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return COLL_OK;
    if (n <= 0) {
      const char *why =
          n == 0 ? "closed during the handshake" : strerror(errno);
      if (h->out)
        out_retry(m, h, why);
      else if (h->refused)
        coll__tcp_hs_close(h);
      else
        coll__tcp_in_drop(
            m, h, n == 0 ? "closed before finishing its handshake" : why);
      return COLL_OK;
    }
    h->done += (size_t)n;
    if (!h->out && !h->writing && in_read(m, h, before)) return COLL_OK;
    if (h->done == h->need) COLL_CHECK(step_done(m, h));
  }
  return COLL_OK;
}

static coll_status_t on_connected(tcp_mesh_t *m, tcp_hs_t *h) {
  int err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
  if (err != 0) {
    out_retry(m, h, strerror(err));
    return COLL_OK;
  }
  coll__tcp_hs_io(h, COLL_TCP_K_CHALLENGE, 0, COLL_TCP_CHALLENGE_BYTES);
  return coll__tcp_hs_pump(m, h);
}

static short hs_events(const tcp_hs_t *h) {
  if (h->state == TCP_HS_CONNECT) return POLLOUT;
  return h->writing ? POLLOUT : POLLIN;
}

/* Why the dialled connection to lower rank j is missing. */
static const char *out_why(const tcp_mesh_t *m, int j, char *buf, size_t cap) {
  const tcp_hs_t *h = &m->outs[j];
  const char *last = m->why[j][0] ? m->why[j] : NULL;
  if (h->state == TCP_HS_CONNECT)
    snprintf(buf, cap, "no answer to the connect%s%s", last ? "; before: " : "",
             last ? last : "");
  else if (h->state == TCP_HS_IO)
    snprintf(buf, cap, "its handshake did not finish%s%s",
             last ? "; before: " : "", last ? last : "");
  else
    snprintf(buf, cap, "%s", last ? last : "never dialled");
  return buf;
}

/* "rank 1 (rank 1 at 10.0.0.2:4000: connection refused)" or "ranks 1, 3
 * (...; ...)" for the ranks whose connection is missing on one side;
 * returns their number (0: buf is empty). */
static int missing_list(const tcp_mesh_t *m, int lower, char *buf, size_t cap) {
  char why[TCP_WHY_MAX + 48], *ids = malloc(cap), *det = malloc(cap);
  int j, n = 0;
  size_t used = 0, dused = 0;
  buf[0] = '\0';
  if (ids == NULL || det == NULL) {
    free(ids);
    free(det);
    return 0;
  }
  ids[0] = det[0] = '\0';
  for (j = 0; j < m->o->world && used + 16 < cap; j++) {
    if (j == m->o->rank || m->fds[j] >= 0 || (j < m->o->rank) != lower)
      continue;
    used += (size_t)snprintf(ids + used, cap - used, "%s%d", n ? ", " : "", j);
    if (dused + 40 < cap && lower)
      dused += (size_t)snprintf(det + dused, cap - dused, "%srank %d at %s: %s",
                                n ? "; " : "", j, m->outs[j].where,
                                out_why(m, j, why, sizeof why));
    else if (dused + 40 < cap)
      dused += (size_t)snprintf(
          det + dused, cap - dused, "%srank %d: %s", n ? "; " : "", j,
          m->why[j][0] ? m->why[j] : "no valid handshake arrived");
    n++;
  }
  if (n > 0) snprintf(buf, cap, "rank%s %s (%s)", n > 1 ? "s" : "", ids, det);
  free(ids);
  free(det);
  return n;
}

/* Names only the sides that miss something: the dialled connections to
 * lower ranks, the accepted ones from higher ranks, or both. */
static coll_status_t timed_out(tcp_mesh_t *m) {
  char lo[COLL_ERRMSG_MAX / 2], hi[COLL_ERRMSG_MAX / 3];
  int nlo = missing_list(m, 1, lo, sizeof lo);
  int nhi = missing_list(m, 0, hi, sizeof hi);
  return coll__err(
      COLL_ERR_TIMEOUT,
      "tcp: rank %d: mesh not connected within %lld ms: %s%s%s%s%s", m->o->rank,
      (long long)m->o->timeout_ms, nlo > 0 ? "no connection to " : "", lo,
      nlo > 0 && nhi > 0 ? "; " : "", nhi > 0 ? "no connection from " : "", hi);
}

/* The mesh keeps waiting (a firewall between ranks, a wrong interface):
 * every rank says which connections it still misses and why, long before
 * its timeout. */
static void warn_waiting(tcp_mesh_t *m, const coll_setup_warn_t *w) {
  char lo[COLL_ERRMSG_MAX / 2], hi[COLL_ERRMSG_MAX / 3], waited[16];
  int nlo = missing_list(m, 1, lo, sizeof lo);
  int nhi = missing_list(m, 0, hi, sizeof hi);
  COLL_WARN(COLL_LOG_NET, "tcp: rank %d: mesh waiting %s: %s%s%s%s%s",
            m->o->rank, coll__setup_warn_waited(w, waited),
            nlo > 0 ? "no connection to " : "", lo,
            nlo > 0 && nhi > 0 ? "; " : "",
            nhi > 0 ? "no connection from " : "", hi);
}

/* One round: dial what is due, poll everything, move bytes. */
static coll_status_t mesh_round(tcp_mesh_t *m, struct pollfd *pf,
                                tcp_hs_t **who) {
  int64_t now = coll__now_ms(),
          wake = m->deadline < 0 ? now + 1000 : m->deadline;
  int j, n = 0, i, listening;
  for (j = 0; j < m->o->rank; j++) {
    tcp_hs_t *h = &m->outs[j];
    if (m->fds[j] >= 0) continue;
    if (h->state == TCP_HS_IDLE && now >= h->retry_at) out_dial(m, j);
    if (h->state == TCP_HS_IDLE && h->retry_at < wake) wake = h->retry_at;
    if (h->state == TCP_HS_IDLE) continue;
    pf[n] = (struct pollfd){h->fd, hs_events(h), 0};
    who[n++] = h;
  }
  coll__tcp_reap_incoming(m, now);
  for (i = 0; i < m->nin; i++) {
    pf[n] = (struct pollfd){m->ins[i].fd, hs_events(&m->ins[i]), 0};
    who[n++] = &m->ins[i];
    if (m->ins[i].deadline < wake) wake = m->ins[i].deadline;
  }
  listening = m->in_missing > 0;
  if (listening && now < m->accept_pause_until) {
    listening = 0;
    if (m->accept_pause_until < wake) wake = m->accept_pause_until;
  }
  if (listening) {
    pf[n] = (struct pollfd){m->lfd, POLLIN, 0};
    who[n++] = NULL;
  }
  if (poll(pf, (nfds_t)n,
           (int)(wake > now ? (wake - now < 1000 ? wake - now : 1000) : 0)) <
          0 &&
      errno != EINTR)
    return coll__err(COLL_ERR_SYSTEM, "tcp: poll(): %s", strerror(errno));
  for (i = 0; i < n; i++) {
    tcp_hs_t *h = who[i];
    if (pf[i].revents == 0 || h == NULL) continue;
    if (h->state == TCP_HS_CONNECT)
      COLL_CHECK(on_connected(m, h));
    else
      COLL_CHECK(coll__tcp_hs_pump(m, h));
  }
  /* Accept after the slots above were served: accepting moves m->ins. */
  if (listening && (pf[n - 1].revents & POLLIN))
    COLL_CHECK(coll__tcp_accept_some(m));
  return COLL_OK;
}

/* Looks up every lower rank (each published only after listening, so the
 * waits do not depend on us; the rendezvous answers them from one table
 * that rank 0 publishes, not a store request each), then connects and
 * accepts until done. */
static coll_status_t mesh_run(tcp_mesh_t *m, const coll_tcp_rdv_t *rdv) {
  int world = m->o->world, j, cap = world + m->in_cap + 1;
  struct pollfd *pf = calloc((size_t)cap, sizeof *pf);
  tcp_hs_t **who = calloc((size_t)cap, sizeof *who);
  coll_status_t s = COLL_OK;
  coll_setup_warn_t warn;
  char text[COLL_TCP_ADDR_MAX];
  if (pf == NULL || who == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto out;
  }
  for (j = 0; j < m->o->rank; j++) {
    tcp_hs_t *h = &m->outs[j];
    s = rdv->lookup(rdv->ctx, j, text, sizeof text, m->deadline);
    if (s != COLL_OK) {
      coll__err_prefix("tcp: looking up a peer's address");
      goto out;
    }
    COLL_CHECK_GOTO(coll__tcp_addr_parse(text, &m->addrs[j], &m->alens[j]), s,
                    out);
    snprintf(h->where, sizeof h->where, "%s", text);
  }
  coll__setup_warn_init(&warn, coll__now_ms());
  while (m->missing > 0) {
    if (m->deadline >= 0 && coll__now_ms() >= m->deadline) {
      s = timed_out(m);
      goto out;
    }
    if (coll__setup_warn_due(&warn)) warn_waiting(m, &warn);
    COLL_CHECK_GOTO(mesh_round(m, pf, who), s, out);
  }
out:
  free(pf);
  free(who);
  return s;
}

static void mesh_cleanup(tcp_mesh_t *m, int failed) {
  int i;
  for (i = 0; m->outs != NULL && i < m->o->rank; i++)
    coll__tcp_hs_close(&m->outs[i]);
  for (i = 0; i < m->nin; i++)
    if (m->ins[i].state != TCP_HS_IDLE)
      coll__tcp_in_drop(m, &m->ins[i],
                        failed ? "handshake unfinished when the mesh failed"
                               : "handshake unfinished when the mesh was "
                                 "complete");
  coll__refusal_flush(&m->refusals);
  if (m->lfd >= 0) close(m->lfd);
  for (i = 0; failed && i < m->o->world; i++) {
    if (m->fds[i] >= 0) close(m->fds[i]);
    m->fds[i] = -1;
  }
  free(m->outs);
  free(m->ins);
  free(m->addrs);
  free(m->alens);
  free(m->why);
}

/* Every connection to a peer runs x's congestion control, where it names
 * one: set once the mesh stands, the same on the side that dialled and on
 * the side that accepted. */
static coll_status_t set_congestion(const coll_tcp_xopts_t *x, const int *fds,
                                    int world) {
  int i, rc;
  if (x->congestion[0] == '\0') return COLL_OK;
  for (i = 0; i < world; i++) {
    if (fds[i] < 0) continue;
    rc = coll__tcp_set_congestion(fds[i], x->congestion);
    if (rc != 0)
      return coll__err(COLL_ERR_SYSTEM,
                       "tcp: congestion control '%s' on the connection to "
                       "rank %d: %s",
                       x->congestion, i, strerror(-rc));
  }
  return COLL_OK;
}

coll_status_t coll__tcp_mesh_connect(const coll_tcp_opts_t *o,
                                     const coll_tcp_rdv_t *rdv,
                                     const coll_tcp_xopts_t *x, int *fds) {
  return coll__tcp_mesh_connect_fd(o, rdv, x, -1, fds);
}

coll_status_t coll__tcp_mesh_connect_fd(const coll_tcp_opts_t *o,
                                        const coll_tcp_rdv_t *rdv,
                                        const coll_tcp_xopts_t *x, int lfd,
                                        int *fds) {
  tcp_mesh_t m;
  char addr[COLL_TCP_ADDR_MAX], what[40];
  coll_status_t s;
  int i, world = o->world;
  memset(&m, 0, sizeof m);
  m.o = o;
  m.x = x;
  m.fds = fds;
  m.lfd = -1;
  for (i = 0; i < world; i++) fds[i] = -1;
  coll__tcp_hs_ctx_init(&m.ctx, o->rank, world, o->job_id, o->token);
  snprintf(what, sizeof what, "tcp: rank %d", o->rank);
  coll__refusal_log_init(&m.refusals, COLL_LOG_NET, what);
  m.missing = world - 1;
  m.in_missing = world - 1 - o->rank;
  m.deadline = coll__deadline(o->timeout_ms);
  m.hs_ms = x->hs_timeout_ms;
  if (o->timeout_ms >= 0 && o->timeout_ms < m.hs_ms) m.hs_ms = o->timeout_ms;
  /* Room for every higher rank at once, beside the strangers. */
  m.in_cap = coll__tcp_in_cap();
  if (m.in_cap < 2 * world + 16) m.in_cap = 2 * world + 16;
  m.outs = calloc((size_t)world, sizeof *m.outs);
  m.ins = calloc((size_t)m.in_cap, sizeof *m.ins);
  m.addrs = calloc((size_t)world, sizeof *m.addrs);
  m.alens = calloc((size_t)world, sizeof *m.alens);
  m.why = calloc((size_t)world, sizeof *m.why);
  if (m.outs == NULL || m.ins == NULL || m.addrs == NULL || m.alens == NULL ||
      m.why == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto out;
  }
  for (i = 0; i < world; i++) {
    m.outs[i].fd = -1;
    m.outs[i].out = 1;
    m.outs[i].peer = i;
  }
  if (lfd >= 0) {
    /* The caller listens already and told its peers where. */
    m.lfd = lfd;
    lfd = -1;
    snprintf(addr, sizeof addr, "(given)");
  } else {
    COLL_CHECK_GOTO(coll__tcp_listen(o->bind_ip, COLL_TCP_BACKLOG, x->sock_buf,
                                     &m.lfd, addr, sizeof addr),
                    s, out);
  }
  s = rdv->publish(rdv->ctx, o->rank, addr);
  if (s != COLL_OK) {
    coll__err_prefix("tcp: publishing this rank's address");
    goto out;
  }
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d of %d listening on %s", o->rank, world,
            addr);
  s = mesh_run(&m, rdv);
  if (s == COLL_OK) s = set_congestion(x, fds, world);
out:
  if (lfd >= 0) close(lfd); /* given, and not taken over yet */
  mesh_cleanup(&m, s != COLL_OK);
  return s;
}
