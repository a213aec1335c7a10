/* SPDX-License-Identifier: Apache-2.0 */
/* store_conn.c: one client connection on the store server. The read buffer
 * handed to libuv is exactly the rest of the current header or body, so a
 * connection never reads past its request, a half request costs nothing but
 * its own small state, and a body is allocated only after its header passed
 * every check (magic, version, op, key count, length cap). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store_auth.h"
#include "bootstrap/store/store_srv.h"
#include "core/log.h"

/* Above this many queued reply bytes the connection stops reading, so a
 * client that sends requests but never reads replies cannot grow them. */
#define STORE_WQ_HIGH (256u * 1024u)
/* A final error reply gets this long to go out before the socket closes. */
#define STORE_DRAIN_MS 2000

typedef struct store_wreq {
  uv_write_t req;
  store_conn_t *conn;
  size_t bytes;
  uint8_t data[];
} store_wreq_t;

static void on_closed(uv_handle_t *h) {
  store_conn_t *c = h->data;
  if (--c->open_handles > 0) return;
  free(c->body);
  free(c->keys);
  free(c);
}

static void leave_unauth(store_conn_t *c) {
  if (!c->in_unauth) return;
  coll__smap_link_remove(&c->ulink);
  c->in_unauth = 0;
  c->srv->n_unauth--;
}

void coll__store_conn_close(store_conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  c->reading = 0;
  leave_unauth(c);
  if (c->authed) c->srv->n_authed--;
  if (c->wentry != NULL) coll__store_unpark(c);
  coll__smap_link_remove(&c->link);
  uv_close((uv_handle_t *)&c->timer, on_closed);
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  store_conn_t *c = h->data;
  (void)suggested;
  if (c->hdr_got < COLL_STORE_HDR_BYTES) {
    *buf = uv_buf_init((char *)c->hdr_buf + c->hdr_got,
                       (unsigned)(COLL_STORE_HDR_BYTES - c->hdr_got));
  } else if (c->body != NULL && c->body_got < c->hdr.body_len) {
    *buf = uv_buf_init((char *)c->body + c->body_got,
                       (unsigned)(c->hdr.body_len - c->body_got));
  } else {
    *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS; ignored */
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* Reads exactly while there is a request to read and room to reply. */
static void update_reading(store_conn_t *c) {
  int want = !c->closing && c->state == STORE_CONN_READING &&
             c->wq_bytes <= STORE_WQ_HIGH;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
      coll__store_conn_close(c);
      return;
    }
    c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

static void on_write(uv_write_t *req, int status) {
  store_wreq_t *w = (store_wreq_t *)req;
  store_conn_t *c = w->conn;
  c->wq_bytes -= w->bytes;
  free(w);
  if (c->closing) return;
  if (status < 0 || (c->state == STORE_CONN_DRAINING && c->wq_bytes == 0)) {
    coll__store_conn_close(c);
    return;
  }
  update_reading(c);
}

int coll__store_reply(store_conn_t *c, uint8_t code, int64_t arg, const void *a,
                      size_t na, const void *b, size_t nb) {
  size_t n = COLL_STORE_HDR_BYTES + na + nb;
  store_wreq_t *w;
  coll_store_hdr_t h = coll__store_hdr(code, 0, (uint32_t)(na + nb), arg);
  uv_buf_t buf;
  if (c->closing) return -1;
  w = malloc(sizeof *w + n);
  if (w == NULL) {
    coll__store_conn_close(c);
    return -1;
  }
  coll__store_hdr_encode(w->data, &h);
  if (na > 0) memcpy(w->data + COLL_STORE_HDR_BYTES, a, na);
  if (nb > 0) memcpy(w->data + COLL_STORE_HDR_BYTES + na, b, nb);
  w->conn = c;
  w->bytes = n;
  buf = uv_buf_init((char *)w->data, (unsigned)n);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_write) != 0) {
    free(w);
    coll__store_conn_close(c);
    return -1;
  }
  c->wq_bytes += n;
  update_reading(c);
  return 0;
}

static void on_timer(uv_timer_t *t) {
  store_conn_t *c = t->data;
  if (c->state == STORE_CONN_WAITING) {
    coll__store_wait_expired(c);
    return;
  }
  /* A handshake that never finished, or a drain that never completed. */
  if (!c->authed && c->state == STORE_CONN_READING) {
    atomic_fetch_add(&c->srv->n_refused, 1);
    coll__refusal_note(&c->srv->refusals, c->where,
                       "no HELLO within the handshake bound");
  }
  coll__store_conn_close(c);
}

/* A HELLO from a client that says it is rank `claim` of the job was
 * refused: the store keeps why, under COLL_STORE_REFUSED_KEY, so that the
 * ranks waiting for that rank can say what became of it. */
