/* SPDX-License-Identifier: Apache-2.0 */
/* store_client.c: a client's connection to the store: connect (retrying,
 * since rank 0 may start its server after the others), the challenge-
 * response handshake, and one request/reply exchange. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/store/store_auth.h"
#include "bootstrap/store/store_cli.h"
#include "bootstrap/store/store_io.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define STORE_TEXT_MAX 1024

/* Reads a reply's text body into msg (truncated, always terminated). */
static coll_status_t read_text(int fd, uint32_t len, char *msg, size_t cap,
                               int64_t deadline_ms, const char *peer) {
  char tmp[STORE_TEXT_MAX];
  size_t keep = len < sizeof tmp - 1 ? len : sizeof tmp - 1;
  coll_status_t s;
  if (len > COLL_STORE_BODY_MAX)
    return coll__err(COLL_ERR_PROTOCOL, "store %s: reply claims %u bytes", peer,
                     len);
  s = coll__io_recv(fd, tmp, keep, deadline_ms, peer);
  if (s != COLL_OK) return s;
  tmp[keep] = '\0';
  snprintf(msg, cap, "%s", tmp);
  /* The rest of an over-long text is not needed: the server closes after
   * an error reply, and so does the caller. */
  return COLL_OK;
}

/* Checks a header from the server: magic and version. */
static coll_status_t check_reply_hdr(const coll_store_hdr_t *h,
                                     const char *peer) {
  if (h->magic != COLL_STORE_MAGIC)
    return coll__err(COLL_ERR_PROTOCOL,
                     "%s is not a libcoll rendezvous store (it sent magic "
                     "0x%08x); is MASTER_PORT used by another service?",
                     peer, h->magic);
  if (h->version != COLL_STORE_VERSION)
    return coll__err(COLL_ERR_PROTOCOL,
                     "store %s speaks protocol version %u, this library %u",
                     peer, h->version, COLL_STORE_VERSION);
  return COLL_OK;
}

/* The HELLO exchange (see store_proto.h). A status other than COLL_OK and
 * COLL_ERR_PEER_LOST is final; PEER_LOST may be retried. */
static coll_status_t handshake(int fd, const char *token, int rank,
                               int64_t deadline_ms, const char *peer) {
  uint8_t b[COLL_STORE_HDR_BYTES], snonce[COLL_STORE_NONCE_BYTES];
  uint8_t cnonce[COLL_STORE_NONCE_BYTES], mac[COLL_SHA256_BYTES];
  uint8_t smac[COLL_SHA256_BYTES];
  int have = token != NULL && token[0] != '\0';
  coll_store_hdr_t h;
  struct iovec iov[3];
  char msg[STORE_TEXT_MAX];
  COLL_CHECK(coll__io_recv(fd, b, sizeof b, deadline_ms, peer));
  coll__store_hdr_decode(b, &h);
  COLL_CHECK(check_reply_hdr(&h, peer));
  if (h.code != COLL_STORE_OP_HELLO || h.body_len != sizeof snonce)
    return coll__err(COLL_ERR_PROTOCOL, "store %s: expected HELLO, got %u",
                     peer, h.code);
  COLL_CHECK(coll__io_recv(fd, snonce, sizeof snonce, deadline_ms, peer));
  COLL_CHECK(coll__random_bytes(cnonce, sizeof cnonce));
  coll__store_mac(token, "coll-store-client", snonce, cnonce, mac);
  h = coll__store_hdr(
      COLL_STORE_OP_HELLO, 0, sizeof cnonce + sizeof mac,
      (have ? COLL_STORE_FLAG_TOKEN : 0) |
          (rank >= 0 ? (int64_t)(rank + 1) << COLL_STORE_CLAIM_SHIFT : 0));
  coll__store_hdr_encode(b, &h);
  iov[0] = (struct iovec){b, sizeof b};
  iov[1] = (struct iovec){cnonce, sizeof cnonce};
  iov[2] = (struct iovec){mac, sizeof mac};
  COLL_CHECK(coll__io_sendv(fd, iov, 3, deadline_ms, peer));
  COLL_CHECK(coll__io_recv(fd, b, sizeof b, deadline_ms, peer));
  coll__store_hdr_decode(b, &h);
  COLL_CHECK(check_reply_hdr(&h, peer));
  if (h.code != COLL_STORE_ST_OK) {
    COLL_CHECK(read_text(fd, h.body_len, msg, sizeof msg, deadline_ms, peer));
    return coll__err(COLL_ERR_PROTOCOL, "store %s refused this client: %s",
                     peer, msg);
  }
  if (h.body_len != sizeof smac)
    return coll__err(COLL_ERR_PROTOCOL, "store %s: bad HELLO reply", peer);
  COLL_CHECK(coll__io_recv(fd, smac, sizeof smac, deadline_ms, peer));
  coll__store_mac(token, "coll-store-server", cnonce, snonce, mac);
  if (have && !coll__bytes_equal_ct(mac, smac, sizeof mac))
    return coll__err(COLL_ERR_PROTOCOL,
                     "store %s could not prove it knows the auth token "
                     "(COLL_AUTH_TOKEN): refusing to trust it",
                     peer);
  return COLL_OK;
}

