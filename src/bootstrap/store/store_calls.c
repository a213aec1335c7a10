/* SPDX-License-Identifier: Apache-2.0 */
/* store_calls.c: the store client's calls: set, get, wait, add, and the
 * missing-keys check the rendezvous uses to name absent ranks. Every call
 * takes the client's lock, so a client may be shared between threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store_cli.h"
#include "core/clock.h"
#include "core/error.h"

/* How long the client waits for a reply to a request that asked the server
 * to wait timeout_ms: the server answers by then, the grace covers the
 * trip. < 0: no bound. */
static int64_t reply_deadline(int64_t timeout_ms) {
  return timeout_ms < 0
             ? -1
             : coll__now_ms() + timeout_ms + COLL_STORE_REPLY_GRACE_MS;
}

static int64_t io_deadline(const coll_store_t *st) {
  return coll__store_io_deadline(st, coll__deadline(st->io_timeout_ms));
}

coll_status_t coll__store_set(coll_store_t *st, const char *key,
                              const void *val, size_t len) {
  uint8_t klen[2];
  struct iovec iov[3];
  coll_store_hdr_t rep;
  coll_status_t s;
  size_t kn;
  if (st == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store set: NULL store");
  COLL_CHECK(coll__store_check_key("set", key, &kn));
  if (len > COLL_STORE_VALUE_MAX)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store set '%s': value of %zu bytes exceeds the cap of %d",
                     key, len, COLL_STORE_VALUE_MAX);
  if (val == NULL && len > 0)
    return coll__err(COLL_ERR_INVALID_ARG, "store set '%s': value is NULL",
                     key);
  coll__put_le16(klen, (uint16_t)kn);
  iov[0] = (struct iovec){klen, 2};
  iov[1] = (struct iovec){(void *)key, kn};
  iov[2] = (struct iovec){(void *)val, len};
  uv_mutex_lock(&st->mu);
  s = coll__store_exchange(st, COLL_STORE_OP_SET, 1, 0, iov, len > 0 ? 3 : 2,
                           io_deadline(st), &rep);
  if (s == COLL_OK && (rep.code != COLL_STORE_ST_OK || rep.body_len != 0))
    s = coll__store_break(
        st, coll__err(COLL_ERR_PROTOCOL, "store %s: unexpected reply %u to set",
                      st->peer, rep.code));
  uv_mutex_unlock(&st->mu);
  return s;
}

static coll_status_t get_locked(coll_store_t *st, const char *key, size_t kn,
                                void *buf, size_t cap, size_t *len,
                                int64_t timeout_ms) {
  int64_t deadline;
  uint8_t klen[2];
  struct iovec iov[2] = {{klen, 2}, {(void *)key, kn}};
  coll_store_hdr_t rep;
  coll__put_le16(klen, (uint16_t)kn);
  timeout_ms = coll__store_wait_ms(st, timeout_ms);
  deadline = reply_deadline(timeout_ms);
  COLL_CHECK(coll__store_exchange(st, COLL_STORE_OP_GET, 1, timeout_ms, iov, 2,
                                  deadline, &rep));
  if (rep.code == COLL_STORE_ST_TIMEOUT) {
    COLL_CHECK(coll__store_read_body(st, NULL, rep.body_len, deadline));
    return coll__err(COLL_ERR_TIMEOUT,
                     "store %s: key '%s' did not appear within %lld ms",
                     st->peer, key, (long long)timeout_ms);
  }
  if (rep.code != COLL_STORE_ST_OK)
    return coll__store_break(
        st, coll__err(COLL_ERR_PROTOCOL, "store %s: unexpected reply %u to get",
                      st->peer, rep.code));
  if (len != NULL) *len = rep.body_len;
  if (rep.body_len > cap) {
    COLL_CHECK(coll__store_read_body(st, NULL, rep.body_len, deadline));
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "store get '%s': the value has %u bytes, the buffer %zu",
                     key, rep.body_len, cap);
  }
  return coll__store_read_body(st, buf, rep.body_len, deadline);
}