static void note_refused_claim(store_conn_t *c, const char *why) {
  char key[48], val[320];
  int n;
  if (c->authed || c->claim < 0 || c->claim >= c->srv->world) return;
  snprintf(key, sizeof key, COLL_STORE_REFUSED_KEY "%d", c->claim);
  n = snprintf(val, sizeof val, "%s: %s", c->where, why);
  (void)coll__store_put(c->srv, key, val,
                        n < (int)sizeof val ? (size_t)n : sizeof val - 1);
}

void coll__store_conn_fail(store_conn_t *c, uint8_t code, const char *fmt,
                           ...) {
  char msg[256], logged[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!c->authed && c->claim >= 0) {
    snprintf(logged, sizeof logged, "%s (it says it is rank %d)", msg,
             c->claim);
    note_refused_claim(c, msg);
  } else {
    snprintf(logged, sizeof logged, "%s", msg);
  }
  coll__refusal_note(&c->srv->refusals, c->where, logged);
  atomic_fetch_add(&c->srv->n_refused, 1);
  if (c->wentry != NULL) coll__store_unpark(c);
  c->state = STORE_CONN_DRAINING;
  update_reading(c);
  if (coll__store_reply(c, code, 0, msg, strlen(msg), NULL, 0) != 0) return;
  uv_timer_start(&c->timer, on_timer, STORE_DRAIN_MS, 0);
}

void coll__store_refuse_full(store_conn_t *c, const char *what) {
  const coll_store_server_t *srv = c->srv;
  atomic_fetch_add(&c->srv->n_full, 1);
  coll__store_conn_fail(
      c, COLL_STORE_ST_BAD,
      "the store is full: %s, its cap for a job of %d rank%s%s", what,
      srv->world, srv->world == 1 ? "" : "s",
      srv->token != NULL
          ? ""
          : "; without a token (COLL_AUTH_TOKEN) anyone who reaches the "
            "store can write to it");
}

void coll__store_request_done(store_conn_t *c) {
  uv_timer_stop(&c->timer);
  free(c->body);
  free(c->keys);
  c->body = NULL;
  c->keys = NULL;
  c->nkeys = 0;
  c->hdr_got = 0;
  c->body_got = 0;
  c->state = STORE_CONN_READING;
  update_reading(c);
}

void coll__store_conn_wait(store_conn_t *c, int64_t timeout_ms) {
  c->state = STORE_CONN_WAITING;
  update_reading(c);
  if (timeout_ms > 0)
    uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
}

static void note_body_size(coll_store_server_t *srv, size_t n) {
  size_t cur = atomic_load(&srv->max_body);
  while (n > cur && !atomic_compare_exchange_weak(&srv->max_body, &cur, n)) {
  }
}

/* Checks a complete header; allocates the body only if it passed. 0 when
 * the body should be read next, -1 when the connection is failing. */
static int check_header(store_conn_t *c) {
  coll_store_hdr_t *h = &c->hdr;
  char why[160];
  if (coll__store_check_hdr(c->hdr_buf, c->authed, h, why, sizeof why) != 0) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "%s", why);
    return -1;
  }
  c->body = malloc(h->body_len);
  if (c->body == NULL) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return -1;
  }
  note_body_size(c->srv, h->body_len);
  c->body_got = 0;
  return 0;
}

/* The client's HELLO is complete: check its proof of the token and prove
 * ours (see store_proto.h). */
/* A client past its HELLO that the job did not expect (it claims no rank
 * of it, or there are more clients than ranks) is logged with its
 * address: it may be a process from outside the job. */
static void judge_client(store_conn_t *c) {
  coll_store_server_t *srv = c->srv;
  const char *open = srv->token != NULL
                         ? ""
                         : "; without a token (COLL_AUTH_TOKEN) anyone who "
                           "reaches the store can join";
  if (!srv->judge_clients) return;
  if (c->claim < 0 || c->claim >= srv->world) {
    COLL_WARN(COLL_LOG_BOOT,
              "store %s:%d: a client at %s that is no rank of this job of %d "
              "(it %s) connected%s",
              srv->addr, srv->port, c->where, srv->world,
              c->claim < 0 ? "names no rank" : "names a rank outside it", open);
  } else if (srv->n_authed > srv->world) {
    COLL_WARN(COLL_LOG_BOOT,
              "store %s:%d: a client at %s that says it is rank %d makes %d "
              "clients for the %d ranks of this job: two processes have one "
              "rank, or a process from outside the job connected%s",
              srv->addr, srv->port, c->where, c->claim, srv->n_authed,
              srv->world, open);
  } else {
    COLL_INFO(COLL_LOG_BOOT, "store %s:%d: rank %d connected from %s",
              srv->addr, srv->port, c->claim, c->where);
  }
}

