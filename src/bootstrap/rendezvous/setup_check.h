/* SPDX-License-Identifier: Apache-2.0 */
/* setup_check.h: the two guarantees of a setup whose ranks meet through a
 * store, written once against a coll_store_ops_t so that libcoll's own
 * store (wrapped by coll__store_client_ops) and a caller's store run the
 * same code: the compatibility check (rdv_compat.c) and the all-or-nothing
 * end (rdv_outcome.c). Keys, each under `prefix`:
 *   compat/<r>   rank r's versions and wire options
 *   outcome/<r>  rank r's setup outcome: "ok", or "<status> <text>"
 * The store needs only set and get (a get may wait, or ask without
 * waiting); nothing is deleted. One thread per rank. */
#ifndef COLL_BOOTSTRAP_SETUP_CHECK_H
#define COLL_BOOTSTRAP_SETUP_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef struct coll_setup {
  const coll_store_ops_t *ops; /* checked (coll__kv_check) */
  const char *prefix;          /* before every key: "" or "coll/" */
  int rank;
  int world;
  int64_t deadline_ms; /* absolute (coll__now_ms), < 0: none */
  int64_t timeout_ms;  /* the whole setup's, for messages */
  const char *where;   /* opens a mismatch's text: "rendezvous at h:p" */
  const char *lost;    /* prefixed to a store failure while agreeing */
} coll_setup_t;

/* This rank's compatibility text: "libcoll 0.1.0 wire 1 (<options that
 * change the wire>)". */
void coll__rdv_compat_text(int rank, char *out, size_t cap);

/* Sets "compat/<rank>" to this rank's text. */
coll_status_t coll__setup_compat_publish(const coll_setup_t *su);

/* Reads every rank's "compat/<r>" and compares them: COLL_OK when all are
 * the same, else COLL_ERR_PROTOCOL naming the ranks and what each runs.
 * wait 0: every record must be there already (a missing one reads as a
 * build without it); wait 1: waits for each until the deadline, and at the
 * deadline fails with COLL_ERR_TIMEOUT naming the ranks whose record is
 * still missing (they never arrived). Every rank that reads the same
 * records reaches the same verdict. */
coll_status_t coll__setup_compat_check(const coll_setup_t *su, int wait);

/* Ends the setup all or nothing: sets "outcome/<rank>" from `mine`
 * (COLL_OK, or a failure whose text is in coll_last_error), waits for
 * every rank's until the deadline and COLL_RDV_GRACE_MS more, and returns
 * COLL_OK only when every rank reported "ok"; otherwise the status of the
 * lowest failing rank and one text naming every failing or silent rank
 * and why, the same on every rank that heard everyone. A store failure on
 * the way is returned with `lost` before its text. A rank whose `mine` is
 * COLL_ERR_ABORTED (its caller aborted the setup) sets its outcome and
 * returns that at once, with its own text. *agreed (may be NULL)
 * is 1 when the ranks' outcomes were heard (the store worked), else 0. */
coll_status_t coll__setup_outcome(const coll_setup_t *su, coll_status_t mine,
                                  int *agreed);

#endif
