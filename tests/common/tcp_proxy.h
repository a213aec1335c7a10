/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy.h: a fault-injecting TCP proxy for tests, on its own thread,
 * that sits on the connection between two ranks of the TCP transport and,
 * per direction and on command at any moment, passes bytes through, delays
 * them, stalls, resets the connection, corrupts bytes or holds half of the
 * next frame header. It follows the frames of src/transport/tcp/wire.h.
 *
 * The mesh dials from the higher rank to the lower one, so the proxy is put
 * on the pair (lo, hi) by rewriting the address rank hi reads for rank lo
 * (see tcp_proxy_store.h). The connector side is rank hi, the acceptor side
 * rank lo. Every function may be called from any thread; commands run on
 * the proxy's thread and return once they took effect (bounded). */
#ifndef COLL_TEST_TCP_PROXY_H
#define COLL_TEST_TCP_PROXY_H

#include <stddef.h>
#include <stdint.h>

typedef struct tcp_proxy tcp_proxy_t;

/* A direction of the proxied connection. */
typedef enum tcp_proxy_dir {
  TCP_PROXY_UP = 0,   /* connector (higher rank) -> acceptor (lower rank) */
  TCP_PROXY_DOWN = 1, /* acceptor (lower rank) -> connector (higher rank) */
} tcp_proxy_dir_t;

/* Where a corruption starts (see tcp_proxy_corrupt). */
typedef enum tcp_proxy_at {
  TCP_PROXY_AT_BYTES,   /* the next byte not yet forwarded, + offset */
  TCP_PROXY_AT_HEADER,  /* the next frame header that starts, + offset */
  TCP_PROXY_AT_PAYLOAD, /* the next frame payload longer than offset */
} tcp_proxy_at_t;

typedef struct tcp_proxy_stats {
  int links;          /* connections accepted so far */
  int open;           /* of those, still open */
  uint64_t fwd[2];    /* bytes forwarded, per direction */
  uint64_t queued[2]; /* bytes read and not yet forwarded */
  uint64_t frames[2]; /* frame headers forwarded whole */
  uint64_t flipped[2];
  int held[2]; /* 1: forwarding stopped in the middle of a frame header */
} tcp_proxy_stats_t;

/* Listens on 127.0.0.1 (an ephemeral port) and starts the thread. 0, or -1
 * with a message on stderr. */
int tcp_proxy_start(tcp_proxy_t **out);
/* Stops the thread, closes every socket and frees p. NULL is a no-op. */
void tcp_proxy_stop(tcp_proxy_t *p);
/* The address to give the connector ("127.0.0.1:<port>"); stays valid until
 * tcp_proxy_stop. */
const char *tcp_proxy_addr(const tcp_proxy_t *p);
/* Where accepted connections are forwarded to, in the transport's address
 * form ("1.2.3.4:5678", "[::1]:5678"). 0, or -1 when malformed. */
int tcp_proxy_set_target(tcp_proxy_t *p, const char *addr);

/* Commands on direction d of every open connection (and of later ones
 * where said). Each returns 0 once it took effect, -1 if the proxy thread
 * did not answer within a few seconds. */

/* Forwards everything as it comes: ends a stall, a hold, a delay and a
 * corruption not yet applied (for later connections too). */
int tcp_proxy_pass(tcp_proxy_t *p, tcp_proxy_dir_t d);
/* Holds every byte ms milliseconds after it was read (later connections
 * too); 0: no delay. */
int tcp_proxy_delay(tcp_proxy_t *p, tcp_proxy_dir_t d, int64_t ms);
/* Stops forwarding, keeping the connection open; bytes pile up in the
 * proxy, then in the kernel, and a close is held back too, as on a cut
 * network (later connections too). */
int tcp_proxy_stall(tcp_proxy_t *p, tcp_proxy_dir_t d);
/* Closes the socket toward d's receiver with an RST (SO_LINGER 0); what
 * was not forwarded is lost. The other socket stays open and silent. */
int tcp_proxy_reset(tcp_proxy_t *p, tcp_proxy_dir_t d);
/* Flips (xor 0xff) n bytes starting at `at` + offset, once. */
int tcp_proxy_corrupt(tcp_proxy_t *p, tcp_proxy_dir_t d, tcp_proxy_at_t at,
                      size_t offset, size_t n);
/* Forwards up to the middle of the next frame header that starts (half of
 * its COLL_TCP_FRAME_BYTES), then stalls until tcp_proxy_pass. */
int tcp_proxy_hold_half_header(tcp_proxy_t *p, tcp_proxy_dir_t d);

/* A snapshot of the counters. */
int tcp_proxy_stats(tcp_proxy_t *p, tcp_proxy_stats_t *st);
/* Waits (at most timeout_ms) until at least `bytes` bytes of direction d
 * are queued in the proxy: a peer is blocked on it. 0, or -1 on timeout. */
int tcp_proxy_wait_queued(tcp_proxy_t *p, tcp_proxy_dir_t d, uint64_t bytes,
                          int64_t timeout_ms);

#endif
