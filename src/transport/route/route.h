/* SPDX-License-Identifier: Apache-2.0 */
/* route.h: the per-host composite: a comm's endpoint that knows which host
 * each rank is on and, where the ranks of this host share memory, sends to
 * them through that host endpoint and to every other rank through the
 * comm's own. It is a provider over two endpoints (route.c); a failure of
 * either is the other's, so the comm fails as one. */
#ifndef COLL_TRANSPORT_ROUTE_ROUTE_H
#define COLL_TRANSPORT_ROUTE_ROUTE_H

#include "coll.h"

/* Makes *t (every rank of the comm) know which host each rank is on
 * (host_of, world entries, copied: hosts numbered by their lowest rank)
 * and, with `host` (this host's ranks, speaking comm ranks; NULL: none),
 * replaces *t with the route endpoint over both, which owns them from
 * here. On a failure (NO_MEMORY) *t is unchanged and still the caller's,
 * and `host` is destroyed. One thread, before the endpoint is used. */
coll_status_t coll__route_create(coll_transport_t **t, coll_transport_t *host,
                                 const int *host_of);

/* The host endpoint of a route endpoint, or NULL (any other endpoint).
 * Any thread. */
coll_transport_t *coll__route_host(const coll_transport_t *t);
/* The requests a route endpoint routed to its host endpoint and that were
 * not yet reaped (0 for any other endpoint). Any thread. */
int coll__route_pending(const coll_transport_t *t);

#endif
