/* SPDX-License-Identifier: Apache-2.0 */
/* store_ops.c: what the store's requests do (SET, GET, WAIT, ADD), and the
 * GET/WAIT requests parked on a key that does not exist yet. A parked
 * request hangs off that key's entry only, so a SET wakes just the
 * connections waiting for that key. Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store_srv.h"

static store_conn_t *conn_of_wlink(coll_smap_link_t *l) {
  return (store_conn_t *)((char *)l - offsetof(store_conn_t, wlink));
}

static const char *key_at(const store_conn_t *c, int i) {
  return (const char *)c->body + c->keys[i].off;
}

static coll_smap_entry_t *entry_at(const store_conn_t *c, int i) {
  return coll__smap_find(&c->srv->map, key_at(c, i), c->keys[i].len);
}

static int has_key(const store_conn_t *c, int i) {
  coll_smap_entry_t *e = entry_at(c, i);
  return e != NULL && e->has_val;
}

/* Splits the body into its keys. Returns the offset of what follows them,
 * or -1 when the body is malformed (the connection is then failing). */
static long parse_keys(store_conn_t *c) {
  size_t end = 0;
  int bad = 0;
  c->keys = malloc(c->hdr.nkeys * sizeof *c->keys);
  if (c->keys == NULL) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return -1;
  }
  if (coll__store_split_keys(c->body, c->hdr.body_len, c->hdr.nkeys, c->keys,
                             &end, &bad) != 0) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD,
                          "malformed key %d: keys are 1..%d bytes without NUL",
                          bad, COLL_STORE_KEY_MAX);
    return -1;
  }
  c->nkeys = c->hdr.nkeys;
  return (long)end;
}

/* Replies TIMEOUT listing (as u32 indices) the keys that still miss. */
static void reply_timeout(store_conn_t *c) {
  uint8_t *idx = malloc(4u * c->nkeys);
  uint32_t n = 0;
  int i;
  if (idx == NULL) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return;
  }
  for (i = c->widx; i < c->nkeys; i++)
    if (!has_key(c, i)) coll__put_le32(idx + 4u * n++, (uint32_t)i);
  if (coll__store_reply(c, COLL_STORE_ST_TIMEOUT, 0, idx, 4u * n, NULL, 0) == 0)
    coll__store_request_done(c);
  free(idx);
}

/* Every key exists: answer the GET (with its value) or the WAIT. */
static void finish_wait(store_conn_t *c) {
  coll_smap_entry_t *e = entry_at(c, 0);
  int rc;
  if (c->hdr.code == COLL_STORE_OP_GET)
    rc = coll__store_reply(c, COLL_STORE_ST_OK, 0, e->val, e->vlen, NULL, 0);
  else
    rc = coll__store_reply(c, COLL_STORE_ST_OK, 0, NULL, 0, NULL, 0);
  if (rc == 0) coll__store_request_done(c);
}

/* Skips the keys that exist; parks on the first missing one, or answers. */
static void advance(store_conn_t *c) {
  coll_smap_entry_t *e;
  while (c->widx < c->nkeys && has_key(c, c->widx)) c->widx++;
  if (c->widx == c->nkeys) {
    finish_wait(c);
    return;
  }
  e = coll__smap_get_or_add(&c->srv->map, key_at(c, c->widx),
                            c->keys[c->widx].len);
  if (e == NULL) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return;
  }
  c->wentry = e;
  coll__smap_link_push(&e->waiters, &c->wlink);
}

void coll__store_unpark(store_conn_t *c) {
  coll_smap_entry_t *e = c->wentry;
  coll__smap_link_remove(&c->wlink);
  c->wentry = NULL;
  coll__smap_release(&c->srv->map, e);
}

void coll__store_wait_expired(store_conn_t *c) {
  if (c->wentry != NULL) coll__store_unpark(c);
  reply_timeout(c);
}

/* e just got a value: every connection parked on it moves on. The list is
 * taken whole first, since a woken request may park again elsewhere. */
static void wake(coll_smap_entry_t *e) {
  coll_smap_link_t woken;
  coll__smap_link_init(&woken);
  while (!coll__smap_link_empty(&e->waiters)) {
    coll_smap_link_t *l = e->waiters.next;
    coll__smap_link_remove(l);
    coll__smap_link_push(&woken, l);
  }
  while (!coll__smap_link_empty(&woken)) {
    coll_smap_link_t *l = woken.next;
    store_conn_t *c = conn_of_wlink(l);
    coll__smap_link_remove(l);
    c->wentry = NULL;
    advance(c);
  }
}

int coll__store_put(coll_store_server_t *srv, const char *key, const void *val,
                    size_t len) {
  coll_smap_t *m = &srv->map;
  size_t klen = strlen(key);
  coll_smap_entry_t *e = coll__smap_find(m, key, klen);
  size_t after = e != NULL ? m->bytes - e->vlen + len
                           : m->bytes + coll__smap_cost(klen, len);
  if ((e == NULL && m->count >= srv->caps.keys) || after > srv->caps.bytes)
    return -1;
  e = coll__smap_get_or_add(m, key, klen);
  if (e == NULL) return -1;
  if (coll__smap_set(m, e, val, len) != 0) {
    coll__smap_release(m, e);
    return -1;
  }
  wake(e);
  return 0;
}

