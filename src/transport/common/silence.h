/* SPDX-License-Identifier: Apache-2.0 */
/* silence.h: when a peer's silence is long enough to name it
 * unresponsive: the one rule every provider's heartbeat follows, so that
 * the same stall is judged alike over TCP and shared memory.
 *
 * A watcher (one thread per endpoint) ticks every coll__hb_tick_ms(T)
 * and a peer shows it is alive about that often while it runs (a beat in
 * memory, a heartbeat frame, or data). Two rules:
 *  - Silence is counted from the peer's last sign of life plus the longest
 *    gap the provider allows between two signs as this watcher sees them
 *    (`gap_ms`): a peer that stops just before its next sign was due is
 *    named T after it stopped, never sooner, and one that stops just
 *    after a sign no later than T plus the gap and a tick (T + 4 T/50 with
 *    a gap of three ticks: within 8 %).
 *  - Only silence this rank could have watched counts: a tick that comes a
 *    quarter of T or more late says this rank itself was stalled (stopped,
 *    swapped out, starved), and every peer's silence then counts from that
 *    tick on. A rank resumed after a stop first reads what its peers sent
 *    meanwhile (their goodbyes name it) instead of judging them on what it
 *    could not see.
 * One watcher thread per coll_silence_t. */
#ifndef COLL_TRANSPORT_COMMON_SILENCE_H
#define COLL_TRANSPORT_COMMON_SILENCE_H

#include <stdint.h>

#include "transport/common/liveness.h"

typedef struct coll_silence {
  int64_t timeout_ms; /* T */
  int64_t tick_ms;
  int64_t last_tick_ms;
  int64_t watched_from_ms; /* silence before this was not watched */
} coll_silence_t;

/* A watcher for timeout T (> 0) that starts watching at now_ms. */
void coll__silence_init(coll_silence_t *s, int64_t timeout_ms, int64_t now_ms);

/* Called first in every tick, at now_ms: 1 when this tick came so late
 * that this rank was stalled (nothing is judged on this tick then), else
 * 0. */
int coll__silence_tick(coll_silence_t *s, int64_t now_ms);

/* How long a peer whose last sign of life came at heard_ms has been silent
 * as this rank could watch it, at now_ms. */
int64_t coll__silence_watched_ms(const coll_silence_t *s, int64_t heard_ms,
                                 int64_t now_ms);

/* 1 when that silence reached T plus gap_ms: the longest the provider
 * lets a running peer go between two signs of life, as seen by this
 * watcher (for a peer that beats every tick and a watcher that sees the
 * beat at its next tick: two ticks, and one more for a late thread). */
int coll__silence_over(const coll_silence_t *s, int64_t heard_ms,
                       int64_t now_ms, int64_t gap_ms);

#endif