coll_status_t coll__store_get(coll_store_t *st, const char *key, void *buf,
                              size_t cap, size_t *len, int64_t timeout_ms) {
  coll_status_t s;
  size_t kn;
  if (st == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store get: NULL store");
  COLL_CHECK(coll__store_check_key("get", key, &kn));
  if (buf == NULL && cap > 0)
    return coll__err(COLL_ERR_INVALID_ARG, "store get '%s': buffer is NULL",
                     key);
  uv_mutex_lock(&st->mu);
  s = get_locked(st, key, kn, buf, cap, len, timeout_ms);
  uv_mutex_unlock(&st->mu);
  return s;
}

coll_status_t coll__store_add(coll_store_t *st, const char *key, int64_t delta,
                              int64_t *result) {
  uint8_t klen[2];
  struct iovec iov[2];
  coll_store_hdr_t rep;
  coll_status_t s;
  size_t kn;
  if (st == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store add: NULL store");
  COLL_CHECK(coll__store_check_key("add", key, &kn));
  coll__put_le16(klen, (uint16_t)kn);
  iov[0] = (struct iovec){klen, 2};
  iov[1] = (struct iovec){(void *)key, kn};
  uv_mutex_lock(&st->mu);
  s = coll__store_exchange(st, COLL_STORE_OP_ADD, 1, delta, iov, 2,
                           io_deadline(st), &rep);
  if (s == COLL_OK && rep.code == COLL_STORE_ST_NOTNUM) {
    s = coll__store_read_body(st, NULL, rep.body_len, io_deadline(st));
    if (s == COLL_OK)
      s = coll__err(COLL_ERR_INVALID_ARG,
                    "store add '%s': the key holds a value that is not a "
                    "counter",
                    key);
  } else if (s == COLL_OK &&
             (rep.code != COLL_STORE_ST_OK || rep.body_len != 0)) {
    s = coll__store_break(
        st, coll__err(COLL_ERR_PROTOCOL, "store %s: unexpected reply %u to add",
                      st->peer, rep.code));
  }
  if (s == COLL_OK && result != NULL) *result = rep.arg;
  uv_mutex_unlock(&st->mu);
  return s;
}

/* How many of keys[first..nkeys) fit one WAIT request. */
static int chunk_keys(const char *const *keys, int first, int nkeys,
                      size_t *body) {
  int n = 0;
  *body = 0;
  while (first + n < nkeys && n < (int)COLL_STORE_WAIT_KEYS_MAX) {
    size_t k = 2 + strlen(keys[first + n]);
    if (*body + k > COLL_STORE_BODY_MAX) break;
    *body += k;
    n++;
  }
  return n;
}

/* One WAIT for keys[first..first+n); indices of keys still missing after
 * timeout_ms are appended to missing[*nmissing..]. Lock held. */
static coll_status_t wait_chunk(coll_store_t *st, const char *const *keys,
                                int first, int n, size_t body,
                                int64_t timeout_ms, int *missing,
                                int *nmissing) {
  int64_t deadline;
  uint8_t *buf = malloc(body), *p = buf, idx[4];
  struct iovec iov;
  coll_store_hdr_t rep;
  coll_status_t s;
  uint32_t i;
  int k;
  if (buf == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "store wait: no memory");
  for (k = 0; k < n; k++) {
    size_t kn = strlen(keys[first + k]);
    coll__put_le16(p, (uint16_t)kn);
    p += 2;
    memcpy(p, keys[first + k], kn);
    p += kn;
  }
  iov = (struct iovec){buf, body};
  timeout_ms = coll__store_wait_ms(st, timeout_ms);
  deadline = reply_deadline(timeout_ms);
  s = coll__store_exchange(st, COLL_STORE_OP_WAIT, (uint16_t)n, timeout_ms,
                           &iov, 1, deadline, &rep);
  free(buf);
  if (s != COLL_OK) return s;
  if (rep.code == COLL_STORE_ST_OK && rep.body_len == 0) return COLL_OK;
  if (rep.code != COLL_STORE_ST_TIMEOUT || rep.body_len % 4 != 0 ||
      rep.body_len / 4 > (uint32_t)n)
    return coll__store_break(
        st,
        coll__err(COLL_ERR_PROTOCOL, "store %s: unexpected reply %u to wait",
                  st->peer, rep.code));
  for (i = 0; i < rep.body_len / 4; i++) {
    uint32_t j;
    COLL_CHECK(coll__store_read_body(st, idx, 4, deadline));
    j = coll__get_le32(idx);
    if (j < (uint32_t)n) missing[(*nmissing)++] = first + (int)j;
  }
  return COLL_OK;
}

/* Waits for every key, in requests that fit the body cap, all within one
 * deadline; once it passed, the remaining requests only check. Lock held. */
static coll_status_t wait_keys(coll_store_t *st, const char *const *keys,
                               int nkeys, int64_t timeout_ms, int *missing,
                               int *nmissing) {
  int64_t deadline = coll__deadline(timeout_ms);
  int first = 0;
  *nmissing = 0;
  while (first < nkeys) {
    size_t body;
    int n = chunk_keys(keys, first, nkeys, &body);
    int64_t left = *nmissing > 0 ? 0 : coll__remaining_ms(deadline);
    COLL_CHECK(wait_chunk(st, keys, first, n, body, left, missing, nmissing));
    first += n;
  }
  return COLL_OK;
}

static coll_status_t check_keys(const char *what, coll_store_t *st,
                                const char *const *keys, int nkeys) {
  size_t kn;
  int i;
  if (st == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store %s: NULL store", what);
  if (nkeys < 0 || (nkeys > 0 && keys == NULL))
    return coll__err(COLL_ERR_INVALID_ARG, "store %s: bad key list", what);
  for (i = 0; i < nkeys; i++)
    COLL_CHECK(coll__store_check_key(what, keys[i], &kn));
  return COLL_OK;
}

/* "a, b, c (and 5 more)" into out. */
static void list_keys(char *out, size_t cap, const char *const *keys,
                      const int *idx, int n) {
  size_t used = 0;
  int i;
  out[0] = '\0';
  for (i = 0; i < n && used + 64 < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "",
                             keys[idx[i]]);
  if (i < n) snprintf(out + used, cap - used, " (and %d more)", n - i);
}

coll_status_t coll__store_wait(coll_store_t *st, const char *const *keys,
                               int nkeys, int64_t timeout_ms) {
  int *missing, nmissing = 0;
  char names[320];
  coll_status_t s;
  COLL_CHECK(check_keys("wait", st, keys, nkeys));
  if (nkeys == 0) return COLL_OK;
  missing = malloc((size_t)nkeys * sizeof *missing);
  if (missing == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "store wait: out of memory");
  uv_mutex_lock(&st->mu);
  s = wait_keys(st, keys, nkeys, timeout_ms, missing, &nmissing);
  uv_mutex_unlock(&st->mu);
  if (s == COLL_OK && nmissing > 0) {
    list_keys(names, sizeof names, keys, missing, nmissing);
    s = coll__err(COLL_ERR_TIMEOUT,
                  "store %s: after %lld ms still missing %d of %d keys: %s",
                  st->peer, (long long)timeout_ms, nmissing, nkeys, names);
  }
  free(missing);
  return s;
}

coll_status_t coll__store_missing(coll_store_t *st, const char *const *keys,
                                  int nkeys, int *missing, int *nmissing) {
  coll_status_t s;
  COLL_CHECK(check_keys("check", st, keys, nkeys));
  if (missing == NULL || nmissing == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store check: NULL output");
  uv_mutex_lock(&st->mu);
  s = wait_keys(st, keys, nkeys, 0, missing, nmissing);
  uv_mutex_unlock(&st->mu);
  return s;
}
