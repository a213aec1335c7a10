/* SPDX-License-Identifier: Apache-2.0 */
/* tcp.h: the TCP transport's internal entry point. The bootstrap layer
 * (src/bootstrap) resolves addresses and provides the rendezvous; this
 * transport listens, publishes its address, connects the mesh and returns a
 * coll_transport_t. */
#ifndef COLL_TRANSPORT_TCP_TCP_H
#define COLL_TRANSPORT_TCP_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* How ranks find each other: provided by the caller (the rendezvous store in
 * production, anything in tests). Addresses are text: "1.2.3.4:5678" or
 * "[::1]:5678". */
typedef struct coll_tcp_rdv {
  void *ctx;
  /* Makes this rank's listen address visible to every rank. It may wait
   * for the others: the rendezvous's rank 0 gathers every rank's address
   * here into one table the others read (src/bootstrap/rendezvous/
   * rdv_addrs.c), so the listener must be open before it is called. */
  coll_status_t (*publish)(void *ctx, int rank, const char *addr);
  /* Waits (until the absolute coll__now_ms deadline) for `rank`'s address.
   * The mesh asks for every lower rank, in order. */
  coll_status_t (*lookup)(void *ctx, int rank, char *addr, size_t cap,
                          int64_t deadline_ms);
} coll_tcp_rdv_t;

typedef struct coll_tcp_opts {
  int rank;
  int world;
  const char *bind_ip; /* numeric IPv4/IPv6 address to listen on */
  const char *job_id;  /* checked in the handshake; non-NULL */
  const char *token;   /* shared secret, NULL or "" for none */
  int64_t timeout_ms;  /* connect + handshake bound for the whole mesh */
} coll_tcp_opts_t;

/* Listens on bind_ip (ephemeral port), publishes the address, connects the
 * full mesh in a deterministic order, and returns the endpoint. One thread. */
coll_status_t coll__tcp_transport_create(const coll_tcp_opts_t *o,
                                         const coll_tcp_rdv_t *rdv,
                                         coll_transport_t **out);

#endif
