/* SPDX-License-Identifier: Apache-2.0 */
/* kv.c: checked calls into a coll_store_ops_t. The slots are the caller's
 * code: a status outside the list, a COLL_OK without a length, or a failure
 * without a reason must still become a clear error here. */
#include "bootstrap/rendezvous/kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The table must reach through the get slot. */
#define KV_MIN_SIZE (offsetof(coll_store_ops_t, get) + sizeof(void (*)(void)))

coll_status_t coll__kv_check(const coll_store_ops_t *ops) {
  if (ops == NULL) return coll__err(COLL_ERR_INVALID_ARG, "store is NULL");
  if (ops->size < KV_MIN_SIZE)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store->size is %zu, too small for the set and get slots "
                     "(%zu); set it to sizeof(coll_store_ops_t)",
                     ops->size, (size_t)KV_MIN_SIZE);
  if (ops->set == NULL || ops->get == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store->%s is NULL; both set and get are mandatory",
                     ops->set == NULL ? "set" : "get");
  return COLL_OK;
}

static int known_status(coll_status_t s) {
  switch (s) {
#define KV_STATUS_CASE_(name, value, text) case COLL_##name:
    COLL_STATUS_MAP(KV_STATUS_CASE_)
#undef KV_STATUS_CASE_
    return 1;
  }
  return 0;
}

/* A slot returned s != COLL_OK: keep its status (a known failure) and its
 * text under a sentence that names the call and the key. */
static coll_status_t slot_failed(coll_status_t s, const char *verb,
                                 const char *key) {
  char why[COLL_ERRMSG_MAX];
  if (!known_status(s))
    return coll__err(COLL_ERR_PROTOCOL,
                     "the store's %s of '%s' returned %d, which is not a "
                     "coll_status_t",
                     verb, key, (int)s);
  coll__err_save(why);
  return coll__err(s, "the store's %s of '%s' failed: %s", verb, key,
                   why[0] != '\0' ? why : coll_strerror(s));
}

coll_status_t coll__kv_set(const coll_store_ops_t *ops, const char *key,
                           const void *value, size_t len) {
  coll_status_t s;
  coll__err_clear(); /* so that the slot's own text can be told apart */
  s = ops->set(ops->ctx, key, value, len);
  return s == COLL_OK ? COLL_OK : slot_failed(s, "set", key);
}

coll_status_t coll__kv_get(const coll_store_ops_t *ops, const char *key,
                           void *value, size_t cap, size_t *len,
                           int64_t timeout_ms) {
  size_t n = SIZE_MAX; /* a slot that forgets *len leaves this */
  coll_status_t s;
  coll__err_clear();
  s = ops->get(ops->ctx, key, value, cap, &n, timeout_ms);
  if (s == COLL_ERR_TIMEOUT)
    return coll__err(s, "'%s' did not appear in the store within %lld ms", key,
                     (long long)timeout_ms);
  if (s != COLL_OK) return slot_failed(s, "get", key);
  if (n == SIZE_MAX)
    return coll__err(COLL_ERR_PROTOCOL,
                     "the store's get of '%s' returned COLL_OK without "
                     "setting the value's length",
                     key);
  *len = n;
  return COLL_OK;
}

coll_status_t coll__kv_missing(const coll_store_ops_t *ops, const char *prefix,
                               int world, int self, int *missing, int *n) {
  char key[COLL_KV_KEY_MAX], scratch[1];
  size_t len;
  coll_status_t s;
  int r;
  *n = 0;
  for (r = 0; r < world; r++) {
    if (r == self) continue;
    snprintf(key, sizeof key, "%s%d", prefix, r);
    s = coll__kv_get(ops, key, scratch, sizeof scratch, &len, 0);
    if (s == COLL_ERR_TIMEOUT)
      missing[(*n)++] = r;
    else if (s != COLL_OK)
      return s;
  }
  coll__err_clear();
  return COLL_OK;
}
