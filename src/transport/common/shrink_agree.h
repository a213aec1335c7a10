/* SPDX-License-Identifier: Apache-2.0 */
/* shrink_agree.h: the survivors' agreement of coll_comm_shrink, written
 * against a small table of message links so that every transport that can
 * shrink runs the same protocol (shrink_agree.c has the argument for why
 * two survivors never disagree). */
#ifndef COLL_TRANSPORT_COMMON_SHRINK_AGREE_H
#define COLL_TRANSPORT_COMMON_SHRINK_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Longest address text a survivor hands the others (a TCP listener:
 * "[IPv6%scope]:port"; the in-process transport sends none). */
#define COLL_SHRINK_ADDR_MAX 128
/* Longest agreement message: a whole view of this many ranks. */
#define COLL_SHRINK_MSG_MAX(world) \
  (16 + (size_t)(world) * (6 + COLL_SHRINK_ADDR_MAX))

/* Reliable, ordered message links to every other rank of the old world.
 * recv returns COLL_ERR_PEER_LOST once the peer is gone (it closed its
 * end, or its process died: never for a peer that is only slow), and
 * COLL_ERR_TIMEOUT at the absolute deadline (coll__now_ms; < 0 none).
 * Any other status also counts the peer as gone. One thread. */
typedef struct coll_shrink_links {
  void *ctx;
  int rank, world;
  coll_status_t (*send)(void *ctx, int peer, const void *msg, size_t len,
                        int64_t deadline_ms);
  coll_status_t (*recv)(void *ctx, int peer, void *buf, size_t cap, size_t *len,
                        int64_t deadline_ms);
} coll_shrink_links_t;

/* Who the survivors are: member[r] for each old rank r, with the address
 * it listens on for the new comm. */
typedef struct coll_shrink_view {
  int world;
  uint8_t *member;
  char (*addr)[COLL_SHRINK_ADDR_MAX];
} coll_shrink_view_t;

coll_status_t coll__shrink_view_init(coll_shrink_view_t *v, int world);
void coll__shrink_view_free(coll_shrink_view_t *v);
/* The number of members, and r's rank among them (-1 if not one). */
int coll__shrink_view_count(const coll_shrink_view_t *v);
int coll__shrink_view_rank(const coll_shrink_view_t *v, int r);

/* Runs the agreement: this rank offers my_addr; on COLL_OK *out holds the
 * view every rank that returns COLL_OK from the same agreement holds.
 * hello_deadline_ms bounds the wait for the others to join (a rank that
 * joins later is left out); deadline_ms bounds the whole agreement
 * (COLL_ERR_TIMEOUT naming the rank waited for). One thread. */
coll_status_t coll__shrink_agree(const coll_shrink_links_t *l,
                                 const char *my_addr, int64_t hello_deadline_ms,
                                 int64_t deadline_ms, coll_shrink_view_t *out);

/* Tests only: called before this rank sends a message to everyone (peer
 * -1) and after each send to `peer` (step: the message's kind), so a test
 * can end the process between two sends. NULL in production. */
extern void (*coll__shrink_test_hook)(int rank, int step, int peer);

/* Message codec, shared with the fuzz target. A HELLO carries its sender's
 * rank and address; an EST (estimate) the sender's whole view. Both return
 * the bytes written (0: no room). */
enum { COLL_SHRINK_K_HELLO = 1, COLL_SHRINK_K_EST = 2 };
size_t coll__shrink_hello_encode(uint8_t *buf, size_t cap, int rank,
                                 const char *addr);
size_t coll__shrink_est_encode(uint8_t *buf, size_t cap, int rank,
                               const coll_shrink_view_t *v);
/* Parses one message from `from` (a rank below v->world): COLL_OK with
 * *kind set, and for a HELLO its address in v->addr[from] and
 * v->member[from] = 1, for an EST the whole view in *v; COLL_ERR_PROTOCOL
 * with a sentence for anything malformed, and v unchanged. Any thread. */
coll_status_t coll__shrink_msg_decode(const uint8_t *buf, size_t len, int from,
                                      int *kind, coll_shrink_view_t *v);

#endif
