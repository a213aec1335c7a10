/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_int.h: the rendezvous's state, shared by rendezvous.c (join, verdict,
 * finish), rdv_compat.c (the compatibility check) and rdv_outcome.c (the
 * all-or-nothing end of the setup), whose checks coll_comm_init_store
 * shares (setup_check.h). One thread per rendezvous. */
#ifndef COLL_BOOTSTRAP_RDV_INT_H
#define COLL_BOOTSTRAP_RDV_INT_H

#include "bootstrap/rendezvous/rendezvous.h"
#include "bootstrap/rendezvous/setup_check.h"

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
};

/* Keys "<prefix>/0" .. "<prefix>/<world-1>" in one allocation (free() it);
 * NULL when out of memory. */
const char **coll__rdv_rank_keys(const char *prefix, int world);

/* The shared setup checks (setup_check.h) over this rendezvous's store:
 * keys without a prefix, the store's failures named as rank 0's. */
void coll__rdv_setup(coll_rdv_t *r, coll_setup_t *out);

#endif
