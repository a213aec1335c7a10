/* SPDX-License-Identifier: Apache-2.0 */
/* refusal_log.c: rate-limited WARN lines about refused connections. */
#include "core/refusal_log.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"

void coll__refusal_log_init(coll_refusal_log_t *l, coll_log_sub_t sub,
                            const char *what) {
  memset(l, 0, sizeof *l);
  l->sub = sub;
  snprintf(l->what, sizeof l->what, "%s", what);
  l->next_flush = coll__now_ms() + COLL_REFUSAL_FLUSH_MS;
}

/* "1.2.3.4:5678" -> "1.2.3.4", "[::1]:5678" -> "[::1]". */
static void strip_port(const char *source, char *out, size_t cap) {
  const char *colon = strrchr(source, ':');
  size_t n = strlen(source);
  if (colon != NULL && (source[0] != '[' || colon[-1] == ']'))
    n = (size_t)(colon - source);
  if (n >= cap) n = cap - 1;
  memcpy(out, source, n);
  out[n] = '\0';
}

void coll__refusal_flush(coll_refusal_log_t *l) {
  int i;
  for (i = 0; i < l->n; i++) {
    coll_refusal_src_t *s = &l->src[i];
    if (s->pending == 0) continue;
    COLL_WARN(l->sub,
              "%s: refused %" PRIu64 " more connection%s from %s (last: %s)",
              l->what, s->pending, s->pending > 1 ? "s" : "", s->addr, s->last);
    s->pending = 0;
  }
  if (l->others > 0)
    COLL_WARN(l->sub, "%s: refused %" PRIu64 " connection%s from other sources",
              l->what, l->others, l->others > 1 ? "s" : "");
  l->others = 0;
  l->next_flush = coll__now_ms() + COLL_REFUSAL_FLUSH_MS;
}

void coll__refusal_note(coll_refusal_log_t *l, const char *source,
                        const char *why) {
  char addr[64];
  int i;
  l->total++;
  strip_port(source, addr, sizeof addr);
  for (i = 0; i < l->n && strcmp(l->src[i].addr, addr) != 0; i++) {
  }
  if (i < l->n) {
    l->src[i].pending++;
    snprintf(l->src[i].last, sizeof l->src[i].last, "%s", why);
  } else if (l->n < COLL_REFUSAL_SOURCES) {
    coll_refusal_src_t *s = &l->src[l->n++];
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    snprintf(s->last, sizeof s->last, "%s", why);
    s->pending = 0;
    COLL_WARN(l->sub,
              "%s: refusing a connection from %s: %s (further refusals "
              "from there are counted)",
              l->what, source, why);
  } else {
    l->others++;
  }
  if (coll__now_ms() >= l->next_flush) coll__refusal_flush(l);
}