/* One pass over the resolved addresses. Returns COLL_OK with *fd set, a
 * final error, or COLL_ERR_TIMEOUT/PEER_LOST (try again) with *why set. */
static coll_status_t try_once(const struct addrinfo *list, const char *token,
                              int rank, int64_t deadline_ms, const char *peer,
                              int *fd, char *why, size_t why_cap) {
  const struct addrinfo *ai;
  for (ai = list; ai != NULL; ai = ai->ai_next) {
    int err = 0, s;
    coll_status_t st;
    s = coll__io_connect(ai->ai_addr, ai->ai_addrlen, deadline_ms, &err);
    if (s < 0) {
      /* Running out of time says less than the error before it. */
      if (err != ETIMEDOUT || why[0] == '\0')
        snprintf(why, why_cap, "%s", strerror(err));
      continue;
    }
    st = handshake(s, token, rank, deadline_ms, peer);
    if (st == COLL_OK) {
      *fd = s;
      return COLL_OK;
    }
    close(s);
    if (st != COLL_ERR_PEER_LOST && st != COLL_ERR_TIMEOUT) return st;
    snprintf(why, why_cap, "%s", coll_last_error());
  }
  return COLL_ERR_TIMEOUT;
}

static coll_status_t resolve(const char *host, int port,
                             struct addrinfo **out) {
  struct addrinfo hints;
  char service[16];
  int rc;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(service, sizeof service, "%d", port);
  rc = getaddrinfo(host, service, &hints, out);
  if (rc != 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store: host '%s' does not resolve: %s", host,
                     gai_strerror(rc));
  return COLL_OK;
}

coll_status_t coll__store_dial(coll_store_dial_t *d, coll_store_t **out) {
  int64_t deadline, backoff = 10, timeout_ms;
  struct addrinfo *list = NULL;
  coll_store_t *st = NULL;
  coll_status_t s;
  int fd = -1;
  if (out == NULL || d == NULL || d->host == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store connect: %s is NULL",
                     out == NULL ? "out" : "host");
  *out = NULL;
  d->why[0] = '\0';
  timeout_ms = d->timeout_ms;
  deadline = coll__deadline(timeout_ms);
  if (d->port < 1 || d->port > 65535)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store connect: port %d is outside 1..65535", d->port);
  st = calloc(1, sizeof *st);
  if (st == NULL) return coll__err(COLL_ERR_NO_MEMORY, "store: out of memory");
  st->fd = -1;
  st->end_ms = -1;
  /* SET/ADD replies come at once from a live server; their bound only
   * catches a hung one, so a nearly spent connect budget must not make it
   * tiny. */
  st->io_timeout_ms = timeout_ms < 0 ? -1
                                     : (timeout_ms > COLL_STORE_REPLY_GRACE_MS
                                            ? timeout_ms
                                            : COLL_STORE_REPLY_GRACE_MS);
  snprintf(st->peer, sizeof st->peer,
           strchr(d->host, ':') ? "[%s]:%d" : "%s:%d", d->host, d->port);
  COLL_CHECK_GOTO(resolve(d->host, d->port, &list), s, fail);
  for (;;) {
    s = try_once(list, d->token, d->rank, deadline, st->peer, &fd, d->why,
                 sizeof d->why);
    if (s == COLL_OK) break;
    if (s != COLL_ERR_TIMEOUT) goto fail;
    if (deadline >= 0 && coll__remaining_ms(deadline) == 0) {
      s = coll__err(COLL_ERR_TIMEOUT,
                    "could not reach the rendezvous store at %s within %lld "
                    "ms: %s",
                    st->peer, (long long)timeout_ms, d->why);
      goto fail;
    }
    /* Rank 0 may not listen yet: back off and try again. */
    if (deadline >= 0 && backoff > coll__remaining_ms(deadline))
      backoff = coll__remaining_ms(deadline);
    uv_sleep((unsigned)backoff);
    backoff = backoff * 2 > 500 ? 500 : backoff * 2;
  }
  if (uv_mutex_init(&st->mu) != 0) {
    close(fd);
    s = coll__err(COLL_ERR_SYSTEM, "store: cannot create a mutex");
    goto fail;
  }
  st->fd = fd;
  freeaddrinfo(list);
  COLL_INFO(COLL_LOG_BOOT, "store: connected to %s", st->peer);
  *out = st;
  return COLL_OK;
fail:
  if (list != NULL) freeaddrinfo(list);
  free(st);
  return s;
}

coll_status_t coll__store_connect(const char *host, int port, const char *token,
                                  int64_t timeout_ms, coll_store_t **out) {
  coll_store_dial_t d;
  memset(&d, 0, sizeof d);
  d.host = host;
  d.port = port;
  d.token = token;
  d.rank = -1;
  d.timeout_ms = timeout_ms;
  return coll__store_dial(&d, out);
}

void coll__store_close(coll_store_t *st) {
  if (st == NULL) return;
  close(st->fd);
  uv_mutex_destroy(&st->mu);
  free(st);
}

