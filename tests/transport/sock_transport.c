/* SPDX-License-Identifier: Apache-2.0 */
/* sock_transport.c: the test socket transport's world, endpoints and
 * message path: isend writes a frame at once (so a send completes when
 * posted, as a buffered send may), a receiving thread per endpoint reads
 * every peer's frames and matches them to receives by (peer, tag) in
 * order, keeping the rest until a receive comes. Written against
 * coll_transport.h alone. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sock_int.h"

/* ---- the world ------------------------------------------------------------
 */

sock_world_t *sock_world_new(int n) {
  sock_world_t *w;
  int i, j, p[2], q[2];
  if (n < 1 || n > SOCK_MAX_WORLD) return NULL;
  w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  w->refs = 1;
  w->n = n;
  for (i = 0; i < n; i++) w->fd[i][i] = w->lfd[i][i] = -1;
  for (i = 0; i < n; i++)
    for (j = i + 1; j < n; j++) {
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) != 0 ||
          socketpair(AF_UNIX, SOCK_STREAM, 0, q) != 0) {
        w->fd[i][j] = w->fd[j][i] = w->lfd[i][j] = w->lfd[j][i] = -1;
        sock_world_release(w);
        return NULL;
      }
      w->fd[i][j] = p[0], w->fd[j][i] = p[1];
      w->lfd[i][j] = q[0], w->lfd[j][i] = q[1];
    }
  return w;
}

void sock_world_ref(sock_world_t *w) {
  pthread_mutex_lock(&w->mu);
  w->refs++;
  pthread_mutex_unlock(&w->mu);
}

void sock_world_release(sock_world_t *w) {
  int i, j, last;
  if (w == NULL) return;
  pthread_mutex_lock(&w->mu);
  last = --w->refs == 0;
  pthread_mutex_unlock(&w->mu);
  if (!last) return;
  for (i = 0; i < w->n; i++)
    for (j = 0; j < w->n; j++) {
      if (w->fd[i][j] >= 0) close(w->fd[i][j]);
      if (w->lfd[i][j] >= 0) close(w->lfd[i][j]);
    }
  sock_world_release(w->next);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

void sock_crash(sock_world_t *w, int rank) {
  int j;
  for (j = 0; j < w->n; j++)
    if (j != rank) {
      shutdown(w->fd[rank][j], SHUT_RDWR);
      shutdown(w->lfd[rank][j], SHUT_RDWR);
    }
}

void sock_crash_link(sock_world_t *w, int a, int b) {
  shutdown(w->fd[a][b], SHUT_RDWR);
  shutdown(w->fd[b][a], SHUT_RDWR);
}

/* ---- frames ---------------------------------------------------------------
 */

static int write_all(int fd, const void *buf, size_t len) {
  const unsigned char *p = buf;
  while (len > 0) {
    ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, len -= (size_t)k;
  }
  return 0;
}

/* 1: read; 0: the socket ended before the first byte; -1: an error or
 * an end in the middle. */
static int read_all(int fd, void *buf, size_t len) {
  unsigned char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t k = recv(fd, p + got, len - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) return got == 0 ? 0 : -1;
    if (k < 0) return -1;
    got += (size_t)k;
  }
  return 1;
}

int sock_send_frame(sock_ep_t *e, int peer, uint32_t kind, uint32_t tag,
                    const void *buf, size_t len) {
  uint64_t h[2];
  int rc;
  h[0] = (uint64_t)kind | (uint64_t)tag << 32;
  h[1] = len;
  pthread_mutex_lock(&e->smu[peer]);
  rc = write_all(e->w->fd[e->rank][peer], h, sizeof h);
  if (rc == 0 && len > 0) rc = write_all(e->w->fd[e->rank][peer], buf, len);
  pthread_mutex_unlock(&e->smu[peer]);
  return rc;
}

/* ---- requests -------------------------------------------------------------
 */

