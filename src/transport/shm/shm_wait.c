/* SPDX-License-Identifier: Apache-2.0 */
/* shm_wait.c: the `wait` slot. A waiter moves every pending request of
 * the endpoint (coll__shm_progress), spins a few microseconds while
 * nothing moves, then sleeps in the kernel on its doorbell and on its
 * peers' sockets: a peer rings the doorbell only when this rank announced
 * it sleeps, and a dead peer's socket hangs up. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "transport/common/waiter.h"
#include "transport/shm/shm_int.h"

/* A thread waiting behind the leader re-checks at least this often: a
 * safety net only, every change is broadcast. */
#define SHM_FOLLOWER_MAX_MS 50

/* Under ep->mu: one progress pass, broadcast to the other waiters when it
 * moved anything. */
static int pass(shm_ep_t *ep) {
  int moved = coll__shm_progress(ep);
  if (moved) pthread_cond_broadcast(&ep->cv);
  return moved;
}

static void timed_wait(shm_ep_t *ep, int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&ep->cv, &ep->mu, &ts);
}

void coll__shm_kernel_sleep(shm_ep_t *ep, int (*still)(shm_ep_t *, void *),
                            void *arg, int leader, int64_t ms) {
  struct pollfd *fds = calloc((size_t)ep->world, sizeof *fds);
  int *who = calloc((size_t)ep->world, sizeof *who);
  int n = 0, ready = 0, idle;
  if (fds == NULL || who == NULL) { /* cannot sleep: spin instead */
    free(fds);
    free(who);
    return;
  }
  atomic_fetch_add(&ep->hdr->sleeping, 1);
  atomic_thread_fence(memory_order_seq_cst);
  pthread_mutex_lock(&ep->mu);
  idle = still(ep, arg);
  fds[n++] = (struct pollfd){.fd = ep->bell, .events = POLLIN};
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank && ep->peers[p].lost == 0 && ep->peers[p].sock >= 0) {
      who[n] = p;
      fds[n++] = (struct pollfd){.fd = ep->peers[p].sock,
                                 .events = POLLIN | POLLRDHUP};
    }
  pthread_mutex_unlock(&ep->mu);
  if (idle && !atomic_load(&ep->aborted))
    ready = poll(fds, (nfds_t)n, ms < 0 || ms > INT_MAX ? -1 : (int)ms);
  atomic_fetch_sub(&ep->hdr->sleeping, 1);
  if (ready > 0) {
    pthread_mutex_lock(&ep->mu);
    /* The requests' leader reads the doorbell, whoever else slept on it. */
    if (fds[0].revents != 0 && (leader || !ep->leader)) {
      uint64_t v;
      ssize_t got = read(ep->bell, &v, sizeof v);
      (void)got; /* EAGAIN: another reader took it */
    }
    /* Nothing is ever sent on these sockets after setup: any event is
     * the peer's end. Our own abort shuts them down too; then the requests
     * have failed already. */
    for (int i = 1; i < n; i++)
      if (fds[i].revents != 0 && !atomic_load(&ep->aborted))
        coll__shm_peer_lost(ep, who[i]);
    pthread_mutex_unlock(&ep->mu);
  }
  free(fds);
  free(who);
}

/* Under ep->mu: the request's leader sleeps only if a last progress pass
 * moved nothing and left r pending. */
static int request_pending(shm_ep_t *ep, void *r) {
  return !pass(ep) && !((shm_req_t *)r)->done;
}

/* Waits until something may have changed, for at most ms (< 0: no bound):
 * as the leader in the kernel, or behind it on the condition variable. */
static void sleep_once(shm_ep_t *ep, shm_req_t *r, int64_t ms) {
  pthread_mutex_lock(&ep->mu);
  if (pass(ep) || r->done) {
    pthread_mutex_unlock(&ep->mu);
    return;
  }
  if (ep->leader) {
    timed_wait(ep,
               ms < 0 || ms > SHM_FOLLOWER_MAX_MS ? SHM_FOLLOWER_MAX_MS : ms);
    pthread_mutex_unlock(&ep->mu);
    return;
  }
  ep->leader = 1;
  pthread_mutex_unlock(&ep->mu);
  coll__shm_kernel_sleep(ep, request_pending, r, 1, ms);
  pthread_mutex_lock(&ep->mu);
  ep->leader = 0;
  pthread_cond_broadcast(&ep->cv);
  pthread_mutex_unlock(&ep->mu);
}

