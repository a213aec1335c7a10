/* SPDX-License-Identifier: Apache-2.0 */
/* sock_transport.h: a third party's transport as the tests write it, from
 * coll_transport.h alone: ranks as threads of one process, a stream socketpair
 * between every two ranks for messages and another for shrink's links, a
 * receiving thread per endpoint. It fills every version 2 slot, so it
 * must get what libcoll's own transports get: failures named by their
 * origin, the desync report, shrink. */
#ifndef COLL_TESTS_SOCK_TRANSPORT_H
#define COLL_TESTS_SOCK_TRANSPORT_H

#include "coll_transport.h"

#define SOCK_MAX_WORLD 16

typedef struct sock_world sock_world_t;

/* Wires a world of n ranks (2..SOCK_MAX_WORLD): every pair's sockets, as a
 * launcher would before the ranks start. NULL on failure. */
sock_world_t *sock_world_new(int n);
/* Drops the caller's reference; the world goes with its last endpoint. */
void sock_world_release(sock_world_t *w);
/* Rank r's endpoint, made with coll_transport_create (version 2 table). */
coll_status_t sock_endpoint(sock_world_t *w, int rank, coll_transport_t **out);
/* What the kernel does when rank r's process dies: every socket of its
 * endpoint shut at once, with no goodbye. Its peers see it lost. */
void sock_crash(sock_world_t *w, int rank);
/* The link between ranks a and b breaks (both ends shut, no goodbye);
 * their other links stay up. */
void sock_crash_link(sock_world_t *w, int a, int b);

#endif
