/* SPDX-License-Identifier: Apache-2.0 */
/* setup_warn.c: the schedule of a waiting setup's warnings. */
#include "core/setup_warn.h"

#include <stdio.h>

#include "core/clock.h"

_Atomic int64_t coll__setup_warn_ms = COLL_SETUP_WARN_MS;

void coll__setup_warn_init(coll_setup_warn_t *w, int64_t start_ms) {
  int64_t p = atomic_load(&coll__setup_warn_ms);
  if (p < 1) p = 1;
  w->start_ms = start_ms;
  w->next_ms = start_ms + p;
  w->every_ms = p;
}

int64_t coll__setup_warn_until(const coll_setup_warn_t *w,
                               int64_t deadline_ms) {
  return deadline_ms < 0 || w->next_ms < deadline_ms ? w->next_ms : deadline_ms;
}

int coll__setup_warn_due(coll_setup_warn_t *w) {
  int64_t now = coll__now_ms();
  if (now < w->next_ms) return 0;
  /* Doubling: 10, 30, 70, 130, 190 s ... with the defaults. */
  w->every_ms = w->every_ms * 2 > COLL_SETUP_WARN_MAX_MS
                    ? COLL_SETUP_WARN_MAX_MS
                    : w->every_ms * 2;
  w->next_ms = now + w->every_ms;
  return 1;
}

const char *coll__setup_warn_waited(const coll_setup_warn_t *w, char buf[16]) {
  double s = (double)(coll__now_ms() - w->start_ms) / 1000.0;
  snprintf(buf, 16, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}
