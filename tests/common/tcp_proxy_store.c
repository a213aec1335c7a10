/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy_store.c: the store wrapper that rewrites one peer's address to
 * a tcp_proxy's. */
#include "tcp_proxy_store.h"

#include <stdio.h>
#include <string.h>

#include "transport/tcp/tcp_sock.h"

static coll_status_t wrap_set(void *ctx, const char *key, const void *value,
                              size_t len) {
  tcp_proxy_store_t *w = ctx;
  return w->inner->set(w->inner->ctx, key, value, len);
}

static coll_status_t wrap_get(void *ctx, const char *key, void *value,
                              size_t cap, size_t *len, int64_t timeout_ms) {
  tcp_proxy_store_t *w = ctx;
  char mine[32], real[COLL_TCP_ADDR_MAX];
  const char *proxy;
  size_t n = 0;
  coll_status_t s;
  snprintf(mine, sizeof mine, "coll/addr/%d", w->peer);
  if (strcmp(key, mine) != 0)
    return w->inner->get(w->inner->ctx, key, value, cap, len, timeout_ms);
  s = w->inner->get(w->inner->ctx, key, real, sizeof real - 1, &n, timeout_ms);
  if (s != COLL_OK) return s;
  real[n < sizeof real ? n : sizeof real - 1] = '\0';
  if (tcp_proxy_set_target(w->proxy, real) != 0)
    return coll_set_last_error(COLL_ERR_INTERNAL,
                               "tcp_proxy: cannot forward to '%s'", real);
  proxy = tcp_proxy_addr(w->proxy);
  n = strlen(proxy);
  memcpy(value, proxy, n < cap ? n : cap);
  *len = n;
  w->rewrites++;
  return COLL_OK;
}

void tcp_proxy_store_ops(tcp_proxy_store_t *w, coll_store_ops_t *ops) {
  ops->size = sizeof *ops;
  ops->ctx = w;
  ops->set = wrap_set;
  ops->get = wrap_get;
}
