/* SPDX-License-Identifier: Apache-2.0 */
/* shm_coll.c: the shared memory the collectives designed for it use
 * (transport.h, coll_t_shared_t): slots and result areas at the end of
 * every rank's region, progress flags in its header, and the wait on every
 * peer's flag. A waiter spins while the peers are about to answer, then
 * sleeps on its doorbell and its peers' sockets, like a request's waiter
 * (shm_wait.c): a peer that posts a flag rings the doorbells of the ranks
 * that sleep, a dead peer's socket hangs up, a closed one says so in its
 * header, and the heartbeat watches the wait (flag_waiters). */
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/trace.h"
#include "transport/shm/shm_int.h"

/* The longest sleep between two looks at the flags: a safety net for a
 * doorbell rung while another thread of this rank slept on it. */
#define SHM_FLAG_SLEEP_MS 10
/* Pause instructions between two sched_yield calls while spinning. */
#define SHM_FLAG_SPINS_PER_YIELD 64

static void *region_of(const shm_ep_t *ep, int r) {
  return r == ep->rank ? ep->region : ep->peers[r].region;
}

static void *coll_slot(void *ctx, int r, int b) {
  shm_ep_t *ep = ctx;
  return (uint8_t *)region_of(ep, r) + ep->lay.coll_off +
         (size_t)b * SHM_COLL_SLOT;
}

static void *coll_result(void *ctx, int r, int b) {
  shm_ep_t *ep = ctx;
  return (uint8_t *)region_of(ep, r) + ep->lay.coll_off +
         (size_t)(2 + b) * SHM_COLL_SLOT;
}

static void *coll_note(void *ctx, int r, int b) {
  shm_ep_t *ep = ctx;
  return ((shm_hdr_t *)region_of(ep, r))->coll_note[b];
}

static uint64_t next_round(void *ctx) {
  shm_ep_t *ep = ctx;
  return ++ep->coll_round;
}

static _Atomic uint64_t *flag_of(shm_hdr_t *h, int which) {
  switch (which) {
    case COLL_T_FLAG_IN: return &h->coll_in;
    case COLL_T_FLAG_RED: return &h->coll_red;
    default: return &h->coll_out;
  }
}

static void post(void *ctx, int which, uint64_t v) {
  shm_ep_t *ep = ctx;
  atomic_store_explicit(flag_of(ep->hdr, which), v, memory_order_release);
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank) coll__shm_ring_bell(ep, p);
}

static int behind(const shm_ep_t *ep, int p, int which, uint64_t v) {
  return p != ep->rank &&
         atomic_load_explicit(flag_of(ep->peers[p].region, which),
                              memory_order_acquire) < v;
}

/* The first peer whose flag has not reached v, or -1. */
static int first_behind(const shm_ep_t *ep, int which, uint64_t v) {
  for (int p = 0; p < ep->world; p++)
    if (behind(ep, p, which, v)) return p;
  return -1;
}

/* A peer that left the round unfinished: gone (aborted or failed) before
 * it posted OUT for round v. Its flags may all be there, but it gave up on
 * the collective, so this rank must not finish it either. -1 if none. */
