/* SPDX-License-Identifier: Apache-2.0 */
/* waiter.h: how a provider waits for something its peers do: look, and
 * while nothing is there look again for a short while (pausing, and now
 * and then yielding the core: on a host with more ranks than cores the
 * peer waited for may need exactly this one), then sleep in the
 * provider's own way (a condition variable, poll() on a doorbell and
 * sockets) and look again, until the deadline. What ends a wait early
 * (the endpoint's abort, a peer's loss) is for the look to see: it then
 * says the wait is done, and the caller reports why.
 *
 * Written inline so that a look and a sleep the caller passes as constant
 * functions cost no call: the wait loops are the providers' hot paths. */
#ifndef COLL_TRANSPORT_COMMON_WAITER_H
#define COLL_TRANSPORT_COMMON_WAITER_H

#include <sched.h>
#include <stdint.h>

#include "core/clock.h"

/* What a look found. MOVED: not done, but something moved (the peer is
 * busy with us): with respin, looking goes on for another spin_ns. */
enum { COLL_WAIT_IDLE = 0, COLL_WAIT_DONE = 1, COLL_WAIT_MOVED = 2 };

typedef struct coll_wait_policy {
  uint64_t spin_ns;     /* look this long before the first sleep; 0: sleep
                           at once */
  unsigned per_yield;   /* looks between two sched_yield() calls while
                           spinning (a pause instruction between the
                           others); 1: yield every time; 0: never */
  int64_t sleep_max_ms; /* the longest sleep between two looks (a safety
                           net where a wakeup can be missed); < 0: up to
                           the deadline */
  int respin;           /* spin again after a sleep, and after a look that
                           found something moved */
} coll_wait_policy_t;

/* One pause inside a polling loop. */
static inline void coll__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Waits until look(arg) says COLL_WAIT_DONE, or timeout_ms passed (< 0:
 * no bound; 0: one look). Between looks it spins as pol says, then calls
 * sleep(arg, ms): sleep at most ms (< 0: without bound), or less (a
 * wakeup, or nothing). Returns 1 once done, 0 at the deadline. The
 * calling thread. */
static inline int coll__wait_loop(const coll_wait_policy_t *pol,
                                  int64_t timeout_ms, int (*look)(void *),
                                  void (*sleep)(void *, int64_t), void *arg) {
  uint64_t now = coll__now_ns(), end = 0, spin_from = now;
  unsigned spins = 0;
  if (timeout_ms > 0) {
    /* Clamped so the nanosecond deadline cannot overflow (~290 years). */
    if (timeout_ms > INT64_MAX / 1000000 / 2)
      timeout_ms = INT64_MAX / 1000000 / 2;
    end = now + (uint64_t)timeout_ms * 1000000u;
  }
  for (;;) {
    int64_t ms = -1;
    int r = look(arg);
    if (r == COLL_WAIT_DONE) return 1;
    now = coll__now_ns();
    if (timeout_ms == 0 || (end != 0 && now >= end)) return 0;
    if (r == COLL_WAIT_MOVED && pol->respin) {
      spin_from = now;
      continue;
    }
    if (now - spin_from < pol->spin_ns) {
      if (pol->per_yield != 0 && ++spins % pol->per_yield == 0)
        sched_yield();
      else
        coll__cpu_relax();
      continue;
    }
    if (end != 0) ms = (int64_t)((end - now + 999999u) / 1000000u);
    if (pol->sleep_max_ms >= 0 && (ms < 0 || ms > pol->sleep_max_ms))
      ms = pol->sleep_max_ms;
    sleep(arg, ms);
    if (pol->respin) spin_from = coll__now_ns();
  }
}

#endif
