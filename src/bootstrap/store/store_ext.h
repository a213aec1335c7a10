/* SPDX-License-Identifier: Apache-2.0 */
/* store_ext.h: store calls beyond the contract in store.h, for the
 * rendezvous (which keys are missing) and for tests (server statistics). */
#ifndef COLL_BOOTSTRAP_STORE_EXT_H
#define COLL_BOOTSTRAP_STORE_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store/store.h"

/* Without a HELLO within this long, the server drops a connection. A rank
 * sends it one round trip after connecting; the bound only limits how long
 * a silent client holds its descriptor (eviction keeps ranks from waiting
 * on them). */
#define COLL_STORE_HANDSHAKE_MS_DEFAULT 5000

/* The server's own record of the last HELLO it refused from a client that
 * said it was rank r of the job: "store/refused/<r>" holds "<client
 * address>: <why>" (the claim is not verified, so the text says what the
 * store saw, no more). Clients read it like any key. */
#define COLL_STORE_REFUSED_KEY "store/refused/"

/* A connection to the store, as coll__store_dial makes it. */
typedef struct coll_store_dial {
  const char *host;   /* a name or a numeric address */
  int port;           /* 1..65535 */
  const char *token;  /* NULL/"": none */
  int rank;           /* told to the server, for its messages; -1: none */
  int64_t timeout_ms; /* keep trying this long (< 0: no bound) */
  char why[256];      /* out: why the last try failed ("" if none did) */
} coll_store_dial_t;

/* coll__store_connect with a claimed rank, and the reason the last try
 * failed kept in d->why, so a caller that connects in slices can say what
 * it sees meanwhile. Any thread. */
coll_status_t coll__store_dial(coll_store_dial_t *d, coll_store_t **out);

typedef struct coll_store_stats {
  uint64_t accepted; /* connections accepted */
  uint64_t refused;  /* connections closed for a bad request or token */
  uint64_t requests; /* requests served after the handshake */
  uint64_t full;     /* of the refused, those past a cap (store.h) */
  size_t max_body;   /* largest request body the server allocated */
} coll_store_stats_t;

/* A snapshot of the server's counters. Any thread. */
void coll__store_server_stats(const coll_store_server_t *s,
                              coll_store_stats_t *out);
/* Changes the HELLO bound for connections accepted from now on (tests).
 * Call before clients connect. One thread. */
void coll__store_server_set_handshake_ms(coll_store_server_t *s, int64_t ms);

/* Asks, without waiting, which of keys[0..nkeys) do not exist yet: their
 * indices go to missing[0..*nmissing) in increasing order (missing holds
 * nkeys entries). One thread per client. */
coll_status_t coll__store_missing(coll_store_t *st, const char *const *keys,
                                  int nkeys, int *missing, int *nmissing);

/* From now on no call of this client waits past end_ms (absolute, on
 * coll__now_ms; < 0: none), whatever it asked for: a reply not in by then
 * fails the call with COLL_ERR_TIMEOUT (and the client, as after any
 * failed exchange), and a GET or WAIT asks the server to give up a little
 * earlier, so that its answer still arrives. The rendezvous sets the end
 * of the setup here, so that a store cut off mid-setup costs no rank more
 * than that. Any thread (takes the client's lock). */
void coll__store_set_end(coll_store_t *st, int64_t end_ms);

/* 1 while the client can still talk to the store: no exchange failed
 * halfway (a reply that did not come, a connection lost). Any thread. */
int coll__store_usable(coll_store_t *st);

/* "host:port" of the store this client talks to, for messages. */
const char *coll__store_peer(const coll_store_t *st);

#endif
