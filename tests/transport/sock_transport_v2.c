/* SPDX-License-Identifier: Apache-2.0 */
/* sock_transport_v2.c: the test socket transport's version 2 slots, as
 * coll_transport.h states them and nothing more: origins told before
 * anything closes and the first one heard forwarded; "where are you?" answered
 * by the receiving thread whatever the rank's threads do; the report told and
 * kept; shrink's links on their own sockets, and the survivors' world wired by
 * the first survivor that gets there. Written against coll_transport.h alone.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "sock_int.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- origins --------------------------------------------------------------
 */

coll_status_t sock_origin_status(const coll_fail_origin_t *o) {
  switch (o->cause) {
    case COLL_FAIL_ABORTED:
    case COLL_FAIL_TIMEOUT: return COLL_ERR_ABORTED;
    case COLL_FAIL_PROTOCOL: return COLL_ERR_PROTOCOL;
    case COLL_FAIL_FAILED: return (coll_status_t)o->detail;
    default: return COLL_ERR_PEER_LOST;
  }
}

void sock_origin_why(const coll_fail_origin_t *o, char *buf, size_t n) {
  snprintf(buf, n, "sock: rank %d failed (cause %d)", o->rank, o->cause);
}

/* A peer told where a failure started: the first one heard sticks, and
 * this endpoint's requests end for it. */
static void heard_origin(sock_ep_t *e, const coll_fail_origin_t *o) {
  char why[192];
  sock_origin_why(o, why, sizeof why);
  pthread_mutex_lock(&e->mu);
  if (!e->have_heard) e->heard = *o, e->have_heard = 1;
  sock_close_locked(e, sock_origin_status(&e->heard), why);
  pthread_mutex_unlock(&e->mu);
}

/* A peer that said goodbye: only the requests that involve it end (what
 * it sent before it went is still received, and the others carry on). A
 * peer lost without goodbye: everything ends, as coll_transport.h allows,
 * since the comm cannot go on without it and the wait that learns of it
 * may be on another peer. */
