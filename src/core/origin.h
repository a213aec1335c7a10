/* SPDX-License-Identifier: Apache-2.0 */
/* origin.h: where a comm's failure started (which rank, and why), the
 * status every rank reports for it and the sentence it reads as. A rank
 * that fails because of another's failure forwards the origin it saw first,
 * so every rank names the rank where the failure began, never a rank that
 * only passed it on. */
#ifndef COLL_CORE_ORIGIN_H
#define COLL_CORE_ORIGIN_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Why a failure started. The values travel on the TCP wire: never renumber,
 * only add. */
typedef enum coll_cause {
  COLL_CAUSE_NONE = 0,
  COLL_CAUSE_LOST = 1,         /* process gone: reset or EOF without goodbye;
                                  detail: the errno seen, 0 for a plain EOF */
  COLL_CAUSE_ABORTED = 2,      /* its owner called coll_abort */
  COLL_CAUSE_DESTROYED = 3,    /* its owner destroyed the comm */
  COLL_CAUSE_PROTOCOL = 4,     /* it sent bytes that break the wire protocol */
  COLL_CAUSE_TIMEOUT = 5,      /* its collective ran past the comm's timeout */
  COLL_CAUSE_FAILED = 6,       /* another local failure; detail: its status */
  COLL_CAUSE_UNRESPONSIVE = 7, /* silent past the heartbeat timeout while a
                                  call waited on it; detail: how long, ms */
} coll_cause_t;
#define COLL_CAUSE_MAX COLL_CAUSE_UNRESPONSIVE

typedef struct coll_origin {
  int rank;        /* where the failure started */
  int cause;       /* coll_cause_t */
  uint32_t detail; /* per cause, see above */
} coll_origin_t;

/* The origin of a failure that starts on `rank` with local status s (a
 * timeout, an abort, a length mismatch, ...). Any thread. */
coll_origin_t coll__origin_local(int rank, coll_status_t s);
/* The status every rank but the origin reports: PEER_LOST for a rank gone
 * or destroyed, ABORTED for an abort, TIMEOUT, PROTOCOL, or the status of
 * another failure. Any thread. */
coll_status_t coll__origin_status(const coll_origin_t *o);
/* The status a transport request ends with when a failure that started at
 * o ends it: coll__origin_status, except that a timeout ends it as
 * ABORTED. A wait that returns TIMEOUT leaves its request pending (coll.h),
 * so a request that is over must never say TIMEOUT: its owner would wait
 * for it again. Any thread. */
coll_status_t coll__origin_req_status(const coll_origin_t *o);
/* "rank 1 lost (connection reset), seen by rank 2" into buf (n bytes).
 * Any thread. */
void coll__origin_text(const coll_origin_t *o, int seen_by, char *buf,
                       size_t n);
/* 1 if o came off the wire sane: a rank below world, a known cause, and
 * for COLL_CAUSE_FAILED a status that is a failure. Any thread. */
int coll__origin_valid(const coll_origin_t *o, int world);

#endif