/* A zero-timeout look at the peers' sockets, for waits that never sleep. */
static void check_peers(shm_ep_t *ep) {
  struct pollfd pfd;
  pthread_mutex_lock(&ep->mu);
  for (int p = 0; p < ep->world; p++) {
    if (p == ep->rank || ep->peers[p].lost || ep->peers[p].sock < 0) continue;
    pfd =
        (struct pollfd){.fd = ep->peers[p].sock, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) > 0 && !atomic_load(&ep->aborted))
      coll__shm_peer_lost(ep, p);
  }
  pthread_mutex_unlock(&ep->mu);
}

/* Reports a completed request and frees it; the text is copied under the
 * lock (`why`). */
static coll_status_t finish(const shm_ep_t *ep, shm_req_t *r, const char *why,
                            size_t *len) {
  coll_status_t s = r->status;
  const char *dir = r->kind == SHM_SEND ? "send to" : "receive from";
  switch (s) {
    case COLL_OK:
      if (len != NULL) *len = r->kind == SHM_SEND ? r->len : r->got;
      break;
    case COLL_ERR_LENGTH_MISMATCH:
      if (len != NULL) *len = r->got;
      coll_set_last_error(s,
                          "shm: the message from rank %d on tag %u is %zu "
                          "bytes, more than the receive's %zu",
                          coll__shm_name(ep, r->peer), r->tag, r->got, r->len);
      break;
    default:
      coll_set_last_error(s, "shm: %s rank %d on tag %u: %s", dir,
                          coll__shm_name(ep, r->peer), r->tag, why);
      break;
  }
  free(r);
  return s;
}

void coll__shm_kick(void *ctx) {
  shm_ep_t *ep = ctx;
  pthread_mutex_lock(&ep->mu);
  (void)pass(ep);
  pthread_mutex_unlock(&ep->mu);
}

/* One wait's view: its request, and the text of its end. */
typedef struct shm_waiting {
  shm_ep_t *ep;
  shm_req_t *r;
  char why[sizeof((shm_peer_t *)0)->why];
} shm_waiting_t;

/* A pass over the endpoint; DONE once r completed (its text copied under
 * the lock), MOVED when the pass moved anything. */
static int look(void *arg) {
  shm_waiting_t *w = arg;
  shm_ep_t *ep = w->ep;
  int moved, done;
  pthread_mutex_lock(&ep->mu);
  moved = pass(ep);
  done = w->r->done;
  if (done && w->r->closed_here)
    coll__shm_closed_text(ep, w->why, sizeof w->why);
  else if (done)
    memcpy(w->why, ep->peers[w->r->peer].why, sizeof w->why);
  pthread_mutex_unlock(&ep->mu);
  return done ? COLL_WAIT_DONE : moved ? COLL_WAIT_MOVED : COLL_WAIT_IDLE;
}

static void sleep_ms(void *arg, int64_t ms) {
  shm_waiting_t *w = arg;
  sleep_once(w->ep, w->r, ms);
}

coll_status_t coll__shm_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len) {
  shm_ep_t *ep = ctx;
  shm_waiting_t w = {ep, req, {0}};
  /* The peers' sockets are looked at by sleeping waits; a poll looks at
   * them once itself. */
  coll_wait_policy_t pol = {(uint64_t)ep->spin_ns, ep->per_yield, -1, 1};
  int done = look(&w) == COLL_WAIT_DONE;
  if (!done && timeout_ms == 0) {
    check_peers(ep);
    done = look(&w) == COLL_WAIT_DONE;
  } else if (!done) {
    done = coll__wait_loop(&pol, timeout_ms, look, sleep_ms, &w);
  }
  if (done) return finish(ep, w.r, w.why, len);
  return coll_set_last_error(COLL_ERR_TIMEOUT,
                             "shm: %s rank %d on tag %u not complete after "
                             "%lld ms",
                             w.r->kind == SHM_SEND ? "send to" : "receive from",
                             coll__shm_name(ep, w.r->peer), w.r->tag,
                             (long long)timeout_ms);
}