void sock_peer_gone(sock_ep_t *e, int peer, int bye, int err) {
  coll_fail_origin_t o = {peer, bye ? COLL_FAIL_DESTROYED : COLL_FAIL_LOST,
                          bye ? 0u : (uint32_t)err};
  sock_req_t **pp = &e->posted, *r;
  pthread_mutex_lock(&e->mu);
  e->gone[peer] = 1;
  if (!e->have_heard) e->heard = o, e->have_heard = 1;
  while ((r = *pp) != NULL)
    if (r->peer == peer) {
      *pp = r->next;
      r->done = 1;
      r->st = COLL_ERR_PEER_LOST;
      sock_origin_why(&o, r->why, sizeof r->why);
    } else {
      pp = &r->next;
    }
  if (!bye) {
    char why[192];
    sock_origin_why(&o, why, sizeof why);
    sock_close_locked(e, COLL_ERR_PEER_LOST, why);
  }
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void sock_fail(void *ctx, const coll_fail_origin_t *o) {
  sock_ep_t *e = ctx;
  coll_fail_origin_t send;
  char why[192];
  int i, tell;
  pthread_mutex_lock(&e->mu);
  if (!e->have_own) e->own = e->have_heard ? e->heard : *o, e->have_own = 1;
  send = e->own;
  tell = !e->told;
  e->told = 1;
  pthread_mutex_unlock(&e->mu);
  /* Told before anything closes, so a peer learns the origin before it
   * sees this rank stop. */
  if (tell)
    for (i = 0; i < e->world; i++)
      if (i != e->rank) {
        uint32_t p[3] = {(uint32_t)send.rank, (uint32_t)send.cause,
                         send.detail};
        (void)sock_send_frame(e, i, SK_ORIGIN, 0, p, sizeof p);
      }
  sock_origin_why(&send, why, sizeof why);
  pthread_mutex_lock(&e->mu);
  sock_close_locked(e, sock_origin_status(&send), why);
  pthread_mutex_unlock(&e->mu);
}

int sock_origin(void *ctx, coll_fail_origin_t *o) {
  sock_ep_t *e = ctx;
  int have;
  pthread_mutex_lock(&e->mu);
  have = e->have_own || e->have_heard;
  if (have) *o = e->have_own ? e->own : e->heard;
  pthread_mutex_unlock(&e->mu);
  return have;
}

/* ---- the desync report ----------------------------------------------------
 */

void sock_bind(void *ctx, coll_transport_t *t) {
  atomic_store(&((sock_ep_t *)ctx)->bound, t);
}

void sock_v2_frame(sock_ep_t *e, int peer, uint32_t kind, const void *p,
                   size_t len) {
  unsigned char where[COLL_TRANSPORT_WHERE_BYTES];
  coll_transport_t *t;
  if (kind == SK_ORIGIN && len == 3 * sizeof(uint32_t)) {
    const uint32_t *w = p;
    coll_fail_origin_t o = {(int)w[0], (int)w[1], w[2]};
    heard_origin(e, &o);
  } else if (kind == SK_ASK) {
    /* Answered here, on the receiving thread: the rank's own threads may
     * be anywhere. */
    if ((t = atomic_load(&e->bound)) == NULL) return;
    coll_transport_where(t, where);
    (void)sock_send_frame(e, peer, SK_WHERE, 0, where, sizeof where);
  } else if (kind == SK_WHERE && len == COLL_TRANSPORT_WHERE_BYTES) {
    pthread_mutex_lock(&e->mu);
    if (e->ans != NULL) {
      memcpy(e->ans[peer], p, len);
      e->answered[peer] = 1;
      pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
  } else if (kind == SK_REPORT && len > 0 && len < sizeof e->report) {
    pthread_mutex_lock(&e->mu);
    if (!e->have_report) {
      memcpy(e->report, p, len);
      e->report[len] = '\0';
      e->have_report = 1;
    }
    pthread_mutex_unlock(&e->mu);
  }
}

static int all_answered(const sock_ep_t *e) {
  int i;
  for (i = 0; i < e->world; i++)
    if (i != e->rank && !e->gone[i] && !e->answered[i]) return 0;
  return 1;
}

void sock_ask(void *ctx, int64_t budget_ms,
              unsigned char (*where)[COLL_TRANSPORT_WHERE_BYTES],
              unsigned char *answered) {
  sock_ep_t *e = ctx;
  struct timespec until;
  int i;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += budget_ms / 1000;
  until.tv_nsec += (long)(budget_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L)
    until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&e->mu);
  e->ans = where;
  e->answered = answered;
  pthread_mutex_unlock(&e->mu);
  for (i = 0; i < e->world; i++)
    if (i != e->rank) (void)sock_send_frame(e, i, SK_ASK, 0, NULL, 0);
  pthread_mutex_lock(&e->mu);
  while (!all_answered(e))
    if (pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT) break;
  e->ans = NULL;
  e->answered = NULL;
  pthread_mutex_unlock(&e->mu);
}

void sock_tell(void *ctx, const char *report) {
  sock_ep_t *e = ctx;
  int i;
  for (i = 0; i < e->world; i++)
    if (i != e->rank)
      (void)sock_send_frame(e, i, SK_REPORT, 0, report, strlen(report));
}

int sock_heard(void *ctx, char *buf, size_t n) {
  sock_ep_t *e = ctx;
  int have;
  pthread_mutex_lock(&e->mu);
  have = e->have_report;
  if (have) snprintf(buf, n, "%s", e->report);
  pthread_mutex_unlock(&e->mu);
  return have;
}

/* ---- shrink ---------------------------------------------------------------
 */

/* A link frame: 4 bytes of length, then the message. */
coll_status_t sock_link_send(void *ctx, int peer, const void *msg, size_t len,
                             int64_t timeout_ms) {
  sock_ep_t *e = ctx;
  uint32_t n = (uint32_t)len;
  int fd = e->w->lfd[e->rank][peer];
  (void)timeout_ms; /* a few hundred bytes always fit the socket's buffer */
  if (send(fd, &n, sizeof n, MSG_NOSIGNAL) != (ssize_t)sizeof n ||
      (len > 0 && send(fd, msg, len, MSG_NOSIGNAL) != (ssize_t)len))
    return coll_set_last_error(COLL_ERR_PEER_LOST, "sock: rank %d left", peer);
  return COLL_OK;
}

static coll_status_t link_read(int fd, void *buf, size_t len, int peer,
                               int64_t deadline) {
  unsigned char *p = buf;
  size_t got = 0;
  while (got < len) {
    struct pollfd pf = {fd, POLLIN, 0};
    int64_t left = deadline < 0 ? -1 : deadline - now_ms();
    ssize_t k;
    if (deadline >= 0 && left <= 0)
      return coll_set_last_error(COLL_ERR_TIMEOUT, "sock: rank %d: nothing",
                                 peer);
    if (poll(&pf, 1, left < 0 ? -1 : (int)left) <= 0) continue;
    k = recv(fd, p + got, len - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      return coll_set_last_error(COLL_ERR_PEER_LOST, "sock: rank %d left",
                                 peer);
    got += (size_t)k;
  }
  return COLL_OK;
}

coll_status_t sock_link_recv(void *ctx, int peer, void *buf, size_t cap,
                             size_t *len, int64_t timeout_ms) {
  sock_ep_t *e = ctx;
  int fd = e->w->lfd[e->rank][peer];
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  uint32_t n;
  coll_status_t s = link_read(fd, &n, sizeof n, peer, deadline);
  if (s != COLL_OK) return s;
  if (n > cap)
    return coll_set_last_error(COLL_ERR_PROTOCOL, "sock: rank %d: %u bytes",
                               peer, n);
  *len = n;
  return link_read(fd, buf, n, peer, deadline);
}

void sock_leave(void *ctx) {
  sock_ep_t *e = ctx;
  int i;
  for (i = 0; i < e->world; i++)
    if (i != e->rank) shutdown(e->w->lfd[e->rank][i], SHUT_WR);
}

/* Every survivor agreed on the same members, so the first one here wires
 * their world and the others take their rank's end of it. */
coll_status_t sock_shrink(void *ctx, const int *members, int n, int new_rank,
                          int64_t timeout_ms, void **new_ctx) {
  sock_ep_t *e = ctx;
  sock_world_t *w = e->w, *next;
  sock_ep_t *ne;
  (void)members, (void)timeout_ms;
  pthread_mutex_lock(&w->mu);
  if (w->next == NULL) w->next = sock_world_new(n);
  next = w->next;
  pthread_mutex_unlock(&w->mu);
  if (next == NULL || next->n != n)
    return coll_set_last_error(COLL_ERR_SYSTEM, "sock: no survivors' world");
  ne = sock_ep_new(next, new_rank);
  if (ne == NULL)
    return coll_set_last_error(COLL_ERR_SYSTEM, "sock: no endpoint");
  *new_ctx = ne;
  return COLL_OK;
}
