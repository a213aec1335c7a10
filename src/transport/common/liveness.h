/* SPDX-License-Identifier: Apache-2.0 */
/* liveness.h: what every provider keeps to say who failed and who is
 * missing (provider.h: the fail, origin, ask, tell and heard slots),
 * written once: the heartbeat settings, the origins an endpoint learns
 * (the one it failed for, the first it heard of), a report kept once and
 * read by anyone, and the answer to "where are you" from memory every
 * rank maps. */
#ifndef COLL_TRANSPORT_COMMON_LIVENESS_H
#define COLL_TRANSPORT_COMMON_LIVENESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "core/desync.h"
#include "core/origin.h"
#include "core/position.h"

/* ---- heartbeats ---------------------------------------------------------- */

/* The heartbeat timeout every provider keeps (COLL_HEARTBEAT_TIMEOUT_MS,
 * a knob of core/env.h): a peer silent this long while a call waits on it
 * is unresponsive; 0: no heartbeats. Any thread. */
int64_t coll__hb_timeout_ms(void);
/* How often a provider beats and judges silence: a fiftieth of the
 * timeout (at least 1 ms), so that a silence is judged within 10 % of it
 * however the beats and the ticks fall (common/silence.h). */
static inline int64_t coll__hb_tick_ms(int64_t timeout_ms) {
  return timeout_ms / 50 > 0 ? timeout_ms / 50 : 1;
}

/* ---- origins ------------------------------------------------------------- */

/* An origin written once: the first writer claims it, writes it, then
 * publishes it; readers see it only once published. */
typedef struct coll_origin_cell {
  atomic_int claimed, set;
  coll_origin_t o;
} coll_origin_cell_t;

/* Before any other thread can see the cell. */
void coll__origin_cell_init(coll_origin_cell_t *c);
/* Keeps o unless an origin was kept before (the first one wins); 1 if o
 * was kept. Any thread. */
int coll__origin_cell_keep(coll_origin_cell_t *c, const coll_origin_t *o);
/* 1 and *o once an origin was kept. Any thread; never blocks. */
int coll__origin_cell_get(const coll_origin_cell_t *c, coll_origin_t *o);

/* The origins of one endpoint: the one it failed for (its close) and the
 * first one it heard of from a peer (what it forwards if it fails). */
typedef struct coll_origins {
  coll_origin_cell_t own, heard;
} coll_origins_t;

void coll__origins_init(coll_origins_t *e);
/* A peer's failure that started at o reached this endpoint (the first one
 * it hears of sticks). Any thread. */
void coll__origins_heard(coll_origins_t *e, const coll_origin_t *o);
/* The endpoint closes for a failure that started at o: what it heard of
 * first wins over o; the result is kept as its own origin (a second
 * close keeps the first one's) and returned. Any thread. */
coll_origin_t coll__origins_close(coll_origins_t *e, const coll_origin_t *o);
/* The origin slot (provider.h): the origin the endpoint closed for, else
 * the one it heard of; 0 when neither. Any thread; never blocks. */
int coll__origins_get(const coll_origins_t *e, coll_origin_t *o);

/* ---- the desync report --------------------------------------------------- */

/* A report kept once (the first keeper wins) and read by any thread; it
 * holds no pointer, so it may live in memory every rank maps, where a
 * reader trusts nothing of it beyond its bounds. */
typedef struct coll_report_cell {
  atomic_int claimed, ready;
  char text[COLL_DESYNC_REPORT_MAX];
} coll_report_cell_t;

/* Before any other thread can see the cell. */
void coll__report_cell_init(coll_report_cell_t *c);
/* Keeps the first n bytes of report (cut to fit) unless one was kept
 * before; 1 if this one was kept. Any thread. */
int coll__report_cell_keep(coll_report_cell_t *c, const char *report, size_t n);
/* The same in two steps, for a writer that must know it is the one before
 * it writes: claim returns 1 once, to the first caller, who then publishes
 * the report (NUL-terminated, cut to fit). Any thread. */
int coll__report_cell_claim(coll_report_cell_t *c);
void coll__report_cell_publish(coll_report_cell_t *c, const char *report,
                               size_t n);
/* 1 and the report in buf (n bytes, cut and terminated whatever the cell
 * holds) once one was kept; else 0. Any thread. */
int coll__report_cell_get(const coll_report_cell_t *c, char *buf, size_t n);

/* ---- the desync responders ---------------------------------------------- */

/* Where a provider's reports lie: in cells this rank can read, n of them,
 * the i-th at cell_of(arg, i) (NULL: unreadable now), this rank's own at
 * index own. Every rank's own cell in memory the others map (processes of
 * one host), one cell a world of threads shares, or the one cell the
 * peers' report messages fill (a wire). */
typedef struct coll_report_board {
  int n, own;
  coll_report_cell_t *(*cell_of)(void *arg, int i);
  void *arg;
} coll_report_board_t;

/* The tell slot: keeps this rank's report in its own cell (the first
 * report kept there wins; cut to fit). Any thread. */
void coll__board_tell(const coll_report_board_t *b, const char *report);
/* The heard slot: 1 and the report of cell `first` (the rank where the
 * failure started, where the provider knows it; < 0: none) if it holds
 * one, else of the first cell that does; 0 if none. Any thread; never
 * blocks. */
int coll__board_heard(const coll_report_board_t *b, int first, char *buf,
                      size_t n);

/* The ask slot over memory every rank maps: rank r's position is
 * pos_of(arg, r) (NULL: that rank cannot say), read at once whatever its
 * threads are doing (a stopped process reads as where it stopped). */
void coll__ask_mapped(int world, const coll_pos_t *(*pos_of)(void *, int),
                      void *arg, coll_pos_snap_t *out, unsigned char *answered);

#endif
