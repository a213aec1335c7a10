/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_shared.c: the memory the collectives designed for shared memory
 * use (transport.h, coll_t_shared_t), between the threads of one world.
 * Threads share an address space, so this is what the shm transport maps
 * (shm_coll.c) without the mapping: every rank's slots and result areas
 * in one allocation of its own, its flags and notes in its endpoint. A
 * waiter spins while its peers are about to answer (when every rank
 * thread can have a core), then sleeps on the world's flag_cv; a post
 * wakes the sleepers, and so does an endpoint's close (inproc_close.c),
 * so an abort or a peer's end stops the wait at once. */
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/trace.h"
#include "transport/inproc/inproc.h"
#include "transport/transport.h"

/* Where each rank's slots and result areas start within a page. A copy
 * between a caller's buffer and a slot runs at about two thirds of its
 * speed where the slot starts some 32 to 64 bytes past the buffer, counted
 * modulo 4 KiB (processes over the shm transport showed no such window).
 * Buffers from malloc start 16 bytes into a page, page-aligned ones at 0,
 * posix_memalign(64) ones (PyTorch's) at 64. With the slots at 64, as
 * aligned_alloc(64) put them, malloc's buffers fell in the window; half a
 * page in, none of the three does. coll-perf --threads 2 -b 1M -e 1M -c 0
 * --offset B, in place, 3 runs interleaved, GB/s:
 *
 *   slots at   B=0       16        64        1984      4032
 *   64         7.4-9.3   5.8-5.9   7.5-9.0   8.3-9.7   8.7-8.9
 *   2048       8.4-9.2   8.0-8.7   8.9-9.1   8.3-9.4   7.5-9.2
 */
#define INPROC_COLL_PAGE_OFFSET 2048u

/* The longest sleep between two looks at the flags: a safety net only. */
#define INPROC_FLAG_SLEEP_NS 10000000u
/* How long a waiter polls the flags before it sleeps, with more rank
 * threads than cores too (it yields as it polls): as the shm transport's
 * waiters (COLL_DEFAULT_SHM_SPIN_US, core/env.h). */
#define INPROC_FLAG_SPIN_NS 50000u
/* Pause instructions between two sched_yield calls while spinning. */
#define INPROC_FLAG_SPINS_PER_YIELD 64

static void *coll_slot(void *ctx, int r, int b) {
  inproc_ep_t *ep = ctx;
  return ep->w->eps[r].coll_mem + INPROC_COLL_PAGE_OFFSET +
         (size_t)b * INPROC_COLL_SLOT;
}

static void *coll_result(void *ctx, int r, int b) {
  inproc_ep_t *ep = ctx;
  return ep->w->eps[r].coll_mem + INPROC_COLL_PAGE_OFFSET +
         (size_t)(2 + b) * INPROC_COLL_SLOT;
}

static void *coll_note(void *ctx, int r, int b) {
  inproc_ep_t *ep = ctx;
  return ep->w->eps[r].coll_note[b];
}

static uint64_t next_round(void *ctx) {
  inproc_ep_t *ep = ctx;
  return ++ep->coll_round;
}

static uint64_t flag(const inproc_ep_t *ep, int which) {
  return atomic_load_explicit(&((inproc_ep_t *)ep)->coll_flag[which],
                              memory_order_acquire);
}

