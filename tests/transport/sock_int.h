/* SPDX-License-Identifier: Apache-2.0 */
/* sock_int.h: the test socket transport's endpoint, shared by its message
 * path (sock_transport.c) and its version 2 slots (sock_transport_v2.c).
 * Written against coll_transport.h alone. One mutex per endpoint guards
 * everything but the sockets, whose writes each peer's send lock orders. */
#ifndef COLL_TESTS_SOCK_INT_H
#define COLL_TESTS_SOCK_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_transport.h"
#include "sock_transport.h"

/* Frame kinds on a message socket: a 16-byte header (kind, tag, length;
 * little-endian on this one host) then the payload. */
enum {
  SK_MSG = 1,    /* a message on a tag */
  SK_ORIGIN = 2, /* where a failure started: rank, cause, detail */
  SK_ASK = 3,    /* "where are you?" */
  SK_WHERE = 4,  /* the answer: COLL_TRANSPORT_WHERE_BYTES */
  SK_REPORT = 5, /* the desync report of the rank that timed out */
  SK_BYE = 6,    /* the endpoint was destroyed */
};

typedef struct sock_req {
  struct sock_req *next;
  int peer;
  uint32_t tag;
  void *buf;
  size_t cap, len;
  int done;
  coll_status_t st;
  char why[192];
} sock_req_t;

typedef struct sock_msg {
  struct sock_msg *next;
  int peer;
  uint32_t tag;
  size_t len;
  unsigned char data[];
} sock_msg_t;

struct sock_world {
  pthread_mutex_t mu;
  int refs, n;
  int fd[SOCK_MAX_WORLD][SOCK_MAX_WORLD];  /* rank i's end of pair (i, j) */
  int lfd[SOCK_MAX_WORLD][SOCK_MAX_WORLD]; /* the same, shrink's links */
  struct sock_world *next;                 /* the survivors' world, once made */
};

typedef struct sock_ep {
  sock_world_t *w;
  int rank, world;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_mutex_t smu[SOCK_MAX_WORLD]; /* one writer per socket */
  sock_req_t *posted;                  /* receives, oldest first */
  sock_msg_t *unexp;                   /* messages nobody received yet */
  int gone[SOCK_MAX_WORLD];            /* the peer's socket ended */
  /* Ended: every request completes with closed_st and closed_why. */
  int closed;
  coll_status_t closed_st;
  char closed_why[192];
  int have_own, have_heard, told;
  coll_fail_origin_t own, heard;
  int have_report;
  char report[384];
  /* While ask runs: where the answers go. */
  unsigned char (*ans)[COLL_TRANSPORT_WHERE_BYTES];
  unsigned char *answered;
  _Atomic(coll_transport_t *) bound;
  int wake[2]; /* a pipe that ends the receiving thread */
  pthread_t rx;
} sock_ep_t;

/* Writes a whole frame to peer (its send lock held inside); 0 or -1. */
int sock_send_frame(sock_ep_t *e, int peer, uint32_t kind, uint32_t tag,
                    const void *buf, size_t len);
/* Ends every pending and later request with s and why. e->mu held. */
void sock_close_locked(sock_ep_t *e, coll_status_t s, const char *why);
/* The status a request ends with for a failure that started at o, and its
 * sentence. */
coll_status_t sock_origin_status(const coll_fail_origin_t *o);
void sock_origin_why(const coll_fail_origin_t *o, char *buf, size_t n);
/* A frame of the version 2 kinds (ORIGIN, ASK, WHERE, REPORT) that the
 * receiving thread read from peer. */
void sock_v2_frame(sock_ep_t *e, int peer, uint32_t kind, const void *p,
                   size_t len);
/* A peer's socket ended: with a goodbye (bye) or without. */
void sock_peer_gone(sock_ep_t *e, int peer, int bye, int err);

/* The endpoint state of rank r of w (a receiving thread started); NULL on
 * failure. And its end. */
sock_ep_t *sock_ep_new(sock_world_t *w, int rank);
void sock_ep_free(sock_ep_t *e);

/* The version 2 slots (sock_transport_v2.c). */
void sock_fail(void *ctx, const coll_fail_origin_t *o);
int sock_origin(void *ctx, coll_fail_origin_t *o);
void sock_bind(void *ctx, coll_transport_t *t);
void sock_ask(void *ctx, int64_t budget_ms,
              unsigned char (*where)[COLL_TRANSPORT_WHERE_BYTES],
              unsigned char *answered);
void sock_tell(void *ctx, const char *report);
int sock_heard(void *ctx, char *buf, size_t n);
coll_status_t sock_link_send(void *ctx, int peer, const void *msg, size_t len,
                             int64_t timeout_ms);
coll_status_t sock_link_recv(void *ctx, int peer, void *buf, size_t cap,
                             size_t *len, int64_t timeout_ms);
coll_status_t sock_shrink(void *ctx, const int *members, int n, int new_rank,
                          int64_t timeout_ms, void **new_ctx);
void sock_leave(void *ctx);

/* World references (sock_transport.c). */
void sock_world_ref(sock_world_t *w);

#endif
