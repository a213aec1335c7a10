/* SPDX-License-Identifier: Apache-2.0 */
/* refusal_log.h: WARN lines about refused connections at a rate no client
 * controls. The first refusal from each source address is logged at once;
 * later ones from the same source are counted and summed up in one line
 * per source at most every COLL_REFUSAL_FLUSH_MS (and at the final flush).
 * Sources beyond the table share one "other sources" count, so a flood from
 * many addresses costs at most COLL_REFUSAL_SOURCES + 1 lines per period.
 * Not locked: one thread per log (the listener's). */
#ifndef COLL_CORE_REFUSAL_LOG_H
#define COLL_CORE_REFUSAL_LOG_H

#include <stdint.h>

#include "core/log.h"

#define COLL_REFUSAL_SOURCES 16
#define COLL_REFUSAL_FLUSH_MS 5000

typedef struct coll_refusal_src {
  char addr[64];    /* the source's address, without its port */
  uint64_t pending; /* refusals not yet reported */
  char last[112];   /* the latest reason */
} coll_refusal_src_t;

typedef struct coll_refusal_log {
  coll_log_sub_t sub;
  char what[80]; /* the listener, as the lines name it */
  int n;
  coll_refusal_src_t src[COLL_REFUSAL_SOURCES];
  uint64_t others; /* refusals from sources the table had no room for */
  uint64_t total;
  int64_t next_flush;
} coll_refusal_log_t;

/* what: the listener, e.g. "tcp: rank 2" or "store 10.0.0.1:29500". */
void coll__refusal_log_init(coll_refusal_log_t *l, coll_log_sub_t sub,
                            const char *what);
/* One refused connection from `source` ("1.2.3.4:5678" or "[::1]:5678";
 * the port is dropped) for reason `why`. */
void coll__refusal_note(coll_refusal_log_t *l, const char *source,
                        const char *why);
/* Logs the counts not reported yet. */
void coll__refusal_flush(coll_refusal_log_t *l);

#endif
