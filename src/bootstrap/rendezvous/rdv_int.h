/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_int.h: the rendezvous's state, shared by rendezvous.c (join, verdict,
 * finish), rdv_compat.c (the compatibility check) and rdv_outcome.c (the
 * all-or-nothing end of the setup). One thread per rendezvous. */
#ifndef COLL_BOOTSTRAP_RDV_INT_H
#define COLL_BOOTSTRAP_RDV_INT_H

#include "bootstrap/rendezvous/rendezvous.h"

/* A rank that waits for another rank's word allows it this much longer
 * than its own timeout, so the rank whose deadline falls a little later
 * still gets to speak (rank 0 naming missing ranks, a rank reporting its
 * setup outcome). */
#define COLL_RDV_GRACE_MS 2000
#define COLL_RDV_KEY_MAX 32

struct coll_rdv {
  coll_store_server_t *server; /* rank 0 only */
  coll_store_t *store;
  int rank;
  int world;
  int64_t deadline_ms;
  int64_t timeout_ms; /* for messages */
  char where[COLL_ADDR_TEXT_MAX + 48];
};

/* Keys "<prefix>/0" .. "<prefix>/<world-1>" in one allocation (free() it);
 * NULL when out of memory. */
const char **coll__rdv_rank_keys(const char *prefix, int world);

/* rdv_compat.c: rank 0, once every rank joined: COLL_OK when every rank
 * published the same compatibility text as rank 0, else COLL_ERR_PROTOCOL
 * naming the ranks and what each runs. */
coll_status_t coll__rdv_compat_check(coll_rdv_t *r);
/* This rank's text, published as "compat/<rank>" before it joins. */
void coll__rdv_compat_text(int rank, char *out, size_t cap);

#endif
