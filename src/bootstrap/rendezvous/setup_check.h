/* SPDX-License-Identifier: Apache-2.0 */
/* setup_check.h: the two guarantees of a setup whose ranks meet through a
 * store, written once against a coll_store_ops_t so that libcoll's own
 * store (wrapped by coll__store_client_ops) and a caller's store run the
 * same code: the compatibility check (rdv_compat.c) and the all-or-nothing
 * end (rdv_outcome.c). Keys, each under `prefix`:
 *   compat/<r>   rank r's versions and wire options
 *   gpus/<r>     rank r's host and GPU, under COLL_BACKEND=auto
 *   outcome/<r>  rank r's setup outcome: "ok", or "<status> <text>"
 *   outcome/all  with `gather`, rank 0's verdict on every outcome: "ok",
 *                "<status> <text>" (the text every rank returns), or
 *                "each" (rank 0 did not hear the others: read them all)
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
  /* 1: rank 0 hears every outcome and publishes one verdict that the
   * others read (about 3n requests in all, where every rank hearing every
   * rank costs n squared); 0: every rank hears every rank. */
  int gather;
} coll_setup_t;

/* This rank's compatibility text: "libcoll 0.1.0 wire 1 (<options that
 * change the wire>)". */
void coll__rdv_compat_text(int rank, char *out, size_t cap);

/* Sets "compat/<rank>" to this rank's text. */
coll_status_t coll__setup_compat_publish(const coll_setup_t *su);

/* Reads the records of ranks[0..n) without waiting (a missing one is not
 * judged): COLL_ERR_INVALID_ARG naming those given another world size than
 * this rank, else COLL_OK. The rendezvous asks while it waits for the
 * others, so a rank started with another WORLD_SIZE ends the setup at
 * once instead of at the timeout. */
coll_status_t coll__setup_worlds_check(const coll_setup_t *su, const int *ranks,
                                       int n);
/* The world size in rank q's record, asked without waiting; -1 when the
 * record is not there (or from a build without it). Keeps this thread's
 * error text. */
int coll__setup_world_of(const coll_setup_t *su, int q);

/* Reads every rank's "compat/<r>" and compares them: COLL_OK when all are
 * the same, COLL_ERR_INVALID_ARG naming the ranks whose world size differs,
 * else COLL_ERR_PROTOCOL naming the ranks and what each runs.
 * wait 0: every record must be there already (a missing one reads as a
 * build without it); wait 1: waits for each until the deadline, and at the
 * deadline fails with COLL_ERR_TIMEOUT naming the ranks whose record is
 * still missing (they never arrived). Every rank that reads the same
 * records reaches the same verdict. */
coll_status_t coll__setup_compat_check(const coll_setup_t *su, int wait);

/* setup_gpus.c: under COLL_BACKEND=auto, whether every rank has a GPU of
 * its own. Publish sets "gpus/<rank>" to this rank's host and `gpu` (its
 * PCI bus id); call it before coll__setup_compat_publish. Judge, after
 * coll__setup_compat_check has seen every rank, reads every rank's record
 * without waiting (a rank without one named no GPU) and judges them
 * (gpu_verdict.h); every rank reaches the same verdict. Judge costs a get
 * per rank, as the compatibility check does. */
struct coll_gpus;
coll_status_t coll__setup_gpus_publish(const coll_setup_t *su, const char *gpu);
coll_status_t coll__setup_gpus_judge(const coll_setup_t *su,
                                     struct coll_gpus *out);

/* Ends the setup all or nothing: sets "outcome/<rank>" from `mine`
 * (COLL_OK, or a failure whose text is in coll_last_error), waits for
 * every rank's until the deadline and COLL_RDV_GRACE_MS more (with
 * `gather`, only rank 0 does, and the others read its verdict, each
 * hearing every rank itself only where that verdict does not come), and returns
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
