/* SPDX-License-Identifier: Apache-2.0 */
/* inproc_shared.c: the rounds of the collectives designed for shared
 * memory (common/rounds.h) between the threads of one world: what the shm
 * transport maps, without the mapping. Every rank's slots and result
 * areas are an allocation of its own, its control lives in its endpoint.
 * A waiter spins while its peers are about to answer (when every rank
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
#define INPROC_FLAG_SLEEP_MS 10
/* How long a waiter polls the flags before it sleeps, with more rank
 * threads than cores too (it yields as it polls): as the shm transport's
 * waiters (COLL_DEFAULT_SHM_SPIN_US, core/env.h). */
#define INPROC_FLAG_SPIN_NS 50000u
/* Looks between two sched_yield calls while spinning. */
#define INPROC_FLAG_SPINS_PER_YIELD 64

static int is_closed(const inproc_ep_t *x) {
  return atomic_load(&((inproc_ep_t *)x)->lost) != INPROC_OPEN;
}

static int gone(void *arg, int p) {
  return is_closed(&((inproc_ep_t *)arg)->w->eps[p]);
}

/* A closed rank p's failure, as this rank reports it: its origin (a peer's
 * is forwarded from here on), or this endpoint's own close. */
static coll_status_t why(void *arg, int p, char *buf, size_t n) {
  inproc_ep_t *ep = arg;
  const inproc_ep_t *x = &ep->w->eps[p];
  coll_status_t s;
  if (!is_closed(x)) return COLL_OK;
  if (x != ep) coll__inproc_note_origin(ep, inproc_origin(x));
  s = coll__origin_req_status(inproc_origin(x));
  if (s == COLL_OK) s = COLL_ERR_ABORTED;
  if (x == ep && inproc_origin(ep)->rank == ep->rank)
    snprintf(buf, n, "this endpoint was %s",
             inproc_why_text(atomic_load(&ep->lost)));
  else
    coll__origin_text(inproc_origin(x), ep->rank, buf, n);
  return s;
}

static void wake(void *arg) {
  inproc_world_t *w = ((inproc_ep_t *)arg)->w;
  /* Pairs with the fence in sleep_on: either the sleeper sees the flag,
   * or this sees the sleeper. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&w->flag_sleepers, memory_order_relaxed) > 0) {
    uv_mutex_lock(&w->flag_mu);
    uv_cond_broadcast(&w->flag_cv);
    uv_mutex_unlock(&w->flag_mu);
  }
}

/* Sleeps on flag_cv for at most ms, unless a flag or a close that ends
 * the wait came first. */
static void sleep_on(void *arg, const coll_rounds_t *R, int which, uint64_t v,
                     int64_t ms) {
  inproc_world_t *w = ((inproc_ep_t *)arg)->w;
  uv_mutex_lock(&w->flag_mu);
  atomic_fetch_add(&w->flag_sleepers, 1);
  atomic_thread_fence(memory_order_seq_cst);
  /* A close stores `lost` before it takes flag_mu to broadcast: looked at
   * under the lock, it cannot slip between this look and the wait. */
  if (coll__rounds_blocked(R, which, v)) {
    if (ms < 0)
      uv_cond_wait(&w->flag_cv, &w->flag_mu);
    else
      (void)uv_cond_timedwait(&w->flag_cv, &w->flag_mu,
                              (uint64_t)ms * 1000000u);
  }
  atomic_fetch_sub(&w->flag_sleepers, 1);
  uv_mutex_unlock(&w->flag_mu);
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
        coll__cpu_relax();
  }
}

static const coll_rounds_ops_t inproc_rounds_ops = {
    .gone = gone,
    .why = why,
    .wake = wake,
    .sleep = sleep_on,
    .read_begin = read_begin,
    .read_end = read_end,
};

/* Spins while the peers are about to answer, yielding now and then (with
 * more rank threads than cores too: the flags are polled, not the
 * requests), and sleeps at most INPROC_FLAG_SLEEP_MS at a time. */
static const coll_wait_policy_t inproc_rounds_policy = {
    INPROC_FLAG_SPIN_NS, INPROC_FLAG_SPINS_PER_YIELD, INPROC_FLAG_SLEEP_MS, 0};

int coll__inproc_shared_alloc(inproc_world_t *w) {
  size_t n = (size_t)w->size;
  int i;
  w->round_ctl = calloc(n, sizeof *w->round_ctl);
  w->round_mem = calloc(n, sizeof *w->round_mem);
  for (i = 0; w->round_ctl != NULL && w->round_mem != NULL && i < w->size;
       i++) {
    inproc_ep_t *ep = &w->eps[i];
    /* Untouched until a collective uses it: malloc maps this size lazily. */
    ep->coll_mem = aligned_alloc(4096, 4 * (size_t)INPROC_COLL_SLOT + 4096);
    if (ep->coll_mem == NULL) break;
    w->round_ctl[i] = &ep->round_ctl;
    w->round_mem[i] = ep->coll_mem + INPROC_COLL_PAGE_OFFSET;
  }
  if (i < w->size) {
    /* Every rank or none: the ranks must pick the same algorithms. */
    coll__inproc_shared_free(w);
    return 0;
  }
  for (i = 0; i < w->size; i++) {
    coll_rounds_t *R = &w->eps[i].rounds;
    coll__round_ctl_init(&w->eps[i].round_ctl);
    coll__rounds_init(R, "inproc", i, w->size, INPROC_COLL_SLOT, w->round_ctl,
                      w->round_mem, &inproc_rounds_ops, &w->eps[i],
                      &inproc_rounds_policy);
    R->reduce_scatter_below = SIZE_MAX;
    R->direct_from = INPROC_DIRECT_FROM;
    if (w->crowded) R->others_below = INPROC_CROWDED_OTHERS_BELOW;
  }
  return 1;
}

void coll__inproc_shared_free(inproc_world_t *w) {
  for (int i = 0; i < w->size; i++) {
    free(w->eps[i].coll_mem);
    w->eps[i].coll_mem = NULL;
  }
  free(w->round_ctl);
  free(w->round_mem);
  w->round_ctl = NULL;
  w->round_mem = NULL;
}

coll_rounds_t *coll__inproc_rounds(inproc_ep_t *ep) {
  return ep->coll_mem != NULL ? &ep->rounds : NULL;
}

void coll__inproc_shared_wake(inproc_world_t *w) {
  uv_mutex_lock(&w->flag_mu);
  uv_cond_broadcast(&w->flag_cv);
  uv_mutex_unlock(&w->flag_mu);
}
