/* SPDX-License-Identifier: Apache-2.0 */
/* origin.c: the status and the sentence of a failure's origin. */
#include "core/origin.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

coll_origin_t coll__origin_local(int rank, coll_status_t s) {
  coll_origin_t o = {rank, COLL_CAUSE_FAILED, (uint32_t)s};
  switch (s) {
    case COLL_ERR_ABORTED: o.cause = COLL_CAUSE_ABORTED; break;
    case COLL_ERR_TIMEOUT: o.cause = COLL_CAUSE_TIMEOUT; break;
    case COLL_ERR_PROTOCOL: o.cause = COLL_CAUSE_PROTOCOL; break;
    default: return o;
  }
  o.detail = 0;
  return o;
}

coll_status_t coll__origin_status(const coll_origin_t *o) {
  switch (o->cause) {
    case COLL_CAUSE_ABORTED: return COLL_ERR_ABORTED;
    case COLL_CAUSE_PROTOCOL: return COLL_ERR_PROTOCOL;
    case COLL_CAUSE_TIMEOUT: return COLL_ERR_TIMEOUT;
    case COLL_CAUSE_FAILED:
      if (o->detail > COLL_OK && o->detail <= COLL_ERR_INTERNAL)
        return (coll_status_t)o->detail;
      return COLL_ERR_INTERNAL;
    default: return COLL_ERR_PEER_LOST;
  }
}

coll_status_t coll__origin_req_status(const coll_origin_t *o) {
  coll_status_t s = coll__origin_status(o);
  return s == COLL_ERR_TIMEOUT ? COLL_ERR_ABORTED : s;
}

/* What LOST's errno reads as: the common ones in words of our own. */
static const char *lost_why(uint32_t err) {
  switch (err) {
    case 0: return "connection closed without goodbye";
    case ECONNRESET: return "connection reset";
    case EPIPE: return "broken pipe";
    case ETIMEDOUT: return "connection timed out";
    case EHOSTUNREACH: return "host unreachable";
    default: return strerror((int)err);
  }
}

void coll__origin_text(const coll_origin_t *o, int seen_by, char *buf,
                       size_t n) {
  char what[96];
  switch (o->cause) {
    case COLL_CAUSE_LOST:
      snprintf(what, sizeof what, "lost (%s)", lost_why(o->detail));
      break;
    case COLL_CAUSE_ABORTED: snprintf(what, sizeof what, "aborted"); break;
    case COLL_CAUSE_DESTROYED:
      snprintf(what, sizeof what, "left (its comm was destroyed)");
      break;
    case COLL_CAUSE_PROTOCOL:
      snprintf(what, sizeof what, "broke the wire protocol");
      break;
    case COLL_CAUSE_TIMEOUT:
      snprintf(what, sizeof what, "timed out in a collective");
      break;
    case COLL_CAUSE_FAILED:
      snprintf(what, sizeof what, "failed (%s)",
               coll_strerror(coll__origin_status(o)));
      break;
    case COLL_CAUSE_UNRESPONSIVE:
      snprintf(what, sizeof what, "unresponsive for %.1f s",
               o->detail / 1000.0);
      break;
    default: snprintf(what, sizeof what, "failed"); break;
  }
  snprintf(buf, n, "rank %d %s, seen by rank %d", o->rank, what, seen_by);
}

int coll__origin_valid(const coll_origin_t *o, int world) {
  if (o->rank < 0 || o->rank >= world) return 0;
  if (o->cause <= COLL_CAUSE_NONE || o->cause > COLL_CAUSE_MAX) return 0;
  if (o->cause == COLL_CAUSE_FAILED)
    return o->detail > COLL_OK && o->detail <= COLL_ERR_INTERNAL;
  return 1;
}