static void serve_wait(store_conn_t *c) {
  c->widx = 0;
  while (c->widx < c->nkeys && has_key(c, c->widx)) c->widx++;
  if (c->widx == c->nkeys) {
    finish_wait(c);
  } else if (c->hdr.arg == 0) {
    reply_timeout(c); /* a pure check: which keys are missing */
  } else {
    coll__store_conn_wait(c, c->hdr.arg);
    advance(c);
  }
}

/* Whether key 0 of the request may take a value of vlen bytes within the
 * caps; refuses the request when not. 1: it fits. */
static int fits(store_conn_t *c, size_t vlen) {
  const coll_smap_t *m = &c->srv->map;
  const coll_store_caps_t *caps = &c->srv->caps;
  coll_smap_entry_t *e = entry_at(c, 0);
  size_t klen = c->keys[0].len, now = m->bytes, after;
  char what[160];
  if (e == NULL && m->count >= caps->keys) {
    snprintf(what, sizeof what, "it holds %zu keys", m->count);
    coll__store_refuse_full(c, what);
    return 0;
  }
  after = e != NULL ? now - e->vlen + vlen : now + coll__smap_cost(klen, vlen);
  if (after > caps->bytes && after > now) {
    snprintf(what, sizeof what,
             "it holds %zu bytes and this value of %zu bytes would pass %zu",
             now, vlen, caps->bytes);
    coll__store_refuse_full(c, what);
    return 0;
  }
  return 1;
}

static void serve_set(store_conn_t *c, size_t off) {
  size_t vlen = c->hdr.body_len - off;
  coll_smap_entry_t *e;
  if (vlen > COLL_STORE_VALUE_MAX) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD,
                          "value of %zu bytes exceeds the cap of %d", vlen,
                          COLL_STORE_VALUE_MAX);
    return;
  }
  if (!fits(c, vlen)) return;
  e = coll__smap_get_or_add(&c->srv->map, key_at(c, 0), c->keys[0].len);
  if (e == NULL || coll__smap_set(&c->srv->map, e, c->body + off, vlen) != 0) {
    if (e != NULL) coll__smap_release(&c->srv->map, e);
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return;
  }
  /* Waiters move on even if this client's reply cannot be sent. */
  wake(e);
  if (coll__store_reply(c, COLL_STORE_ST_OK, 0, NULL, 0, NULL, 0) == 0)
    coll__store_request_done(c);
}

/* A counter is kept as decimal text, so GET reads it like any value. */
static int parse_counter(const coll_smap_entry_t *e, int64_t *out) {
  char txt[24], *end = NULL;
  long long v;
  if (e->vlen == 0 || e->vlen >= sizeof txt) return -1;
  memcpy(txt, e->val, e->vlen);
  txt[e->vlen] = '\0';
  errno = 0;
  v = strtoll(txt, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = (int64_t)v;
  return 0;
}

static void serve_add(store_conn_t *c) {
  coll_smap_entry_t *e;
  int64_t old = 0, sum;
  char txt[24];
  int n;
  /* A counter's text is at most 20 bytes. */
  if (!fits(c, 20)) return;
  e = coll__smap_get_or_add(&c->srv->map, key_at(c, 0), c->keys[0].len);
  if (e == NULL) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return;
  }
  if (e->has_val && parse_counter(e, &old) != 0) {
    static const char msg[] = "the key holds a value that is not a counter";
    if (coll__store_reply(c, COLL_STORE_ST_NOTNUM, 0, msg, sizeof msg - 1, NULL,
                          0) == 0)
      coll__store_request_done(c);
    return;
  }
  /* Wraps like two's complement instead of overflowing (undefined in C). */
  sum = (int64_t)((uint64_t)old + (uint64_t)c->hdr.arg);
  n = snprintf(txt, sizeof txt, "%lld", (long long)sum);
  if (coll__smap_set(&c->srv->map, e, txt, (size_t)n) != 0) {
    coll__smap_release(&c->srv->map, e);
    coll__store_conn_fail(c, COLL_STORE_ST_BAD, "server out of memory");
    return;
  }
  wake(e);
  if (coll__store_reply(c, COLL_STORE_ST_OK, sum, NULL, 0, NULL, 0) == 0)
    coll__store_request_done(c);
}

void coll__store_serve(store_conn_t *c) {
  long off = parse_keys(c);
  if (off < 0) return;
  if (c->hdr.code == COLL_STORE_OP_SET) {
    serve_set(c, (size_t)off);
    return;
  }
  if ((size_t)off != c->hdr.body_len) {
    coll__store_conn_fail(c, COLL_STORE_ST_BAD,
                          "op %u carries %zu bytes after its keys", c->hdr.code,
                          c->hdr.body_len - (size_t)off);
    return;
  }
  if (c->hdr.code == COLL_STORE_OP_ADD)
    serve_add(c);
  else
    serve_wait(c);
}
