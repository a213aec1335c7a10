/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy_store.h: a store wrapper that puts a tcp_proxy on one
 * connection of the TCP mesh: it passes every call to the rank's own store
 * but answers a get of "coll/addr/<peer>" with the proxy's address, after
 * pointing the proxy at the real one. Wrap the store of the higher rank of
 * the pair, with peer = the lower rank: the higher rank dials. */
#ifndef COLL_TEST_TCP_PROXY_STORE_H
#define COLL_TEST_TCP_PROXY_STORE_H

#include "coll.h"
#include "tcp_proxy.h"

typedef struct tcp_proxy_store {
  const coll_store_ops_t *inner; /* the rank's own store */
  int peer;                      /* whose address is rewritten */
  tcp_proxy_t *proxy;
  int rewrites; /* gets answered with the proxy's address */
} tcp_proxy_store_t;

/* Fills *ops (size, ctx = w, set, get) for w. */
void tcp_proxy_store_ops(tcp_proxy_store_t *w, coll_store_ops_t *ops);

#endif
