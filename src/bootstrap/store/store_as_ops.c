/* SPDX-License-Identifier: Apache-2.0 */
/* store_as_ops.c: libcoll's own store client seen as a coll_store_ops_t,
 * so that code written against a caller's store (the NCCL unique id's
 * exchange) serves the built-in rendezvous too. */
#include "bootstrap/store/store.h"

static coll_status_t client_set(void *ctx, const char *key, const void *value,
                                size_t len) {
  return coll__store_set(ctx, key, value, len);
}

static coll_status_t client_get(void *ctx, const char *key, void *value,
                                size_t cap, size_t *len, int64_t timeout_ms) {
  return coll__store_get(ctx, key, value, cap, len, timeout_ms);
}

void coll__store_client_ops(coll_store_t *st, coll_store_ops_t *out) {
  out->size = sizeof *out;
  out->ctx = st;
  out->set = client_set;
  out->get = client_get;
}
