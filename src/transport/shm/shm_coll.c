/* SPDX-License-Identifier: Apache-2.0 */
/* shm_coll.c: the rounds of the collectives designed for shared memory
 * (common/rounds.h) over the regions of one host's processes: every
 * rank's slots and result areas at the end of its region, its control in
 * its header. What is this transport's own: a waiter sleeps on its
 * doorbell and its peers' sockets, like a request's waiter (shm_wait.c);
 * a peer that posts rings the doorbells of the ranks that sleep; a dead
 * peer's socket hangs up, a closed one says so in its header, and the
 * heartbeat watches the wait (rounds.waiters). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/trace.h"
#include "transport/shm/shm_int.h"

/* The longest sleep between two looks at the flags: a safety net for a
 * doorbell rung while another thread of this rank slept on it. */
#define SHM_FLAG_SLEEP_MS 10

static shm_hdr_t *hdr_of(const shm_ep_t *ep, int r) {
  return r == ep->rank ? ep->hdr : ep->peers[r].region;
}

static int gone(void *arg, int p) {
  shm_ep_t *ep = arg;
  if (p == ep->rank) return atomic_load(&ep->aborted);
  return atomic_load_explicit(&hdr_of(ep, p)->gone, memory_order_acquire);
}

/* COLL_OK while the endpoint is open and peer p is not known lost; else
 * its failure, with what happened in buf. */
static coll_status_t why(void *arg, int p, char *buf, size_t n) {
  shm_ep_t *ep = arg;
  shm_peer_t *pr = &ep->peers[p];
  coll_status_t s = COLL_OK;
  pthread_mutex_lock(&ep->mu);
  if (ep->closed) {
    coll__shm_closed_text(ep, buf, n);
    s = coll__origin_req_status(coll__shm_closed_origin(ep));
    if (s == COLL_OK) s = COLL_ERR_ABORTED;
  } else if (p != ep->rank) {
    if (!pr->lost && atomic_load_explicit(&((shm_hdr_t *)pr->region)->gone,
                                          memory_order_acquire))
      coll__shm_peer_lost(ep, p);
    if (pr->lost) {
      snprintf(buf, n, "%s", pr->why);
      s = pr->lost_status;
    }
  }
  pthread_mutex_unlock(&ep->mu);
  return s;
}

static void wake(void *arg) {
  shm_ep_t *ep = arg;
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank) coll__shm_ring_bell(ep, p);
}

/* What a sleeping wait on the flags waits for. */
typedef struct flag_wait {
  const coll_rounds_t *R;
  int which;
  uint64_t v;
} flag_wait_t;

static int flags_behind(shm_ep_t *ep, void *arg) {
  flag_wait_t *f = arg;
  (void)ep;
  return coll__rounds_blocked(f->R, f->which, f->v);
}

/* Sleeps in the kernel as a request's waiter does (shm_wait.c), while
 * the flags still hold the wait up. */
static void sleep_on(void *arg, const coll_rounds_t *R, int which, uint64_t v,
                     int64_t ms) {
  flag_wait_t f = {R, which, v};
  coll__shm_kernel_sleep(arg, flags_behind, &f, 0, ms);
}

static const coll_rounds_ops_t shm_rounds_ops = {
    .gone = gone,
    .why = why,
    .wake = wake,
    .sleep = sleep_on,
};

coll_status_t coll__shm_rounds_init(shm_ep_t *ep) {
  coll_wait_policy_t pol = {(uint64_t)ep->spin_ns, ep->per_yield,
                            SHM_FLAG_SLEEP_MS, 0};
  coll_rounds_t *R = &ep->rounds;
  /* The collectives designed for shared memory count members: a host
   * endpoint (whose members are some of the comm's ranks) has none. */
  if (ep->names != NULL) return COLL_OK;
  ep->round_ctl = calloc((size_t)ep->world, sizeof *ep->round_ctl);
  ep->round_mem = calloc((size_t)ep->world, sizeof *ep->round_mem);
  if (ep->round_ctl == NULL || ep->round_mem == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "shm setup: out of memory");
  for (int r = 0; r < ep->world; r++) {
    ep->round_ctl[r] = &hdr_of(ep, r)->round_ctl;
    ep->round_mem[r] = (char *)hdr_of(ep, r) + ep->lay.coll_off;
  }
  coll__rounds_init(R, "shm", ep->rank, ep->world, SHM_COLL_SLOT, ep->round_ctl,
                    ep->round_mem, &shm_rounds_ops, ep, &pol);
  R->others_below = SIZE_MAX;
  R->reduce_scatter_below = SIZE_MAX;
  return COLL_OK;
}

coll_rounds_t *coll__shm_rounds(shm_ep_t *ep) {
  return ep->round_ctl != NULL ? &ep->rounds : NULL;
}