void sock_close_locked(sock_ep_t *e, coll_status_t s, const char *why) {
  sock_req_t *r;
  if (!e->closed) {
    e->closed = 1;
    e->closed_st = s;
    snprintf(e->closed_why, sizeof e->closed_why, "%s", why);
  }
  for (r = e->posted; r != NULL; r = r->next) {
    r->done = 1;
    r->st = e->closed_st;
    snprintf(r->why, sizeof r->why, "%s", e->closed_why);
  }
  e->posted = NULL;
  pthread_cond_broadcast(&e->cv);
}

static sock_req_t *req_new(int peer, uint32_t tag, void *buf, size_t cap) {
  sock_req_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->cap = cap;
  return r;
}

static void req_finish(sock_req_t *r, const void *data, size_t len) {
  if (len > 0 && r->cap > 0) memcpy(r->buf, data, len < r->cap ? len : r->cap);
  r->len = len;
  r->st = len > r->cap ? COLL_ERR_LENGTH_MISMATCH : COLL_OK;
  if (r->st != COLL_OK)
    snprintf(r->why, sizeof r->why, "sock: %zu bytes from rank %d into %zu",
             len, r->peer, r->cap);
  r->done = 1;
}

static coll_status_t sock_isend(void *ctx, int peer, uint32_t tag,
                                const void *buf, size_t len, void **req) {
  sock_ep_t *e = ctx;
  sock_req_t *r;
  coll_status_t s = COLL_OK;
  char why[192];
  if (peer < 0 || peer >= e->world || peer == e->rank)
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "sock: no peer %d", peer);
  pthread_mutex_lock(&e->mu);
  if (e->closed)
    s = e->closed_st, snprintf(why, sizeof why, "%s", e->closed_why);
  pthread_mutex_unlock(&e->mu);
  if (s != COLL_OK) return coll_set_last_error(s, "%s", why);
  r = req_new(peer, tag, NULL, len);
  if (r == NULL) return coll_set_last_error(COLL_ERR_NO_MEMORY, "sock: memory");
  pthread_mutex_lock(&e->mu);
  if (e->gone[peer]) r->st = COLL_ERR_PEER_LOST;
  pthread_mutex_unlock(&e->mu);
  if (r->st != COLL_OK)
    snprintf(r->why, sizeof r->why, "sock: rank %d lost", peer);
  else if (sock_send_frame(e, peer, SK_MSG, tag, buf, len) != 0) {
    r->st = COLL_ERR_PEER_LOST;
    snprintf(r->why, sizeof r->why, "sock: rank %d lost (send failed: %s)",
             peer, strerror(errno));
  }
  r->len = len;
  r->done = 1;
  *req = r;
  return COLL_OK;
}

static coll_status_t sock_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                size_t cap, void **req) {
  sock_ep_t *e = ctx;
  sock_req_t *r, **pp;
  sock_msg_t **mp, *m;
  if (peer < 0 || peer >= e->world || peer == e->rank)
    return coll_set_last_error(COLL_ERR_INVALID_ARG, "sock: no peer %d", peer);
  r = req_new(peer, tag, buf, cap);
  if (r == NULL) return coll_set_last_error(COLL_ERR_NO_MEMORY, "sock: memory");
  pthread_mutex_lock(&e->mu);
  if (e->closed) {
    coll_status_t s = e->closed_st;
    coll_set_last_error(s, "%s", e->closed_why);
    pthread_mutex_unlock(&e->mu);
    free(r);
    return s;
  }
  for (mp = &e->unexp; *mp != NULL; mp = &(*mp)->next)
    if ((*mp)->peer == peer && (*mp)->tag == tag) break;
  if ((m = *mp) != NULL) {
    *mp = m->next;
    req_finish(r, m->data, m->len);
    free(m);
  } else if (e->gone[peer]) {
    r->done = 1;
    r->st = COLL_ERR_PEER_LOST;
    snprintf(r->why, sizeof r->why, "sock: rank %d lost", peer);
  } else {
    for (pp = &e->posted; *pp != NULL; pp = &(*pp)->next) continue;
    *pp = r;
  }
  pthread_mutex_unlock(&e->mu);
  *req = r;
  return COLL_OK;
}

