/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_int.h: the rendezvous's state, shared by rendezvous.c (join, verdict,
 * finish), rdv_compat.c (the compatibility check) and rdv_outcome.c (the
 * all-or-nothing end of the setup), whose checks coll_comm_init_store
 * shares (setup_check.h). One thread per rendezvous. */
#ifndef COLL_BOOTSTRAP_RDV_INT_H
#define COLL_BOOTSTRAP_RDV_INT_H

#include "bootstrap/rendezvous/gpu_verdict.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "bootstrap/rendezvous/setup_check.h"
#include "core/setup_warn.h"

/* A rank that waits for another rank's word allows it this much longer
 * than its own timeout, so the rank whose deadline falls a little later
 * still gets to speak (rank 0 naming missing ranks, a rank reporting its
 * setup outcome). */
#define COLL_RDV_GRACE_MS 1500
/* No rank's setup outlasts its timeout by more than this, whatever the
 * network does: every call on the store gives up by then
 * (coll__store_set_end). The grace above and the last steps after it
 * (reading the verdict or the outcomes, saying so) fit in it, and what a
 * rank does after its last call on the store fits in the 2 s the
 * contract allows. */
#define COLL_RDV_END_MS 1800
#define COLL_RDV_KEY_MAX 32

struct coll_rdv {
  coll_store_server_t *server; /* rank 0 only */
  coll_store_t *store;
  int rank;
  int world;
  int64_t deadline_ms;
  int64_t timeout_ms; /* for messages */
  char where[COLL_ADDR_TEXT_MAX + 48];
  char at[COLL_ADDR_TEXT_MAX + 64]; /* "rendezvous at <where>" */
  coll_store_ops_t ops;             /* store, as setup_check.h wants it */
  int authed;                       /* the ranks share a token */
  coll_setup_warn_t warn;           /* when a wait says so next */
  int gpu_named;                    /* this rank named a GPU (cfg->gpu) */
  coll_gpus_t gpus;                 /* rank 0's verdict on the GPUs */
  /* The TCP addresses read from rank 0's table (rdv_addrs.c), and which
   * of its keys were read; NULL until the first lookup. */
  char (*addrs)[COLL_ADDR_TEXT_MAX];
  char *addrs_loaded;
};

/* Keys "<prefix>/0" .. "<prefix>/<world-1>" in one allocation (free() it);
 * NULL when out of memory. */
const char **coll__rdv_rank_keys(const char *prefix, int world);

/* The shared setup checks (setup_check.h) over this rendezvous's store:
 * keys without a prefix, the store's failures named as rank 0's. */
void coll__rdv_setup(coll_rdv_t *r, coll_setup_t *out);

/* rdv_wait.c: the waits, and what a rank says during them. */

/* Connects r->store to the store at cfg's address, retrying until the
 * deadline and logging a WARN at each warning time with the reason the
 * store cannot be reached. For ranks other than 0 a timeout says rank 0
 * is missing. */
coll_status_t coll__rdv_connect(coll_rdv_t *r, const coll_rdv_cfg_t *cfg);
/* The ranks whose "<prefix>/<r>" key is missing, asked without waiting:
 * missing[0..*n) (world entries), increasing. */
coll_status_t coll__rdv_missing(coll_rdv_t *r, const char *prefix, int *missing,
                                int *n);
/* "ranks 2, 3 (the store refused a client at A that said it was rank 3:
 * why)" into out: the missing ranks, and what the store noted of clients
 * that said they were one of them (COLL_STORE_REFUSED_KEY). Returns how
 * many have such a note. Keeps this thread's error text. */
int coll__rdv_describe(coll_rdv_t *r, const int *missing, int n, char *out,
                       size_t cap);
/* Rank 0: waits until every rank joined (COLL_OK), the deadline
 * (COLL_ERR_TIMEOUT), or a rank given another world size joined
 * (COLL_ERR_INVALID_ARG naming it); WARNs at each warning time. */
coll_status_t coll__rdv_wait_joined(coll_rdv_t *r);
/* Ranks other than 0: reads rank 0's verdict into v (at most cap bytes,
 * *len its length), waiting until the deadline and COLL_RDV_GRACE_MS;
 * WARNs at each warning time. */
coll_status_t coll__rdv_wait_verdict(coll_rdv_t *r, char *v, size_t cap,
                                     size_t *len);
/* rdv_survey.c: rank 0's one pass over every rank's "host/<r>" (all there
 * once every rank joined). Returns the number of hosts, and where r named
 * a GPU, judges the GPUs into r->gpus. Keeps this thread's error text. */
int coll__rdv_survey(coll_rdv_t *r);
/* Without a token, ranks on `hosts` > 1 hosts: WARNs what anyone who
 * reaches the store or a listener can do. */
void coll__rdv_warn_open(const coll_rdv_t *r, int hosts);

#endif
