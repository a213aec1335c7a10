/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_mesh.h: the state of the mesh being built, shared by tcp_mesh.c
 * (dialling, the handshake steps, the poll loop) and tcp_accept.c (incoming
 * connections: accepting, evicting, deadlines). Everything here belongs to
 * the one thread that builds the mesh. */
#ifndef COLL_TRANSPORT_TCP_MESH_H
#define COLL_TRANSPORT_TCP_MESH_H

#include <stdint.h>
#include <sys/socket.h>

#include "core/refusal_log.h"
#include "transport/tcp/tcp_hs.h"
#include "transport/tcp/tcp_int.h"
#include "transport/tcp/tcp_sock.h"

/* An incoming client must send the first byte of its HELLO this soon after
 * it was accepted (a rank does so within a round trip); the whole
 * handshake keeps the longer hs_timeout_ms. A rank dropped by a too-short
 * bound only dials again. */
#define COLL_TCP_FIRST_BYTE_MS 2000
/* Handshakes in progress on one listener: at most this many, and at most
 * an eighth of the fd limit. Past it the oldest unauthenticated one is
 * closed for the newcomer, so idle clients never lock a rank out. */
#define COLL_TCP_IN_CAP_MAX 1024
#define COLL_TCP_IN_CAP_MIN 16
/* The listen backlog: large, so a flood does not make the kernel drop a
 * rank's SYN (which would cost it a one-second retransmit). */
#define COLL_TCP_BACKLOG 4096
/* Connections one poll round accepts at most. */
#define COLL_TCP_ACCEPTS_PER_ROUND 256
/* After EMFILE/ENFILE with nothing to evict, the listener rests this long
 * instead of spinning on a connection it cannot take. */
#define COLL_TCP_ACCEPT_PAUSE_MS 50

/* Handshake steps, in order; outgoing: connect, read CHALLENGE, write HELLO,
 * read WELCOME; incoming: write CHALLENGE, read HELLO, write WELCOME. */
enum { TCP_HS_IDLE = 0, TCP_HS_CONNECT, TCP_HS_IO };

typedef struct tcp_hs {
  int fd;
  int out;  /* 1: we dialled `peer` */
  int peer; /* incoming: -1 until its hello checks out */
  int state;
  int kind; /* wire kind of the message being moved */
  int writing;
  int refused; /* incoming: the welcome we are writing is a refusal */
  uint8_t buf[COLL_TCP_HELLO_BYTES];
  size_t need, done;
  uint8_t nonce_s[COLL_TCP_NONCE_BYTES], nonce_c[COLL_TCP_NONCE_BYTES];
  int64_t accepted_at; /* incoming */
  int64_t deadline;    /* incoming: first byte, then the whole handshake */
  int64_t retry_at;    /* outgoing: when to dial again */
  int attempts;
  char where[COLL_TCP_ADDR_MAX];
} tcp_hs_t;

typedef struct tcp_mesh {
  const coll_tcp_opts_t *o;
  const coll_tcp_xopts_t *x;
  coll_tcp_hs_ctx_t ctx;
  int *fds;
  int lfd;
  int missing;      /* connections not established yet */
  int in_missing;   /* of those, incoming */
  int64_t deadline; /* the whole mesh; -1: none */
  int64_t hs_ms;    /* per incoming handshake */
  int64_t accept_pause_until;
  tcp_hs_t *outs; /* one per lower rank, indexed by rank */
  struct sockaddr_storage *addrs;
  socklen_t *alens;
  tcp_hs_t *ins; /* incoming handshakes in progress, oldest first */
  int nin, in_cap;
  /* Per rank: why its connection is not there yet (the last dial failure,
   * or the last refusal of a client claiming that rank), for timeouts. */
  char (*why)[TCP_WHY_MAX];
  coll_refusal_log_t refusals;
} tcp_mesh_t;

/* tcp_mesh.c */
void coll__tcp_hs_close(tcp_hs_t *h);
void coll__tcp_hs_io(tcp_hs_t *h, int kind, int writing, size_t need);
/* Moves bytes of h's current message until done or the socket would block. */
coll_status_t coll__tcp_hs_pump(tcp_mesh_t *m, tcp_hs_t *h);

/* tcp_accept.c */
/* How many incoming handshakes a listener holds at once (from the fd
 * limit). Any thread. */
int coll__tcp_in_cap(void);
/* Accepts everything waiting; each newcomer gets a challenge. */
coll_status_t coll__tcp_accept_some(tcp_mesh_t *m);
/* Closes slots past their deadline and drops closed ones. */
void coll__tcp_reap_incoming(tcp_mesh_t *m, int64_t now);
/* Closes an incoming connection we refuse, logging why (rate-limited). */
void coll__tcp_in_drop(tcp_mesh_t *m, tcp_hs_t *h, const char *why);

#endif
