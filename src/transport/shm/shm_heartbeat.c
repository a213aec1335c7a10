/* SPDX-License-Identifier: Apache-2.0 */
/* shm_heartbeat.c: heartbeats, so that a stopped, swapped-out or wedged
 * process is found while a call waits on it, as over TCP
 * (tcp_heartbeat.c) and with the same variable. Every rank runs one
 * thread that ticks every twentieth of COLL_HEARTBEAT_TIMEOUT_MS: it counts
 * up `beat` in its own header and looks at every peer's. A peer whose
 * count stood still for the whole timeout while this rank waits on it (a
 * request pending on that peer, or a wait on the collectives' flags) is
 * unresponsive: its requests fail with PEER_LOST, and the endpoint closes
 * with that peer as the origin, so every other rank hears of it. A process
 * busy in its own code keeps its heartbeat thread, which keeps counting.
 *
 * The count costs the data path nothing: no message, no system call. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/shm/shm_int.h"

/* Under ep->mu: 1 if a call of this rank waits on peer p. */
static int waits_on(const shm_ep_t *ep, int p) {
  const shm_peer_t *pr = &ep->peers[p];
  const coll_match_item_t *it;
  if (pr->lost) return 0;
  if (atomic_load(&ep->rounds.waiters) > 0) return 1;
  if (pr->sq_head != NULL || !coll__match_q_empty(&pr->in.posted) ||
      pr->in.recv != NULL)
    return 1;
  for (it = pr->in.early.head; it != NULL; it = it->next)
    if (coll__shm_unx_of(it)->recv != NULL) return 1;
  return 0;
}

/* Peer p was silent for ms while this rank waited on it: its requests fail
 * with PEER_LOST naming it, then the endpoint closes with it as the
 * origin, which the other peers read in this rank's header. */
static void unresponsive(shm_ep_t *ep, int p, int64_t ms) {
  shm_peer_t *pr = &ep->peers[p];
  coll_origin_t o = {coll__shm_name(ep, p), COLL_CAUSE_UNRESPONSIVE,
                     (uint32_t)ms};
  pthread_mutex_lock(&ep->mu);
  if (!pr->lost) {
    coll__shm_note_origin(ep, &o);
    coll__origin_text(&o, coll__shm_name(ep, ep->rank), pr->why,
                      sizeof pr->why);
    pr->lost = 1;
    pr->lost_status = coll__origin_req_status(&o);
  }
  coll__shm_progress(ep);
  pthread_cond_broadcast(&ep->cv);
  pthread_mutex_unlock(&ep->mu);
  COLL_WARN(COLL_LOG_NET, "shm: rank %d: rank %d unresponsive for %lld ms",
            coll__shm_name(ep, ep->rank), coll__shm_name(ep, p), (long long)ms);
  coll__shm_close(ep, &o);
}

/* One tick: beat, then look at every peer. 1 once the endpoint closed. */
static int tick(shm_ep_t *ep) {
  int64_t now = coll__now_ms();
  atomic_fetch_add_explicit(&ep->hdr->beat, 1, memory_order_relaxed);
  if (atomic_load(&ep->aborted)) return 1;
  for (int p = 0; p < ep->world; p++) {
    shm_hdr_t *ph = ep->peers[p].region;
    uint64_t b;
    int waiting;
    if (p == ep->rank) continue;
    b = atomic_load_explicit(&ph->beat, memory_order_relaxed);
    if (b != ep->hb_seen[p]) {
      ep->hb_seen[p] = b;
      ep->hb_at[p] = now;
      continue;
    }
    if (now - ep->hb_at[p] < ep->hb_ms) continue;
    pthread_mutex_lock(&ep->mu);
    waiting = waits_on(ep, p);
    pthread_mutex_unlock(&ep->mu);
    if (waiting) {
      unresponsive(ep, p, now - ep->hb_at[p]);
      return 1;
    }
  }
  return 0;
}

static void *hb_main(void *arg) {
  shm_ep_t *ep = arg;
  int64_t every = coll__hb_tick_ms(ep->hb_ms);
  int done = 0;
  pthread_mutex_lock(&ep->hb_mu);
  while (!ep->hb_stop) {
    struct timespec ts;
    pthread_mutex_unlock(&ep->hb_mu);
    /* After the close it only beats: the peers still wait on this rank's
     * goodbye being read, not on its silence. */
    if (!done)
      done = tick(ep);
    else
      atomic_fetch_add_explicit(&ep->hdr->beat, 1, memory_order_relaxed);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += every / 1000;
    ts.tv_nsec += (long)(every % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ep->hb_mu);
    if (!ep->hb_stop) pthread_cond_timedwait(&ep->hb_cv, &ep->hb_mu, &ts);
  }
  pthread_mutex_unlock(&ep->hb_mu);
  return NULL;
}

coll_status_t coll__shm_hb_start(shm_ep_t *ep) {
  int64_t now = coll__now_ms();
  if (ep->hb_ms <= 0 || ep->world < 2) return COLL_OK;
  ep->hb_seen = calloc((size_t)ep->world, sizeof *ep->hb_seen);
  ep->hb_at = calloc((size_t)ep->world, sizeof *ep->hb_at);
  if (ep->hb_seen == NULL || ep->hb_at == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "shm heartbeat: out of memory");
  for (int p = 0; p < ep->world; p++) {
    ep->hb_seen[p] = UINT64_MAX; /* the first look counts as a beat */
    ep->hb_at[p] = now;
  }
  if (pthread_create(&ep->hb_thread, NULL, hb_main, ep) != 0)
    return coll__err(COLL_ERR_SYSTEM, "shm heartbeat: cannot start its thread");
  ep->hb_running = 1;
  return COLL_OK;
}

void coll__shm_hb_stop(shm_ep_t *ep) {
  if (!ep->hb_running) return;
  pthread_mutex_lock(&ep->hb_mu);
  ep->hb_stop = 1;
  pthread_cond_signal(&ep->hb_cv);
  pthread_mutex_unlock(&ep->hb_mu);
  pthread_join(ep->hb_thread, NULL);
  ep->hb_running = 0;
}
