/* SPDX-License-Identifier: Apache-2.0 */
/* setup_warn.h: when a setup that keeps waiting says so. A start-up
 * mistake (ports that differ, a rank that never started, another world
 * size) would otherwise be silent for the whole timeout; every wait of
 * the setup instead logs a WARN naming who is missing and what this rank
 * sees, first after COLL_SETUP_WARN_MS, then at doubling intervals up to
 * COLL_SETUP_WARN_MAX_MS apart. */
#ifndef COLL_CORE_SETUP_WARN_H
#define COLL_CORE_SETUP_WARN_H

#include <stdatomic.h>
#include <stdint.h>

#define COLL_SETUP_WARN_MS 10000
#define COLL_SETUP_WARN_MAX_MS 60000

/* The first period in ms; tests set it shorter before any setup starts
 * (not exported from libcoll.so, so a program cannot change it). */
extern _Atomic int64_t coll__setup_warn_ms;

typedef struct coll_setup_warn {
  int64_t start_ms; /* when the setup began (coll__now_ms) */
  int64_t next_ms;  /* when the next warning is due */
  int64_t every_ms; /* the interval after it */
} coll_setup_warn_t;

/* A schedule for a setup that began at start_ms. Any thread. */
void coll__setup_warn_init(coll_setup_warn_t *w, int64_t start_ms);
/* Until when a wait may go on before the next warning: the sooner of
 * deadline_ms (absolute, < 0: none) and the warning. */
int64_t coll__setup_warn_until(const coll_setup_warn_t *w, int64_t deadline_ms);
/* 1 when a warning is due now (the schedule then moves on), else 0. */
int coll__setup_warn_due(coll_setup_warn_t *w);
/* How long the setup has waited, for the warning's text: "10 s", or
 * "0.3 s" under ten seconds. Returns buf (16 bytes). */
const char *coll__setup_warn_waited(const coll_setup_warn_t *w, char buf[16]);

#endif
