/* SPDX-License-Identifier: Apache-2.0 */
/* kv_tcp.h: the TCP transport bootstrapped through a caller's key/value
 * store (coll_comm_init_store): choose the local address, publish it under
 * "coll/addr/<rank>", connect the mesh. */
#ifndef COLL_BOOTSTRAP_KV_TCP_H
#define COLL_BOOTSTRAP_KV_TCP_H

#include <stdint.h>

#include "bootstrap/rendezvous/rendezvous.h"
#include "coll.h"

/* The address to listen on, from COLL_SOCKET_IFNAME and MASTER_ADDR
 * (coll__listen_addr_auto): asked before meeting the other ranks, so that
 * a wrong interface fails at once. Any thread. */
coll_status_t coll__kv_tcp_local(char out[COLL_ADDR_TEXT_MAX]);

/* Listens on local (from coll__kv_tcp_local), publishes it in
 * ops, looks up the lower ranks' addresses and connects the full mesh,
 * all by deadline_ms (absolute, < 0: none); timeout_ms is the whole
 * setup's, for messages. A lookup that times out names every rank whose
 * address is still missing from the store. *out is the
 * endpoint, NULL on failure (no socket or thread left). ops was checked
 * (coll__kv_check). One thread. */
coll_status_t coll__kv_tcp_create(const coll_store_ops_t *ops, int rank,
                                  int world, const char *local,
                                  int64_t deadline_ms, int64_t timeout_ms,
                                  coll_transport_t **out);

#endif
