/* SPDX-License-Identifier: Apache-2.0 */
/* liveness.c: the heartbeat settings, the origins an endpoint learns, the
 * kept report and the mapped answer to "where are you" (liveness.h). */
#include "transport/common/liveness.h"

#include <stdio.h>
#include <string.h>

#include "core/env.h"

int64_t coll__hb_timeout_ms(void) {
  return coll__knob(COLL_ENV_HEARTBEAT_TIMEOUT_MS);
}

void coll__origin_cell_init(coll_origin_cell_t *c) {
  atomic_init(&c->claimed, 0);
  atomic_init(&c->set, 0);
}

int coll__origin_cell_keep(coll_origin_cell_t *c, const coll_origin_t *o) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&c->claimed, &expected, 1)) return 0;
  c->o = *o;
  atomic_store_explicit(&c->set, 1, memory_order_release);
  return 1;
}

int coll__origin_cell_get(const coll_origin_cell_t *c, coll_origin_t *o) {
  if (!atomic_load_explicit(&((coll_origin_cell_t *)c)->set,
                            memory_order_acquire))
    return 0;
  *o = c->o;
  return 1;
}

void coll__origins_init(coll_origins_t *e) {
  coll__origin_cell_init(&e->own);
  coll__origin_cell_init(&e->heard);
}

void coll__origins_heard(coll_origins_t *e, const coll_origin_t *o) {
  (void)coll__origin_cell_keep(&e->heard, o);
}

coll_origin_t coll__origins_close(coll_origins_t *e, const coll_origin_t *o) {
  coll_origin_t use = *o;
  (void)coll__origin_cell_get(&e->heard, &use);
  if (!coll__origin_cell_keep(&e->own, &use)) {
    /* A close that lost the claim: the winner publishes in a few
     * instructions, and its origin is the endpoint's. */
    while (!coll__origin_cell_get(&e->own, &use)) {
    }
  }
  return use;
}

int coll__origins_get(const coll_origins_t *e, coll_origin_t *o) {
  return coll__origin_cell_get(&e->own, o) ||
         coll__origin_cell_get(&e->heard, o);
}

void coll__report_cell_init(coll_report_cell_t *c) {
  atomic_init(&c->claimed, 0);
  atomic_init(&c->ready, 0);
  c->text[0] = '\0';
}

int coll__report_cell_claim(coll_report_cell_t *c) {
  int expected = 0;
  return atomic_compare_exchange_strong(&c->claimed, &expected, 1);
}

void coll__report_cell_publish(coll_report_cell_t *c, const char *report,
                               size_t n) {
  if (n > sizeof c->text - 1) n = sizeof c->text - 1;
  memcpy(c->text, report, n);
  c->text[n] = '\0';
  atomic_store_explicit(&c->ready, 1, memory_order_release);
}

int coll__report_cell_keep(coll_report_cell_t *c, const char *report,
                           size_t n) {
  if (!coll__report_cell_claim(c)) return 0;
  coll__report_cell_publish(c, report, n);
  return 1;
}

int coll__report_cell_get(const coll_report_cell_t *c, char *buf, size_t n) {
  if (!atomic_load_explicit(&((coll_report_cell_t *)c)->ready,
                            memory_order_acquire))
    return 0;
  /* Bounded whatever the cell holds: %.*s stops at the array's end. */
  snprintf(buf, n, "%.*s", (int)sizeof c->text - 1, c->text);
  return 1;
}

void coll__board_tell(const coll_report_board_t *b, const char *report) {
  coll_report_cell_t *c = b->cell_of(b->arg, b->own);
  if (c != NULL) (void)coll__report_cell_keep(c, report, strlen(report));
}

/* 1 and cell i's report, if it is readable and holds one. */
static int board_get(const coll_report_board_t *b, int i, char *buf, size_t n) {
  const coll_report_cell_t *c = b->cell_of(b->arg, i);
  return c != NULL && coll__report_cell_get(c, buf, n);
}

int coll__board_heard(const coll_report_board_t *b, int first, char *buf,
                      size_t n) {
  if (first >= 0 && first < b->n && board_get(b, first, buf, n)) return 1;
  for (int i = 0; i < b->n; i++)
    if (board_get(b, i, buf, n)) return 1;
  return 0;
}

void coll__ask_mapped(int world, const coll_pos_t *(*pos_of)(void *, int),
                      void *arg, coll_pos_snap_t *out,
                      unsigned char *answered) {
  for (int r = 0; r < world; r++) {
    const coll_pos_t *p = pos_of(arg, r);
    if (p == NULL) continue;
    coll__pos_read(p, &out[r]);
    answered[r] = 1;
  }
}
