/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_mesh.c: building the full mesh before any data moves: listen,
 * publish, dial every lower rank, accept every higher one, and run all
 * handshakes side by side in one poll() loop, so a foreign client that
 * stalls or babbles only ever costs its own slot. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/tcp/tcp_hs.h"
#include "transport/tcp/tcp_int.h"
#include "transport/tcp/tcp_sock.h"

/* Handshake steps, in order; outgoing: connect, read CHALLENGE, write HELLO,
 * read WELCOME; incoming: write CHALLENGE, read HELLO, write WELCOME. */
enum { ST_IDLE = 0, ST_CONNECT, ST_IO };

typedef struct hs {
  int fd;
  int out;  /* 1: we dialled `peer` */
  int peer; /* incoming: -1 until its hello checks out */
  int state;
  int kind; /* wire kind of the message being moved */
  int writing;
  int refused; /* incoming: the welcome we are writing is a refusal */
  uint8_t buf[COLL_TCP_HELLO_BYTES];
  size_t need, done;
  uint8_t nonce_s[COLL_TCP_NONCE_BYTES], nonce_c[COLL_TCP_NONCE_BYTES];
  int64_t deadline; /* incoming: the handshake's own deadline */
  int64_t retry_at; /* outgoing: when to dial again */
  int attempts;
  char where[COLL_TCP_ADDR_MAX];
} hs_t;

typedef struct mesh {
  const coll_tcp_opts_t *o;
  const coll_tcp_xopts_t *x;
  coll_tcp_hs_ctx_t ctx;
  int *fds;
  int lfd;
  int missing;      /* connections not established yet */
  int in_missing;   /* of those, incoming */
  int64_t deadline; /* the whole mesh; -1: none */
  int64_t hs_ms;    /* per incoming handshake */
  hs_t *outs;       /* one per lower rank, indexed by rank */
  struct sockaddr_storage *addrs;
  socklen_t *alens;
  hs_t *ins; /* incoming handshakes in progress */
  int nin, in_cap;
  char last_err[TCP_WHY_MAX]; /* last retryable dial failure, for timeouts */
} mesh_t;

static void hs_close(hs_t *h) {
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
  h->state = ST_IDLE;
}

static void hs_io(hs_t *h, int kind, int writing, size_t need) {
  h->state = ST_IO;
  h->kind = kind;
  h->writing = writing;
  h->need = need;
  h->done = 0;
}

/* A dial that failed for a reason that may pass (peer not up, reset):
 * close and try again after a backoff. */
static void out_retry(mesh_t *m, hs_t *h, const char *why) {
  int64_t backoff = 10LL << (h->attempts < 6 ? h->attempts : 6);
  snprintf(m->last_err, sizeof m->last_err, "rank %d at %s: %s", h->peer,
           h->where, why);
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d: dialling %s; retrying", m->o->rank,
            m->last_err);
  hs_close(h);
  h->attempts++;
  h->retry_at = coll__now_ms() + backoff;
}

static void out_dial(mesh_t *m, int j) {
  hs_t *h = &m->outs[j];
  int fd = coll__tcp_socket(m->addrs[j].ss_family, m->x->sock_buf);
  if (fd < 0) {
    out_retry(m, h, strerror(-fd));
    return;
  }
  h->fd = fd;
  if (connect(fd, (struct sockaddr *)&m->addrs[j], m->alens[j]) == 0 ||
      errno == EINPROGRESS) {
    h->state = ST_CONNECT;
    return;
  }
  out_retry(m, h, strerror(errno));
}

static void established(mesh_t *m, hs_t *h) {
  m->fds[h->peer] = h->fd;
  h->fd = -1;
  h->state = ST_IDLE;
  m->missing--;
  if (!h->out) m->in_missing--;
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d: connected to rank %d (%s)", m->o->rank,
            h->peer, h->out ? "dialled" : "accepted");
}

/* Refuses an incoming connection: logs why and sends the verdict. */
static void in_refuse(mesh_t *m, hs_t *h, coll_tcp_hs_result_t res) {
  COLL_WARN(COLL_LOG_NET, "tcp: rank %d: refusing connection from %s: %s",
            m->o->rank, h->where, coll__tcp_hs_result_text(res));
  h->refused = 1;
  coll__tcp_hs_welcome(&m->ctx, -1, res, h->nonce_s, h->nonce_c, h->buf);
  hs_io(h, COLL_TCP_K_WELCOME, 1, COLL_TCP_WELCOME_BYTES);
}