static coll_status_t sock_wait(void *ctx, void *req, int64_t timeout_ms,
                               size_t *len) {
  sock_ep_t *e = ctx;
  sock_req_t *r = req;
  struct timespec until;
  coll_status_t s;
  clock_gettime(CLOCK_REALTIME, &until);
  if (timeout_ms > 0) {
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
      until.tv_sec++, until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&e->mu);
  while (!r->done && timeout_ms != 0)
    if (timeout_ms < 0)
      pthread_cond_wait(&e->cv, &e->mu);
    else if (pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT)
      break;
  if (!r->done) {
    pthread_mutex_unlock(&e->mu);
    return coll_set_last_error(COLL_ERR_TIMEOUT, "sock: not yet");
  }
  pthread_mutex_unlock(&e->mu);
  s = r->st;
  if (s != COLL_OK) coll_set_last_error(s, "%s", r->why);
  if (len != NULL && (s == COLL_OK || s == COLL_ERR_LENGTH_MISMATCH))
    *len = r->len;
  free(r);
  return s;
}

static void sock_abort(void *ctx) {
  sock_ep_t *e = ctx;
  coll_fail_origin_t o = {e->rank, COLL_FAIL_ABORTED, 0};
  sock_fail(e, &o);
}

static void sock_destroy(void *ctx) { sock_ep_free(ctx); }

/* ---- the receiving thread -------------------------------------------------
 */

static void on_msg(sock_ep_t *e, int peer, uint32_t tag, unsigned char *data,
                   size_t len) {
  sock_req_t **pp, *r;
  sock_msg_t *m, **mp;
  pthread_mutex_lock(&e->mu);
  for (pp = &e->posted; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->peer == peer && (*pp)->tag == tag) break;
  if ((r = *pp) != NULL) {
    *pp = r->next;
    req_finish(r, data, len);
    pthread_cond_broadcast(&e->cv);
  } else if (!e->closed && (m = malloc(sizeof *m + len)) != NULL) {
    m->next = NULL;
    m->peer = peer;
    m->tag = tag;
    m->len = len;
    if (len > 0) memcpy(m->data, data, len);
    for (mp = &e->unexp; *mp != NULL; mp = &(*mp)->next) continue;
    *mp = m;
  }
  pthread_mutex_unlock(&e->mu);
}

/* One frame from peer; 0, or -1 when its socket ended. */
static int read_frame(sock_ep_t *e, int peer) {
  uint64_t h[2];
  unsigned char *p = NULL;
  uint32_t kind, tag;
  int rc = read_all(e->w->fd[e->rank][peer], h, sizeof h);
  if (rc <= 0) {
    sock_peer_gone(e, peer, 0, rc == 0 ? 0 : errno);
    return -1;
  }
  kind = (uint32_t)h[0], tag = (uint32_t)(h[0] >> 32);
  if (h[1] > ((uint64_t)1 << 32) || (h[1] > 0 && (p = malloc(h[1])) == NULL) ||
      (h[1] > 0 && read_all(e->w->fd[e->rank][peer], p, h[1]) != 1)) {
    free(p);
    sock_peer_gone(e, peer, 0, errno);
    return -1;
  }
  if (kind == SK_MSG)
    on_msg(e, peer, tag, p, h[1]);
  else if (kind == SK_BYE)
    sock_peer_gone(e, peer, 1, 0);
  else
    sock_v2_frame(e, peer, kind, p, h[1]);
  free(p);
  return kind == SK_BYE ? -1 : 0;
}

