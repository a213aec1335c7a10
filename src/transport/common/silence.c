/* SPDX-License-Identifier: Apache-2.0 */
/* silence.c: when a peer's silence is long enough to name it (silence.h). */
#include "transport/common/silence.h"

void coll__silence_init(coll_silence_t *s, int64_t timeout_ms, int64_t now_ms) {
  s->timeout_ms = timeout_ms;
  s->tick_ms = coll__hb_tick_ms(timeout_ms);
  s->last_tick_ms = now_ms;
  s->watched_from_ms = now_ms;
}

int coll__silence_tick(coll_silence_t *s, int64_t now_ms) {
  int64_t late = now_ms - s->last_tick_ms - s->tick_ms;
  s->last_tick_ms = now_ms;
  /* A watcher a few ticks late (a busy host) still watched: the peers'
   * signs were recorded when they came (the kernel's clock on a socket, a
   * count in memory). A quarter of T is a stall this rank could not watch
   * through. */
  if (late < s->timeout_ms / 4) return 0;
  s->watched_from_ms = now_ms;
  return 1;
}

int64_t coll__silence_watched_ms(const coll_silence_t *s, int64_t heard_ms,
                                 int64_t now_ms) {
  int64_t from = heard_ms > s->watched_from_ms ? heard_ms : s->watched_from_ms;
  return now_ms > from ? now_ms - from : 0;
}

int coll__silence_over(const coll_silence_t *s, int64_t heard_ms,
                       int64_t now_ms, int64_t gap_ms) {
  /* A running peer shows another sign within the gap of its last one:
   * silence counts from when that one was due, or from when this rank
   * began to watch again, whichever is later. */
  int64_t from = heard_ms + gap_ms;
  if (from < s->watched_from_ms) from = s->watched_from_ms;
  return now_ms - from >= s->timeout_ms;
}
