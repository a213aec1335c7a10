/* SPDX-License-Identifier: Apache-2.0 */
/* store_srv.h: the store server's internals, shared by store_server.c (the
 * listener, the loop thread, start and stop) and store_conn.c (one client
 * connection: parsing, requests, waiters, replies). Everything here is
 * touched by the loop thread only, except the atomic statistics. */
#ifndef COLL_BOOTSTRAP_STORE_SRV_H
#define COLL_BOOTSTRAP_STORE_SRV_H

#include <stdatomic.h>
#include <uv.h>

#include "bootstrap/store/store_ext.h"
#include "bootstrap/store/store_map.h"
#include "bootstrap/store/store_parse.h"
#include "bootstrap/store/store_proto.h"
#include "core/refusal_log.h"

/* Clients that have not finished their HELLO: at most this many (and an
 * eighth of the fd limit); a newcomer past it evicts the oldest, so idle
 * connections never lock a rank out of the store. */
#define COLL_STORE_UNAUTH_MAX 1024
#define COLL_STORE_UNAUTH_MIN 16

struct coll_store_server {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  uv_thread_t thread;
  int port;
  char addr[64];                    /* numeric bind address, for messages */
  char *token;                      /* NULL: no token */
  atomic_int_fast64_t handshake_ms; /* HELLO must arrive within this */
  coll_smap_t map;
  coll_store_caps_t caps;
  int world;               /* the caps were computed for this many ranks */
  int judge_clients;       /* world is a job's: a client that claims no rank
                              of it, or one too many, is logged */
  int n_authed;            /* connections past their HELLO */
  coll_smap_link_t conns;  /* every open connection */
  coll_smap_link_t unauth; /* those before their HELLO, oldest first */
  int n_unauth;
  int unauth_cap;
  int64_t accept_warned_at;    /* last WARN about a failed accept */
  coll_refusal_log_t refusals; /* rate-limited WARN lines */
  /* Statistics for tests; any thread reads them. */
  atomic_uint_fast64_t n_accepted;
  atomic_uint_fast64_t n_refused; /* closed for a bad request or token */
  atomic_uint_fast64_t n_full;    /* refused for a cap (a subset) */
  atomic_uint_fast64_t n_requests;
  atomic_size_t max_body; /* largest body buffer allocated */
};

/* Where a connection is in its life. While READING, hdr_got < the header
 * size means the header is being read, else the body. */
typedef enum store_conn_state {
  STORE_CONN_READING, /* reading HELLO (until authed) or a request */
  STORE_CONN_WAITING, /* a GET/WAIT waits for a key; reading paused */
  STORE_CONN_DRAINING /* a final error reply is being written */
} store_conn_state_t;

typedef struct store_conn {
  uv_tcp_t tcp;
  uv_timer_t timer; /* handshake, wait timeout or drain bound */
  coll_store_server_t *srv;
  coll_smap_link_t link;  /* in srv->conns */
  coll_smap_link_t ulink; /* in srv->unauth until authed */
  int in_unauth;
  char where[64];   /* the client's address, for messages */
  int open_handles; /* tcp + timer until both close callbacks ran */
  int closing;
  int reading;
  int authed; /* the HELLO exchange succeeded */
  int claim;  /* the rank the client says it is (HELLO), -1: none */
  store_conn_state_t state;
  uint8_t hdr_buf[COLL_STORE_HDR_BYTES];
  size_t hdr_got;
  coll_store_hdr_t hdr;
  uint8_t *body; /* hdr.body_len bytes, allocated after checks */
  size_t body_got;
  uint8_t snonce[COLL_STORE_NONCE_BYTES];
  /* The pending GET/WAIT (state WAITING). */
  store_key_t *keys;
  uint16_t nkeys;
  uint16_t widx;             /* keys before widx exist */
  coll_smap_entry_t *wentry; /* the entry whose waiter list holds wlink */
  coll_smap_link_t wlink;
  size_t wq_bytes; /* reply bytes queued and not yet written */
} store_conn_t;

/* store_conn.c: connection I/O. */

/* Takes over an accepted connection: sends the server HELLO and starts
 * reading. Loop thread. */
void coll__store_conn_start(coll_store_server_t *srv, store_conn_t *c);
/* Closes the oldest unauthenticated connection (logged as a refusal);
 * 0 when there is none. Loop thread. */
int coll__store_evict_oldest(coll_store_server_t *srv, const char *why);
/* Closes a connection (idempotent); freed after its handles closed. */
void coll__store_conn_close(store_conn_t *c);
/* Queues a reply (header + a + b); 0, or -1 when out of memory (the
 * connection is then closed). */
int coll__store_reply(store_conn_t *c, uint8_t code, int64_t arg, const void *a,
                      size_t na, const void *b, size_t nb);
/* Replies `code` with a text, then closes once it is written. */
void coll__store_conn_fail(store_conn_t *c, uint8_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Refuses the request for a cap (`what`: "4096 keys are held"), naming
 * the cap and the job size, then closes like coll__store_conn_fail. */
void coll__store_refuse_full(store_conn_t *c, const char *what);
/* Parks the current GET/WAIT: reading pauses until it is answered, and the
 * timer fires after timeout_ms (< 0: never). */
void coll__store_conn_wait(store_conn_t *c, int64_t timeout_ms);
/* The request is answered: frees it and reads the next header. */
void coll__store_request_done(store_conn_t *c);

/* store_ops.c: what requests do. */

/* Sets key (NUL-terminated) to val as a SET would, within the caps, and
 * wakes its waiters: the server's own records. 0, or -1 when it does not
 * fit or memory ran out (nothing changed). */
int coll__store_put(coll_store_server_t *srv, const char *key, const void *val,
                    size_t len);

/* Serves the complete request in c->hdr / c->body. */
void coll__store_serve(store_conn_t *c);
/* The pending GET/WAIT's timeout fired: replies TIMEOUT. */
void coll__store_wait_expired(store_conn_t *c);
/* Takes a waiting connection off its key's waiter list. */
void coll__store_unpark(store_conn_t *c);

#endif