/* One message of the handshake has been moved; take the next step. A final
 * failure (a refusal, an impostor) returns its status. */
static coll_status_t step_done(mesh_t *m, hs_t *h) {
  char why[TCP_WHY_MAX];
  coll_status_t s;
  if (h->out && h->kind == COLL_TCP_K_CHALLENGE) {
    s = coll__tcp_hs_check_challenge(&m->ctx, h->buf, h->peer, h->nonce_s, why,
                                     sizeof why);
    if (s != COLL_OK) goto final;
    s = coll__tcp_hs_nonce(h->nonce_c);
    if (s != COLL_OK) return s;
    coll__tcp_hs_hello(&m->ctx, h->peer, h->nonce_s, h->nonce_c, h->buf);
    hs_io(h, COLL_TCP_K_HELLO, 1, COLL_TCP_HELLO_BYTES);
  } else if (h->out && h->kind == COLL_TCP_K_HELLO) {
    hs_io(h, COLL_TCP_K_WELCOME, 0, COLL_TCP_WELCOME_BYTES);
  } else if (h->out) {
    s = coll__tcp_hs_check_welcome(&m->ctx, h->buf, h->peer, h->nonce_s,
                                   h->nonce_c, why, sizeof why);
    if (s != COLL_OK) goto final;
    established(m, h);
  } else if (h->kind == COLL_TCP_K_CHALLENGE) {
    hs_io(h, COLL_TCP_K_HELLO, 0, COLL_TCP_HELLO_BYTES);
  } else if (h->kind == COLL_TCP_K_HELLO) {
    int peer = -1;
    coll_tcp_hs_result_t res = coll__tcp_hs_check_hello(
        &m->ctx, h->buf, h->nonce_s, &peer, h->nonce_c);
    if (res == COLL_TCP_HS_OK && m->fds[peer] >= 0) res = COLL_TCP_HS_DUPLICATE;
    if (res != COLL_TCP_HS_OK) {
      in_refuse(m, h, res);
      return COLL_OK;
    }
    h->peer = peer;
    coll__tcp_hs_welcome(&m->ctx, peer, COLL_TCP_HS_OK, h->nonce_s, h->nonce_c,
                         h->buf);
    hs_io(h, COLL_TCP_K_WELCOME, 1, COLL_TCP_WELCOME_BYTES);
  } else if (h->refused) {
    hs_close(h);
  } else {
    established(m, h);
  }
  return COLL_OK;
final:
  return coll__err(s, "tcp: rank %d: handshake with rank %d at %s: %s",
                   m->o->rank, h->peer, h->where, why);
}

/* Moves bytes of the current message until it is done or the socket would
 * block. Incoming failures close the slot; outgoing ones retry. */
static coll_status_t hs_pump(mesh_t *m, hs_t *h) {
  while (h->state == ST_IO) {
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
      if (h->out) {
        out_retry(m, h, why);
      } else {
        if (!h->refused)
          COLL_WARN(COLL_LOG_NET, "tcp: rank %d: connection from %s %s",
                    m->o->rank, h->where,
                    n == 0 ? "closed before finishing its handshake" : why);
        hs_close(h);
      }
      return COLL_OK;
    }
    h->done += (size_t)n;
    /* A stranger's bytes are judged as soon as the magic is in. */
    if (!h->out && !h->writing && h->done >= 4 &&
        coll__get_le32(h->buf) != COLL_TCP_MAGIC) {
      COLL_WARN(COLL_LOG_NET,
                "tcp: rank %d: closing connection from %s: not a libcoll "
                "handshake",
                m->o->rank, h->where);
      hs_close(h);
      return COLL_OK;
    }
    if (h->done == h->need) COLL_CHECK(step_done(m, h));
  }
  return COLL_OK;
}

static coll_status_t on_connected(mesh_t *m, hs_t *h) {
  int err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
  if (err != 0) {
    out_retry(m, h, strerror(err));
    return COLL_OK;
  }
  hs_io(h, COLL_TCP_K_CHALLENGE, 0, COLL_TCP_CHALLENGE_BYTES);
  return hs_pump(m, h);
}

