/* SPDX-License-Identifier: Apache-2.0 */
/* shm_heartbeat.c: liveness, so that a stopped, swapped-out or wedged
 * process is found while a call waits on it, as over TCP
 * (tcp_heartbeat.c), with the same variable and the same rule for when a
 * silence is long enough (common/silence.h). Every rank runs one thread
 * that:
 *  - answers its peers' "are you there?" (a futex on `ask` in its header,
 *    shm_desync.c), whatever this rank's own threads are doing;
 *  - with heartbeats on, ticks every fiftieth of COLL_HEARTBEAT_TIMEOUT_MS:
 *    it counts up `beat` in its own header and looks at every peer's. A
 *    peer whose count stood still for the whole timeout past the gap
 *    between two beats, while this rank waits on it (a request pending on
 *    that peer, or a wait on the collectives' flags), is unresponsive: its
 *    requests fail with PEER_LOST, and the endpoint closes with that peer
 *    as the origin, so every other rank hears of it.
 * Before it names a peer it reads what is already there (a peer that
 * closed says where its failure began, one that died hung up), and a tick
 * that comes late by a quarter of the timeout (this rank was stopped)
 * judges nobody. A process busy in its own code keeps this thread, which
 * keeps counting.
 *
 * The count costs the data path nothing: no message, no system call. */
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/shm/shm_int.h"

/* The longest gap between two beats of a running peer as this thread sees
 * them: it beats every tick, and is seen at the next tick of this one. */
#define HB_GAP_TICKS 2

void coll__shm_futex_wait(_Atomic uint32_t *word, uint32_t seen, int64_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  /* Not FUTEX_PRIVATE: the word lives in memory other processes map. A
   * value already changed (EAGAIN), a signal or the timeout all return. */
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen,
                ms < 0 ? NULL : &ts, NULL, 0);
}

void coll__shm_futex_wake(_Atomic uint32_t *word) {
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL,
                0);
}

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

/* Before peer p is named: reads what is already there. A peer that closed
 * says where its failure began (this rank itself, after its own stall),
 * one that died hung up its socket. 1 when that ended the wait on p (p is
 * gone, or this endpoint closed), else 0. */
static int read_first(shm_ep_t *ep, int p) {
  struct pollfd pfd = {ep->peers[p].sock, POLLIN | POLLRDHUP, 0};
  int hup = pfd.fd >= 0 && poll(&pfd, 1, 0) > 0, over, moved;
  pthread_mutex_lock(&ep->mu);
  moved = coll__shm_progress(ep);
  if (hup && !ep->closed) coll__shm_peer_lost(ep, p);
  over = ep->closed || ep->peers[p].lost;
  if (moved || over) {
    /* What completed here is another thread's: wake it, on the condition
     * variable or in the kernel. */
    uint64_t one = 1;
    ssize_t n = write(ep->bell, &one, sizeof one);
    (void)n;
    pthread_cond_broadcast(&ep->cv);
  }
  pthread_mutex_unlock(&ep->mu);
  return over;
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
    pr->lost_origin = o;
  }
  coll__shm_progress(ep);
  pthread_cond_broadcast(&ep->cv);
  pthread_mutex_unlock(&ep->mu);
  COLL_WARN(COLL_LOG_NET, "shm: rank %d: rank %d unresponsive for %lld ms",
            coll__shm_name(ep, ep->rank), coll__shm_name(ep, p), (long long)ms);
  coll__shm_close(ep, &o);
}

/* One tick at now: beat, then look at every peer. 1 once the endpoint
 * closed. */
static int tick(shm_ep_t *ep, int64_t now) {
  coll_silence_t *w = &ep->hb_watch;
  int stalled = coll__silence_tick(w, now);
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
    if (stalled ||
        !coll__silence_over(w, ep->hb_at[p], now, HB_GAP_TICKS * w->tick_ms))
      continue;
    pthread_mutex_lock(&ep->mu);
    waiting = waits_on(ep, p);
    pthread_mutex_unlock(&ep->mu);
    if (!waiting) continue;
    if (read_first(ep, p)) return atomic_load(&ep->aborted);
    unresponsive(ep, p, coll__silence_watched_ms(w, ep->hb_at[p], now));
    return 1;
  }
  return 0;
}

static void *hb_main(void *arg) {
  shm_ep_t *ep = arg;
  int watching = ep->hb_ms > 0, done = 0;
  int64_t next = coll__now_ms();
  while (!atomic_load(&ep->hb_stop)) {
    uint32_t asked = atomic_load(&ep->hdr->ask);
    int64_t now = coll__now_ms(), ms = -1;
    atomic_store(&ep->hdr->answer, asked);
    if (watching && now >= next) {
      /* After the close it only beats: the peers still wait on this
       * rank's goodbye being read, not on its silence. */
      if (!done)
        done = tick(ep, now);
      else
        atomic_fetch_add_explicit(&ep->hdr->beat, 1, memory_order_relaxed);
      next = now + ep->hb_watch.tick_ms;
    }
    if (watching) {
      ms = next - coll__now_ms();
      if (ms <= 0) continue;
    }
    coll__shm_futex_wait(&ep->hdr->ask, asked, ms);
  }
  return NULL;
}

coll_status_t coll__shm_hb_start(shm_ep_t *ep) {
  int64_t now = coll__now_ms();
  if (ep->world < 2 || (ep->hb_ms <= 0 && ep->names != NULL)) return COLL_OK;
  if (ep->hb_ms > 0) {
    coll__silence_init(&ep->hb_watch, ep->hb_ms, now);
    ep->hb_seen = calloc((size_t)ep->world, sizeof *ep->hb_seen);
    ep->hb_at = calloc((size_t)ep->world, sizeof *ep->hb_at);
    if (ep->hb_seen == NULL || ep->hb_at == NULL)
      return coll__err(COLL_ERR_NO_MEMORY, "shm heartbeat: out of memory");
    for (int p = 0; p < ep->world; p++) {
      ep->hb_seen[p] = UINT64_MAX; /* the first look counts as a beat */
      ep->hb_at[p] = now;
    }
  }
  if (pthread_create(&ep->hb_thread, NULL, hb_main, ep) != 0)
    return coll__err(COLL_ERR_SYSTEM, "shm liveness: cannot start its thread");
  ep->hb_running = 1;
  return COLL_OK;
}

void coll__shm_hb_stop(shm_ep_t *ep) {
  if (!ep->hb_running) return;
  atomic_store(&ep->hb_stop, 1);
  /* A changed word: a thread about to wait on it returns at once. */
  atomic_fetch_add(&ep->hdr->ask, 1);
  coll__shm_futex_wake(&ep->hdr->ask);
  pthread_join(ep->hb_thread, NULL);
  ep->hb_running = 0;
}