void coll__store_set_end(coll_store_t *st, int64_t end_ms) {
  uv_mutex_lock(&st->mu);
  st->end_ms = end_ms;
  uv_mutex_unlock(&st->mu);
}

int64_t coll__store_io_deadline(const coll_store_t *st, int64_t deadline_ms) {
  if (st->end_ms < 0) return deadline_ms;
  return deadline_ms < 0 || deadline_ms > st->end_ms ? st->end_ms : deadline_ms;
}

int64_t coll__store_wait_ms(const coll_store_t *st, int64_t timeout_ms) {
  int64_t room;
  if (st->end_ms < 0 || timeout_ms == 0) return timeout_ms;
  room = coll__remaining_ms(st->end_ms) - COLL_STORE_END_MARGIN_MS;
  if (room <= 0) return 0;
  return timeout_ms < 0 || timeout_ms > room ? room : timeout_ms;
}

int coll__store_usable(coll_store_t *st) {
  int ok;
  uv_mutex_lock(&st->mu);
  ok = st->broken == COLL_OK;
  uv_mutex_unlock(&st->mu);
  return ok;
}

coll_status_t coll__store_break(coll_store_t *st, coll_status_t s) {
  if (st->broken == COLL_OK) {
    st->broken = s;
    snprintf(st->broke, sizeof st->broke, "%s", coll_last_error());
  }
  return s;
}

const char *coll__store_peer(const coll_store_t *st) {
  return st != NULL ? st->peer : "?";
}

coll_status_t coll__store_check_key(const char *what, const char *key,
                                    size_t *len) {
  if (key == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store %s: key is NULL", what);
  *len = strlen(key);
  if (*len == 0 || *len > COLL_STORE_KEY_MAX)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store %s: key of %zu bytes; keys are 1..%d bytes", what,
                     *len, COLL_STORE_KEY_MAX);
  return COLL_OK;
}

coll_status_t coll__store_exchange(coll_store_t *st, uint8_t op, uint16_t nkeys,
                                   int64_t arg, struct iovec *iov, int niov,
                                   int64_t deadline_ms, coll_store_hdr_t *rep) {
  uint8_t b[COLL_STORE_HDR_BYTES];
  struct iovec all[8];
  size_t body = 0;
  coll_store_hdr_t h;
  char msg[STORE_TEXT_MAX];
  coll_status_t s;
  int i;
  if (st->broken != COLL_OK)
    return coll__err(st->broken, "%s (earlier; the connection is unusable)",
                     st->broke);
  deadline_ms = coll__store_io_deadline(st, deadline_ms);
  for (i = 0; i < niov; i++) body += iov[i].iov_len;
  h = coll__store_hdr(op, nkeys, (uint32_t)body, arg);
  coll__store_hdr_encode(b, &h);
  all[0] = (struct iovec){b, sizeof b};
  for (i = 0; i < niov && i < 7; i++) all[i + 1] = iov[i];
  COLL_CHECK_GOTO(coll__io_sendv(st->fd, all, niov + 1, deadline_ms, st->peer),
                  s, fail);
  COLL_CHECK_GOTO(coll__io_recv(st->fd, b, sizeof b, deadline_ms, st->peer), s,
                  fail);
  coll__store_hdr_decode(b, rep);
  COLL_CHECK_GOTO(check_reply_hdr(rep, st->peer), s, fail);
  if (rep->body_len > COLL_STORE_BODY_MAX) {
    s = coll__err(COLL_ERR_PROTOCOL, "store %s: reply claims %u bytes",
                  st->peer, rep->body_len);
    goto fail;
  }
  if (rep->code == COLL_STORE_ST_BAD || rep->code == COLL_STORE_ST_AUTH) {
    COLL_CHECK_GOTO(read_text(st->fd, rep->body_len, msg, sizeof msg,
                              deadline_ms, st->peer),
                    s, fail);
    s = coll__err(COLL_ERR_PROTOCOL, "store %s refused the request: %s",
                  st->peer, msg);
    goto fail;
  }
  return COLL_OK;
fail:
  /* The end was what ran out: the store is cut off from this client, or
   * hangs; the socket's own word ("no reply in time") says less. */
  if (s == COLL_ERR_TIMEOUT && st->end_ms >= 0 &&
      coll__remaining_ms(st->end_ms) == 0)
    s = coll__err(s,
                  "store %s did not answer by the end of the setup: rank 0 "
                  "is cut off from this rank, or hangs",
                  st->peer);
  return coll__store_break(st, s);
}

coll_status_t coll__store_read_body(coll_store_t *st, void *buf, size_t len,
                                    int64_t deadline_ms) {
  char scratch[4096];
  coll_status_t s = COLL_OK;
  deadline_ms = coll__store_io_deadline(st, deadline_ms);
  while (len > 0 && s == COLL_OK) {
    size_t n = len;
    if (buf == NULL && n > sizeof scratch) n = sizeof scratch;
    s = coll__io_recv(st->fd, buf != NULL ? buf : scratch, n, deadline_ms,
                      st->peer);
    if (buf != NULL) buf = (char *)buf + n;
    len -= n;
  }
  return s != COLL_OK ? coll__store_break(st, s) : COLL_OK;
}
