// SPDX-License-Identifier: Apache-2.0
// store_shim.h: TEMPORARY stand-in for coll_comm_init_store until the
// library provides it; removed once coll.h declares it.
#pragma once
#include <coll.h>

#ifdef __cplusplus
extern "C" {
#endif
typedef struct coll_store_ops {
  size_t size;
  void *ctx;
  coll_status_t (*set)(void *ctx, const char *key, const void *value,
                       size_t len);
  coll_status_t (*get)(void *ctx, const char *key, void *value, size_t cap,
                       size_t *len, int64_t timeout_ms);
} coll_store_ops_t;
coll_status_t coll_comm_init_store(const coll_store_ops_t *store, int rank,
                                   int world, const coll_comm_config_t *cfg,
                                   coll_comm_t **out);
#ifdef __cplusplus
}
#endif