/* Accepts what is waiting; each newcomer gets a challenge and a deadline. */
static coll_status_t accept_some(mesh_t *m) {
  while (m->nin < m->in_cap) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    hs_t *h;
    int fd = accept4(m->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return COLL_OK; /* EAGAIN, or a client gone already */
    /* Linux copies TCP_NODELAY from the listener; say it for the rest. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    h = &m->ins[m->nin++];
    memset(h, 0, sizeof *h);
    h->fd = fd;
    h->peer = -1;
    h->deadline = coll__now_ms() + m->hs_ms;
    coll__tcp_addr_format((struct sockaddr *)&ss, h->where, sizeof h->where);
    if (coll__tcp_hs_nonce(h->nonce_s) != COLL_OK) return COLL_ERR_SYSTEM;
    coll__tcp_hs_challenge(&m->ctx, h->nonce_s, h->buf);
    hs_io(h, COLL_TCP_K_CHALLENGE, 1, COLL_TCP_CHALLENGE_BYTES);
    COLL_CHECK(hs_pump(m, h));
  }
  return COLL_OK;
}

/* Drops closed incoming slots and those past their deadline. */
static void reap_incoming(mesh_t *m, int64_t now) {
  int i, k = 0;
  for (i = 0; i < m->nin; i++) {
    hs_t *h = &m->ins[i];
    if (h->state != ST_IDLE && now >= h->deadline) {
      COLL_WARN(COLL_LOG_NET,
                "tcp: rank %d: closing connection from %s: no valid "
                "handshake within %lld ms",
                m->o->rank, h->where, (long long)m->hs_ms);
      hs_close(h);
    }
    if (h->state != ST_IDLE) m->ins[k++] = *h;
  }
  m->nin = k;
}

static short hs_events(const hs_t *h) {
  if (h->state == ST_CONNECT) return POLLOUT;
  return h->writing ? POLLOUT : POLLIN;
}

/* "1, 3, 4" for the ranks whose connection is missing on one side. */
static void missing_list(const mesh_t *m, int lower, char *buf, size_t cap) {
  int j, n = 0;
  size_t used = 0;
  buf[0] = '\0';
  for (j = 0; j < m->o->world && used + 12 < cap; j++) {
    if (j == m->o->rank || m->fds[j] >= 0 || (j < m->o->rank) != lower)
      continue;
    used +=
        (size_t)snprintf(buf + used, cap - used, "%s%d", n++ ? ", " : "", j);
  }
  if (n == 0) snprintf(buf, cap, "none");
}

static coll_status_t timed_out(mesh_t *m) {
  char lo[128], hi[128];
  missing_list(m, 1, lo, sizeof lo);
  missing_list(m, 0, hi, sizeof hi);
  return coll__err(COLL_ERR_TIMEOUT,
                   "tcp: rank %d: mesh not connected within %lld ms: no "
                   "connection to ranks %s%s%s; none from ranks %s",
                   m->o->rank, (long long)m->o->timeout_ms, lo,
                   m->last_err[0] ? " (last: " : "", m->last_err[0] ? ")" : "",
                   hi);
}

/* One round: dial what is due, poll everything, move bytes. */
static coll_status_t mesh_round(mesh_t *m, struct pollfd *pf, hs_t **who) {
  int64_t now = coll__now_ms(),
          wake = m->deadline < 0 ? now + 1000 : m->deadline;
  int j, n = 0, i, listening;
  for (j = 0; j < m->o->rank; j++) {
    hs_t *h = &m->outs[j];
    if (m->fds[j] >= 0) continue;
    if (h->state == ST_IDLE && now >= h->retry_at) out_dial(m, j);
    if (h->state == ST_IDLE && h->retry_at < wake) wake = h->retry_at;
    if (h->state == ST_IDLE) continue;
    pf[n] = (struct pollfd){h->fd, hs_events(h), 0};
    who[n++] = h;
  }
  reap_incoming(m, now);
  for (i = 0; i < m->nin; i++) {
    pf[n] = (struct pollfd){m->ins[i].fd, hs_events(&m->ins[i]), 0};
    who[n++] = &m->ins[i];
    if (m->ins[i].deadline < wake) wake = m->ins[i].deadline;
  }
  listening = m->in_missing > 0 && m->nin < m->in_cap;
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
    hs_t *h = who[i];
    if (pf[i].revents == 0 || h == NULL) continue;
    if (h->state == ST_CONNECT)
      COLL_CHECK(on_connected(m, h));
    else
      COLL_CHECK(hs_pump(m, h));
  }
  /* Accept after the slots above were served: accepting moves m->ins. */
  if (listening && (pf[n - 1].revents & POLLIN)) COLL_CHECK(accept_some(m));
  return COLL_OK;
}

/* Looks up every lower rank (each published only after listening, so the
 * waits do not depend on us), then connects and accepts until done. */
static coll_status_t mesh_run(mesh_t *m, const coll_tcp_rdv_t *rdv) {
  int world = m->o->world, j, cap = world + m->in_cap + 1;
  struct pollfd *pf = calloc((size_t)cap, sizeof *pf);
  hs_t **who = calloc((size_t)cap, sizeof *who);
  coll_status_t s = COLL_OK;
  char text[COLL_TCP_ADDR_MAX];
  if (pf == NULL || who == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto out;
  }
  for (j = 0; j < m->o->rank; j++) {
    hs_t *h = &m->outs[j];
    s = rdv->lookup(rdv->ctx, j, text, sizeof text, m->deadline);
    if (s != COLL_OK) {
      coll__err_prefix("tcp: looking up a peer's address");
      goto out;
    }
    COLL_CHECK_GOTO(coll__tcp_addr_parse(text, &m->addrs[j], &m->alens[j]), s,
                    out);
    snprintf(h->where, sizeof h->where, "%s", text);
  }
  while (m->missing > 0) {
    if (m->deadline >= 0 && coll__now_ms() >= m->deadline) {
      s = timed_out(m);
      goto out;
    }
    COLL_CHECK_GOTO(mesh_round(m, pf, who), s, out);
  }
out:
  free(pf);
  free(who);
  return s;
}

static void mesh_cleanup(mesh_t *m, int failed) {
  int i;
  for (i = 0; m->outs != NULL && i < m->o->rank; i++) hs_close(&m->outs[i]);
  for (i = 0; i < m->nin; i++) {
    if (m->ins[i].state != ST_IDLE)
      COLL_WARN(COLL_LOG_NET,
                "tcp: rank %d: closing connection from %s: its handshake "
                "was unfinished when the mesh %s",
                m->o->rank, m->ins[i].where, failed ? "failed" : "completed");
    hs_close(&m->ins[i]);
  }
  if (m->lfd >= 0) close(m->lfd);
  for (i = 0; failed && i < m->o->world; i++) {
    if (m->fds[i] >= 0) close(m->fds[i]);
    m->fds[i] = -1;
  }
  free(m->outs);
  free(m->ins);
  free(m->addrs);
  free(m->alens);
}

coll_status_t coll__tcp_mesh_connect(const coll_tcp_opts_t *o,
                                     const coll_tcp_rdv_t *rdv,
                                     const coll_tcp_xopts_t *x, int *fds) {
  mesh_t m;
  char addr[COLL_TCP_ADDR_MAX];
  coll_status_t s;
  int i, world = o->world;
  memset(&m, 0, sizeof m);
  m.o = o;
  m.x = x;
  m.fds = fds;
  m.lfd = -1;
  for (i = 0; i < world; i++) fds[i] = -1;
  coll__tcp_hs_ctx_init(&m.ctx, o->rank, world, o->job_id, o->token);
  m.missing = world - 1;
  m.in_missing = world - 1 - o->rank;
  m.deadline = coll__deadline(o->timeout_ms);
  m.hs_ms = x->hs_timeout_ms;
  if (o->timeout_ms >= 0 && o->timeout_ms < m.hs_ms) m.hs_ms = o->timeout_ms;
  m.in_cap = 2 * world + 16;
  m.outs = calloc((size_t)world, sizeof *m.outs);
  m.ins = calloc((size_t)m.in_cap, sizeof *m.ins);
  m.addrs = calloc((size_t)world, sizeof *m.addrs);
  m.alens = calloc((size_t)world, sizeof *m.alens);
  if (m.outs == NULL || m.ins == NULL || m.addrs == NULL || m.alens == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto out;
  }
  for (i = 0; i < world; i++) {
    m.outs[i].fd = -1;
    m.outs[i].out = 1;
    m.outs[i].peer = i;
  }
  COLL_CHECK_GOTO(coll__tcp_listen(o->bind_ip, world + 64, x->sock_buf, &m.lfd,
                                   addr, sizeof addr),
                  s, out);
  s = rdv->publish(rdv->ctx, o->rank, addr);
  if (s != COLL_OK) {
    coll__err_prefix("tcp: publishing this rank's address");
    goto out;
  }
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d of %d listening on %s", o->rank, world,
            addr);
  s = mesh_run(&m, rdv);
out:
  mesh_cleanup(&m, s != COLL_OK);
  return s;
}