static void post(void *ctx, int which, uint64_t v) {
  inproc_ep_t *ep = ctx;
  inproc_world_t *w = ep->w;
  atomic_store_explicit(&ep->coll_flag[which], v, memory_order_release);
  /* Pairs with the fence in sleep_on: either the sleeper sees the flag,
   * or this sees the sleeper. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&w->flag_sleepers, memory_order_relaxed) > 0) {
    uv_mutex_lock(&w->flag_mu);
    uv_cond_broadcast(&w->flag_cv);
    uv_mutex_unlock(&w->flag_mu);
  }
}

static int is_closed(const inproc_ep_t *x) {
  return atomic_load(&((inproc_ep_t *)x)->lost) != INPROC_OPEN;
}

/* What ends a wait for round v of `which`: -1 this endpoint's own close,
 * p a peer that closed before it finished the round (its flag `which` or
 * its OUT short of v: it gave up on the collective, so this rank must not
 * finish it either), INT_MAX nothing. */
static int ender(const inproc_ep_t *ep, int which, uint64_t v) {
  const inproc_world_t *w = ep->w;
  if (is_closed(ep)) return -1;
  for (int p = 0; p < w->size; p++) {
    const inproc_ep_t *x = &w->eps[p];
    if (x != ep && is_closed(x) &&
        (flag(x, which) < v || flag(x, COLL_T_FLAG_OUT) < v))
      return p;
  }
  return INT_MAX;
}

/* COLL_OK, or what ends the wait (ender), with a text. */
static coll_status_t check(inproc_ep_t *ep, int which, uint64_t v) {
  int e = ender(ep, which, v);
  const inproc_ep_t *x = e < 0 ? ep : &ep->w->eps[e];
  coll_status_t s;
  char seen[160];
  if (e == INT_MAX) return COLL_OK;
  if (e >= 0) {
    coll__inproc_note_origin(ep, inproc_origin(x));
    coll__trace_note_failed_peer(e);
  }
  s = coll__origin_req_status(inproc_origin(x));
  if (s == COLL_OK) s = COLL_ERR_ABORTED;
  if (e < 0 && inproc_origin(ep)->rank == ep->rank)
    snprintf(seen, sizeof seen, "this endpoint was %s",
             inproc_why_text(atomic_load(&((inproc_ep_t *)ep)->lost)));
  else
    coll__origin_text(inproc_origin(x), ep->rank, seen, sizeof seen);
  if (e < 0)
    return coll__err(s, "inproc rank %d: collective round %" PRIu64 ": %s",
                     ep->rank, v, seen);
  return coll__err(s,
                   "inproc rank %d: waiting for rank %d in collective round "
                   "%" PRIu64 ": %s",
                   ep->rank, e, v, seen);
}

/* The first peer whose flag `which` has not reached v, or -1. */
static int first_behind(const inproc_ep_t *ep, int which, uint64_t v) {
  const inproc_world_t *w = ep->w;
  for (int p = 0; p < w->size; p++)
    if (p != ep->rank && flag(&w->eps[p], which) < v) return p;
  return -1;
}

/* Sleeps on flag_cv for at most ns, unless a flag or a close that ends
 * the wait came first. */
static void sleep_on(inproc_ep_t *ep, int which, uint64_t v, uint64_t ns) {
  inproc_world_t *w = ep->w;
  uv_mutex_lock(&w->flag_mu);
  atomic_fetch_add(&w->flag_sleepers, 1);
  atomic_thread_fence(memory_order_seq_cst);
  /* A close stores `lost` before it takes flag_mu to broadcast: looked at
   * under the lock, it cannot slip between this look and the wait. */
  if (first_behind(ep, which, v) >= 0 && ender(ep, which, v) == INT_MAX)
    (void)uv_cond_timedwait(&w->flag_cv, &w->flag_mu, ns);
  atomic_fetch_sub(&w->flag_sleepers, 1);
  uv_mutex_unlock(&w->flag_mu);
}

static coll_status_t wait_all(void *ctx, int which, uint64_t v,
                              int64_t deadline_ms) {
  inproc_ep_t *ep = ctx;
  uint64_t spin_until = uv_hrtime() + INPROC_FLAG_SPIN_NS;
  unsigned spins = 0;
  for (;;) {
    int p = first_behind(ep, which, v);
    coll_status_t s = check(ep, which, v);
    int64_t left;
    if (s != COLL_OK) return s;
    if (p < 0) return COLL_OK;
    left = deadline_ms < 0 ? INT64_MAX : deadline_ms - coll__now_ms();
    if (left <= 0) {
      coll__trace_note_failed_peer(p);
      return coll__err(COLL_ERR_TIMEOUT,
                       "inproc: rank %d did not reach round %" PRIu64
                       " of the collective in time",
                       p, v);
    }
    if (uv_hrtime() < spin_until) {
      /* Now and then let another thread have the core: the peer this rank
       * waits for may need exactly this one. */
      if (++spins % INPROC_FLAG_SPINS_PER_YIELD == 0)
        sched_yield();
      else
        inproc_cpu_relax();
      continue;
    }
    sleep_on(ep, which, v,
             left < INPROC_FLAG_SLEEP_NS / 1000000 ? (uint64_t)left * 1000000u
                                                   : INPROC_FLAG_SLEEP_NS);
  }
}

/* Threads against the message path of the same build (coll-perf
 * --threads N -c 0, in place, f32 SUM, 2 runs interleaved, quiet 2-vCPU
 * VM), busbw GB/s, messages / rounds:
 *
 *   ranks  1M         2M         4M         8M          16M
 *   2      4.2/6.1    5.9/6.0    6.9/6.1    10.0/6.1    8.6/5.7
 *   4      2.7/3.5    3.2/3.8    3.2/3.6    4.0/3.5     4.1/3.4
 *
 * and at 4 KiB 4.5-4.9 us / 2.2-2.8 us (2 ranks), 77-82 / 16 us (4).
 * Messages between threads are one copy from buffer to buffer, where a
 * round copies in and out of the slots: from 4 MiB up the ring won. With
 * the slots half a page in (INPROC_COLL_PAGE_OFFSET) the rounds caught up
 * at 4 MiB (--offset 16, COLL_ALGO=shm against ring, 3 runs interleaved:
 * 7.6-8.4 against 5.5-7.6 GB/s; 8 MiB 7.2-8.1 against 7.5-10.6; 16 and 32
 * MiB even). From 8 MiB the allreduce reads the callers' buffers directly
 * (INPROC_DIRECT_FROM), which leads the ring (COLL_ALGO=shm against ring,
 * 2 ranks, 3 runs interleaved, GB/s, in place / out of place):
 *
 *            8M                   16M                  64M
 *   direct   6.5-8.2 / 12.0-16.4  7.8-8.6 / 8.4-11.9   7.3-7.9 / 6.9-9.3
 *   ring     6.6-8.3 / 5.1-5.8    6.4-7.2 / 4.3-5.1    5.6-5.9 / 4.0-4.1
 *
 * and in the peers' loop (coll-perf --threads N --peer-protocol, 4 runs
 * interleaved with the build before, GB/s): 2 ranks 16 MiB 8.3-8.9
 * against 7.0-7.5, 64 MiB 8.3-9.2 against 6.1-7.3; 4 ranks on 2 cores
 * 64 MiB 5.6-5.8 against 4.3-4.5 (16 MiB even). So the ring is not auto's
 * for threads at any size.
 * Broadcast and allgather by messages took a quarter to a half of the
 * rounds' time with 2 ranks (4 KiB to 16 MiB), so they keep messages;
 * reduce-scatter came out mixed (rounds ahead to 1 MiB, even at 16 MiB)
 * and kept them too, until the slots moved half a page in: since then
 * the rounds take half the messages' time from 256 KiB up (2 ranks,
 * in place, 3 runs interleaved, us: 256K 18-22 / 48-127, 1M 68-82 /
 * 175-185, 4M 285-301 / 630-663, 16M 1574-1593 / 2926-3216; 4 KiB to 64
 * KiB even or ahead) and 0.5x-0.65x it with 4 ranks on 2 cores (4M
 * 1098-1164 / 1920-2442, 16M 4718-4866 / 7051-7798), so reduce-scatter
 * always takes the rounds. With more ranks than cores rounds led all
 * three up to 1 MiB (4 ranks on 2 cores, time in us, messages / rounds,
 * before the move):
 *
 *            4K            64K           1M           16M
 *   bcast    113-116/20-27 130-173/35-52 216-244/202-269  ~3500/~3700
 *   allgat.  167/23-42     118-146/29-47 186-204/173-181  1950-2390/3470-3810
 *   red-sc.  118-147/34-38 151-154/48-50 443-458/301-349  ~6000/5080-6360
 *
 * There the message waits sleep at once (INPROC_SPIN_NS), so a crowded
 * world takes rounds for broadcast and allgather below 2 MiB. */
#define INPROC_CROWDED_OTHERS_BELOW (2u << 20)
/* Allreduces from this size read the peers' buffers directly (see above);
 * below it the rounds led (4 MiB in place: 8.2-8.4 GB/s in rounds, 5.9-6.5
 * direct), their slots staying in cache where a peer's whole buffer does
 * not. */
#define INPROC_DIRECT_FROM (8u << 20)

/* The direct allreduce's reads of the peers' buffers (transport.h). The
 * reader raises its flag, then looks for a closed endpoint; a closing
 * endpoint marks itself closed, then waits for every flag to drop
 * (coll__inproc_shared_quiesce). Both orders are sequentially consistent:
 * either the reader sees the close and reads nothing, or the close sees
 * the flag and waits. A read holds no lock and waits for nothing, so the
 * wait is short. */
static coll_status_t read_begin(void *ctx) {
  inproc_ep_t *ep = ctx;
  inproc_world_t *w = ep->w;
  atomic_store(&ep->coll_reading, 1);
  for (int p = 0; p < w->size; p++) {
    const inproc_ep_t *x = &w->eps[p];
    coll_status_t s;
    char seen[160];
    if (!is_closed(x)) continue;
    atomic_store(&ep->coll_reading, 0);
    if (x != ep) coll__inproc_note_origin(ep, inproc_origin(x));
    s = coll__origin_req_status(inproc_origin(x));
    if (s == COLL_OK) s = COLL_ERR_ABORTED;
    coll__origin_text(inproc_origin(x), ep->rank, seen, sizeof seen);
    return coll__err(s, "inproc rank %d: rank %d's buffers: %s", ep->rank, p,
                     seen);
  }
  return COLL_OK;
}

static void read_end(void *ctx) {
  inproc_ep_t *ep = ctx;
  atomic_store(&ep->coll_reading, 0);
}

void coll__inproc_shared_quiesce(inproc_world_t *w, const inproc_ep_t *x) {
  for (int p = 0; p < w->size; p++) {
    unsigned spins = 0;
    if (&w->eps[p] == x) continue;
    while (atomic_load(&w->eps[p].coll_reading))
      if (++spins % INPROC_FLAG_SPINS_PER_YIELD == 0)
        sched_yield();
      else
        inproc_cpu_relax();
  }
}

/* A world's table starts as this one (inproc_shared_alloc). */
static const coll_t_shared_t inproc_shared = {
    .slot_bytes = INPROC_COLL_SLOT,
    .allreduce_below = 0,
    .others_below = 0,
    .reduce_scatter_below = SIZE_MAX,
    .direct_from = INPROC_DIRECT_FROM,
    .read_begin = read_begin,
    .read_end = read_end,
    .slot = coll_slot,
    .result = coll_result,
    .next_round = next_round,
    .post = post,
    .wait_all = wait_all,
    .note = coll_note,
};

int coll__inproc_shared_alloc(inproc_world_t *w) {
  int i;
  for (i = 0; i < w->size; i++) {
    /* Untouched until a collective uses it: malloc maps this size lazily. */
    w->eps[i].coll_mem =
        aligned_alloc(4096, 4 * (size_t)INPROC_COLL_SLOT + 4096);
    if (w->eps[i].coll_mem == NULL) break;
  }
  if (i == w->size) {
    w->shared = inproc_shared;
    if (w->crowded) w->shared.others_below = INPROC_CROWDED_OTHERS_BELOW;
    return 1;
  }
  /* Every rank or none: the ranks must pick the same algorithms. */
  coll__inproc_shared_free(w);
  return 0;
}

void coll__inproc_shared_free(inproc_world_t *w) {
  for (int i = 0; i < w->size; i++) {
    free(w->eps[i].coll_mem);
    w->eps[i].coll_mem = NULL;
  }
}

const coll_t_shared_t *coll__inproc_shared(const inproc_world_t *w) {
  return w->eps[0].coll_mem != NULL ? &w->shared : NULL;
}

void coll__inproc_shared_wake(inproc_world_t *w) {
  uv_mutex_lock(&w->flag_mu);
  uv_cond_broadcast(&w->flag_cv);
  uv_mutex_unlock(&w->flag_mu);
}
