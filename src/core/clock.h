/* SPDX-License-Identifier: Apache-2.0 */
/* clock.h: the monotonic clock every deadline is measured on. */
#ifndef COLL_CORE_CLOCK_H
#define COLL_CORE_CLOCK_H

#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

/* Monotonic nanoseconds / milliseconds. Any thread. */
static inline uint64_t coll__now_ns(void) { return uv_hrtime(); }
static inline int64_t coll__now_ms(void) {
  return (int64_t)(uv_hrtime() / 1000000u);
}

/* An absolute deadline from a relative timeout (< 0: none, returns -1). */
static inline int64_t coll__deadline(int64_t timeout_ms) {
  return timeout_ms < 0 ? -1 : coll__now_ms() + timeout_ms;
}

/* Milliseconds left until an absolute deadline: -1 for none, 0 if passed. */
static inline int64_t coll__remaining_ms(int64_t deadline_ms) {
  int64_t left;
  if (deadline_ms < 0) return -1;
  left = deadline_ms - coll__now_ms();
  return left > 0 ? left : 0;
}

/* One pause of a polling loop (what it polls has no way to wake us): the
 * first 256 yield, the next 1024 sleep 20 us, later ones 200 us, so a long
 * wait costs little CPU and still notices an abort within a millisecond.
 * Start *spins at 0. Any thread. */
static inline void coll__poll_pause(unsigned *spins) {
  struct timespec ts = {0, *spins < 1280 ? 20000 : 200000};
  if (*spins < 256)
    sched_yield();
  else
    nanosleep(&ts, NULL);
  if (*spins < UINT_MAX) (*spins)++;
}

#endif