static void *rx_main(void *arg) {
  sock_ep_t *e = arg;
  struct pollfd pf[SOCK_MAX_WORLD + 1];
  int peer_of[SOCK_MAX_WORLD + 1], live[SOCK_MAX_WORLD] = {0}, i, n;
  for (i = 0; i < e->world; i++) live[i] = i != e->rank;
  for (;;) {
    n = 0;
    pf[n].fd = e->wake[0], pf[n].events = POLLIN, peer_of[n++] = -1;
    for (i = 0; i < e->world; i++)
      if (live[i])
        pf[n].fd = e->w->fd[e->rank][i], pf[n].events = POLLIN,
        peer_of[n++] = i;
    if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR) break;
    if (pf[0].revents != 0) break;
    for (i = 1; i < n; i++)
      if (pf[i].revents != 0 && read_frame(e, peer_of[i]) != 0)
        live[peer_of[i]] = 0;
  }
  return NULL;
}

/* ---- endpoints ------------------------------------------------------------
 */

sock_ep_t *sock_ep_new(sock_world_t *w, int rank) {
  sock_ep_t *e = calloc(1, sizeof *e);
  int i;
  if (e == NULL) return NULL;
  if (pipe(e->wake) != 0) {
    free(e);
    return NULL;
  }
  e->w = w;
  e->rank = rank;
  e->world = w->n;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  for (i = 0; i < SOCK_MAX_WORLD; i++) pthread_mutex_init(&e->smu[i], NULL);
  atomic_init(&e->bound, NULL);
  sock_world_ref(w);
  if (pthread_create(&e->rx, NULL, rx_main, e) != 0) {
    close(e->wake[0]);
    close(e->wake[1]);
    sock_world_release(w);
    free(e);
    return NULL;
  }
  return e;
}

/* Says goodbye (peers report this rank as having left), ends the links so
 * no agreement waits for it, and stops the receiving thread. */
void sock_ep_free(sock_ep_t *e) {
  int i;
  char c = 0;
  sock_msg_t *m;
  for (i = 0; i < e->world; i++)
    if (i != e->rank) {
      (void)sock_send_frame(e, i, SK_BYE, 0, NULL, 0);
      shutdown(e->w->fd[e->rank][i], SHUT_WR);
      shutdown(e->w->lfd[e->rank][i], SHUT_WR);
    }
  /* A pipe with room: the one byte always goes. */
  (void)!write(e->wake[1], &c, 1);
  pthread_join(e->rx, NULL);
  close(e->wake[0]);
  close(e->wake[1]);
  while ((m = e->unexp) != NULL) {
    e->unexp = m->next;
    free(m);
  }
  for (i = 0; i < SOCK_MAX_WORLD; i++) pthread_mutex_destroy(&e->smu[i]);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  sock_world_release(e->w);
  free(e);
}

static const coll_transport_ops_t sock_ops = {
    .size = sizeof(coll_transport_ops_t),
    .version = COLL_TRANSPORT_OPS_VERSION,
    .name = "sock",
    .isend = sock_isend,
    .irecv = sock_irecv,
    .wait = sock_wait,
    .abort = sock_abort,
    .destroy = sock_destroy,
    .fail = sock_fail,
    .origin = sock_origin,
    .bind = sock_bind,
    .ask = sock_ask,
    .tell = sock_tell,
    .heard = sock_heard,
    .link_send = sock_link_send,
    .link_recv = sock_link_recv,
    .shrink = sock_shrink,
    .leave = sock_leave,
};

coll_status_t sock_endpoint(sock_world_t *w, int rank, coll_transport_t **out) {
  sock_ep_t *e = sock_ep_new(w, rank);
  coll_status_t s;
  if (e == NULL)
    return coll_set_last_error(COLL_ERR_SYSTEM, "sock: no endpoint");
  s = coll_transport_create(&sock_ops, e, rank, w->n, out);
  if (s != COLL_OK) sock_ep_free(e);
  return s;
}
