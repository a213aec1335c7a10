/* SPDX-License-Identifier: Apache-2.0 */
/* mailbox.h: a small transport for the algorithm tests, plugged in through
 * coll_transport_create: one lock for the whole world and a list of
 * unmatched messages per receiver. It shows the vtable is pluggable and
 * lets a test pick the send semantics an algorithm must survive. */
#ifndef COLL_TEST_MAILBOX_H
#define COLL_TEST_MAILBOX_H

#include <stddef.h>

#include "coll_transport.h"

typedef struct mbox_world mbox_world_t;

/* Creates `world` endpoints into out[0..world-1]. eager = 0: a send
 * completes only once its receive took the data (rendezvous, the strictest
 * case for deadlocks); eager = 1: a send completes at once and its data is
 * buffered until a receive matches it. *w stays valid until
 * mbox_world_release, also after the endpoints were destroyed. No barrier
 * slot: libcoll's dissemination barrier runs on top. Any thread. */
int mbox_create(int world, int eager, coll_transport_t **out, mbox_world_t **w);
/* Requests endpoint `rank` posted and has not waited for yet. */
size_t mbox_live(mbox_world_t *w, int rank);
/* Messages sent and received so far, over all endpoints. */
size_t mbox_messages(mbox_world_t *w);
/* The lengths of the messages endpoint src sent, in the order it sent
 * them, from the world's creation (its first MBOX_LOG sends in all): up to
 * max into lens. Returns how many src sent within the log. */
#define MBOX_LOG 256
size_t mbox_sent_lengths(mbox_world_t *w, int src, size_t *lens, size_t max);
void mbox_world_release(mbox_world_t *w);

#endif