static void serve_hello(store_conn_t *c) {
  const uint8_t *cnonce = c->body, *cmac = c->body + COLL_STORE_NONCE_BYTES;
  const char *token = c->srv->token;
  int client_has = (c->hdr.arg & COLL_STORE_FLAG_TOKEN) != 0;
  uint64_t claim = (uint64_t)c->hdr.arg >> COLL_STORE_CLAIM_SHIFT;
  uint8_t mac[COLL_SHA256_BYTES];
  c->claim = claim > 0 && claim <= (uint64_t)INT_MAX ? (int)(claim - 1) : -1;
  if (token != NULL && !client_has) {
    coll__store_conn_fail(c, COLL_STORE_ST_AUTH,
                          "this store requires an auth token and the client "
                          "has none (set the same COLL_AUTH_TOKEN on every "
                          "rank)");
    return;
  }
  if (token == NULL && client_has) {
    coll__store_conn_fail(c, COLL_STORE_ST_AUTH,
                          "this store has no auth token but the client has "
                          "one (set the same COLL_AUTH_TOKEN on every rank, "
                          "or none)");
    return;
  }
  coll__store_mac(token, "coll-store-client", c->snonce, cnonce, mac);
  if (!coll__bytes_equal_ct(mac, cmac, sizeof mac)) {
    coll__store_conn_fail(c, COLL_STORE_ST_AUTH,
                          "auth token mismatch: the client's token differs "
                          "from the store's (COLL_AUTH_TOKEN)");
    return;
  }
  if (c->srv->n_authed >= c->srv->caps.clients) {
    char what[96];
    snprintf(what, sizeof what, "%d clients are connected", c->srv->n_authed);
    coll__store_refuse_full(c, what);
    return;
  }
  coll__store_mac(token, "coll-store-server", cnonce, c->snonce, mac);
  c->authed = 1;
  c->srv->n_authed++;
  leave_unauth(c);
  judge_client(c);
  if (coll__store_reply(c, COLL_STORE_ST_OK, 0, mac, sizeof mac, NULL, 0) != 0)
    return;
  coll__store_request_done(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  store_conn_t *c = s->data;
  (void)buf;
  if (n == 0 || n == UV_ENOBUFS || c->closing) return;
  if (n < 0) { /* EOF or reset: the client is gone */
    coll__store_conn_close(c);
    return;
  }
  if (c->hdr_got < COLL_STORE_HDR_BYTES) {
    c->hdr_got += (size_t)n;
    if (c->hdr_got == COLL_STORE_HDR_BYTES) (void)check_header(c);
    return;
  }
  c->body_got += (size_t)n;
  if (c->body_got < c->hdr.body_len) return;
  if (!c->authed) {
    serve_hello(c);
    return;
  }
  atomic_fetch_add(&c->srv->n_requests, 1);
  coll__store_serve(c);
}

int coll__store_evict_oldest(coll_store_server_t *srv, const char *why) {
  store_conn_t *c;
  if (coll__smap_link_empty(&srv->unauth)) return 0;
  c = (store_conn_t *)((char *)srv->unauth.next -
                       offsetof(store_conn_t, ulink));
  atomic_fetch_add(&srv->n_refused, 1);
  coll__refusal_note(&srv->refusals, c->where, why);
  coll__store_conn_close(c);
  return 1;
}

/* The client's address as text, for refusal lines. */
static void peer_name(store_conn_t *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[48] = "?";
  snprintf(c->where, sizeof c->where, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return;
  if (ss.ss_family == AF_INET6) {
    uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
    snprintf(c->where, sizeof c->where, "[%s]:%u", ip,
             (unsigned)ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
  } else if (ss.ss_family == AF_INET) {
    uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
    snprintf(c->where, sizeof c->where, "%s:%u", ip,
             (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
  }
}

void coll__store_conn_start(coll_store_server_t *srv, store_conn_t *c) {
  uint64_t flags = srv->token != NULL ? COLL_STORE_FLAG_TOKEN : 0;
  c->claim = -1;
  coll__smap_link_init(&c->wlink);
  coll__smap_link_push(&srv->conns, &c->link);
  peer_name(c);
  /* Oldest first: the one evicted when a newcomer finds the table full. */
  if (srv->n_unauth >= srv->unauth_cap)
    (void)coll__store_evict_oldest(srv,
                                   "evicted: too many clients had not "
                                   "finished their HELLO");
  coll__smap_link_push(&srv->unauth, &c->ulink);
  c->in_unauth = 1;
  srv->n_unauth++;
  uv_timer_init(&srv->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 2;
  c->state = STORE_CONN_READING;
  uv_tcp_nodelay(&c->tcp, 1);
  if (coll__random_bytes(c->snonce, sizeof c->snonce) != COLL_OK) {
    COLL_WARN(COLL_LOG_BOOT, "store %s:%d: no random nonce; dropping a client",
              srv->addr, srv->port);
    coll__store_conn_close(c);
    return;
  }
  if (coll__store_reply(c, COLL_STORE_OP_HELLO, (int64_t)flags, c->snonce,
                        sizeof c->snonce, NULL, 0) != 0)
    return;
  uv_timer_start(&c->timer, on_timer, (uint64_t)atomic_load(&srv->handshake_ms),
                 0);
}