static int gone_mid_round(const shm_ep_t *ep, uint64_t v) {
  for (int p = 0; p < ep->world; p++) {
    shm_hdr_t *h = ep->peers[p].region;
    if (p != ep->rank && atomic_load_explicit(&h->gone, memory_order_acquire) &&
        atomic_load_explicit(&h->coll_out, memory_order_acquire) < v)
      return p;
  }
  return -1;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* COLL_OK while the endpoint is open and peer p is not known lost; else
 * its failure, with a text. */
static coll_status_t check(shm_ep_t *ep, int p) {
  shm_peer_t *pr = &ep->peers[p];
  char why[sizeof pr->why];
  coll_status_t s = COLL_OK;
  pthread_mutex_lock(&ep->mu);
  if (ep->closed) {
    coll__shm_closed_text(ep, why, sizeof why);
    s = coll__origin_req_status(coll__shm_closed_origin(ep));
    if (s == COLL_OK) s = COLL_ERR_ABORTED;
  } else {
    if (!pr->lost && atomic_load_explicit(&((shm_hdr_t *)pr->region)->gone,
                                          memory_order_acquire))
      coll__shm_peer_lost(ep, p);
    if (pr->lost) {
      memcpy(why, pr->why, sizeof why);
      s = pr->lost_status;
      coll__trace_note_failed_peer(coll__shm_name(ep, p));
    }
  }
  pthread_mutex_unlock(&ep->mu);
  if (s != COLL_OK)
    coll_set_last_error(s, "shm: waiting for rank %d: %s",
                        coll__shm_name(ep, p), why);
  return s;
}

coll_status_t coll__shm_wait_on(shm_ep_t *ep, int q, int which, uint64_t v) {
  coll_status_t s = check(ep, q);
  /* q may have posted, finished the round and left since the caller's
   * look: a peer seen gone ends the wait only while it is still behind (it
   * posts before it leaves, so its flag is final once it is seen gone). One
   * that left before it finished the round is all_posted's to report. */
  if (s != COLL_OK &&
      !atomic_load_explicit(&ep->aborted, memory_order_relaxed) &&
      !behind(ep, q, which, v))
    return COLL_OK;
  return s;
}

/* Sleeps until a doorbell, a peer's hangup, or at most ms; announces the
 * sleep first and looks at the flags one last time. */
static void sleep_on(shm_ep_t *ep, int which, uint64_t v, int64_t ms) {
  struct pollfd *fds = calloc((size_t)ep->world, sizeof *fds);
  int *who = calloc((size_t)ep->world, sizeof *who);
  int n = 0, ready = 0;
  if (fds == NULL || who == NULL) { /* cannot sleep: spin instead */
    free(fds);
    free(who);
    return;
  }
  atomic_fetch_add(&ep->hdr->sleeping, 1);
  atomic_thread_fence(memory_order_seq_cst);
  fds[n++] = (struct pollfd){.fd = ep->bell, .events = POLLIN};
  pthread_mutex_lock(&ep->mu);
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank && ep->peers[p].lost == 0 && ep->peers[p].sock >= 0) {
      who[n] = p;
      fds[n++] = (struct pollfd){.fd = ep->peers[p].sock,
                                 .events = POLLIN | POLLRDHUP};
    }
  pthread_mutex_unlock(&ep->mu);
  if (first_behind(ep, which, v) >= 0 && !atomic_load(&ep->aborted))
    ready = poll(fds, (nfds_t)n, (int)ms);
  atomic_fetch_sub(&ep->hdr->sleeping, 1);
  if (ready > 0) {
    pthread_mutex_lock(&ep->mu);
    /* A request's waiter that sleeps on the doorbell reads it itself. */
    if (fds[0].revents != 0 && !ep->leader) {
      uint64_t one;
      ssize_t got = read(ep->bell, &one, sizeof one);
      (void)got; /* EAGAIN: another reader took it */
    }
    for (int i = 1; i < n; i++)
      if (fds[i].revents != 0 && !atomic_load(&ep->aborted))
        coll__shm_peer_lost(ep, who[i]);
    pthread_mutex_unlock(&ep->mu);
  }
  free(fds);
  free(who);
}

/* Every peer posted `which` for round v: COLL_OK, unless this endpoint
 * closed meanwhile (the caller must not go on as if nothing happened) or
 * a peer left round v unfinished. */
static coll_status_t all_posted(shm_ep_t *ep, uint64_t v) {
  int p;
  if (atomic_load_explicit(&ep->aborted, memory_order_relaxed))
    return check(ep, ep->rank == 0 ? 1 : 0);
  p = gone_mid_round(ep, v);
  return p < 0 ? COLL_OK : check(ep, p);
}

static coll_status_t wait_slow(shm_ep_t *ep, int which, uint64_t v,
                               int64_t deadline_ms) {
  uint64_t spin_from = coll__now_ns();
  unsigned spins = 0;
  for (;;) {
    int p = first_behind(ep, which, v);
    int64_t left;
    coll_status_t s;
    if (p < 0) return all_posted(ep, v);
    for (int q = p; q < ep->world; q++)
      if (q == p || behind(ep, q, which, v)) {
        s = coll__shm_wait_on(ep, q, which, v);
        if (s != COLL_OK) return s;
      }
    left = deadline_ms < 0 ? SHM_FLAG_SLEEP_MS : deadline_ms - coll__now_ms();
    if (left <= 0) {
      coll__trace_note_failed_peer(coll__shm_name(ep, p));
      return coll_set_last_error(COLL_ERR_TIMEOUT,
                                 "shm: rank %d did not reach round %llu of "
                                 "the collective in time",
                                 coll__shm_name(ep, p), (unsigned long long)v);
    }
    if (coll__now_ns() - spin_from < (uint64_t)ep->spin_ns) {
      /* Now and then let another thread have the core: on a host with
       * more ranks than cores, the peer this rank waits for may need
       * exactly this one. */
      if (++spins % SHM_FLAG_SPINS_PER_YIELD == 0)
        sched_yield();
      else
        cpu_relax();
      continue;
    }
    sleep_on(ep, which, v, left < SHM_FLAG_SLEEP_MS ? left : SHM_FLAG_SLEEP_MS);
  }
}

static coll_status_t wait_all(void *ctx, int which, uint64_t v,
                              int64_t deadline_ms) {
  shm_ep_t *ep = ctx;
  coll_status_t s;
  if (first_behind(ep, which, v) < 0) return all_posted(ep, v);
  atomic_fetch_add(&ep->flag_waiters, 1);
  s = wait_slow(ep, which, v, deadline_ms);
  atomic_fetch_sub(&ep->flag_waiters, 1);
  return s;
}

const coll_t_shared_t coll__shm_shared = {
    .slot_bytes = SHM_COLL_SLOT,
    .allreduce_below = 0,
    .others_below = SIZE_MAX,
    .reduce_scatter_below = SIZE_MAX,
    .slot = coll_slot,
    .result = coll_result,
    .next_round = next_round,
    .post = post,
    .wait_all = wait_all,
    .note = coll_note,
};
