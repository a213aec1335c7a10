/* SPDX-License-Identifier: Apache-2.0 */
/* kv.h: checked calls into a key/value store seen as a coll_store_ops_t:
 * the caller's (coll_comm_init_store) or libcoll's own store client
 * wrapped as one (coll__store_client_ops), so the NCCL unique id and the
 * TCP addresses travel through one code path whichever store carries
 * them. */
#ifndef COLL_BOOTSTRAP_KV_H
#define COLL_BOOTSTRAP_KV_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Prefix of every key libcoll writes into a store it does not serve. */
#define COLL_KV_PREFIX "coll/"
/* Where rank 0 leaves the NCCL unique id. */
#define COLL_KV_UID_KEY COLL_KV_PREFIX "nccl/unique_id"
/* Where rank r leaves its TCP address: COLL_KV_ADDR_KEY "<r>". */
#define COLL_KV_ADDR_KEY COLL_KV_PREFIX "addr/"
/* Where rank r leaves its host identity: COLL_KV_HOST_KEY "<r>". */
#define COLL_KV_HOST_KEY COLL_KV_PREFIX "host/"
#define COLL_KV_KEY_MAX 64

/* COLL_OK for a table that can be called: not NULL, large enough for the
 * set and get slots, both present. Else COLL_ERR_INVALID_ARG saying what
 * is wrong. Any thread. */
coll_status_t coll__kv_check(const coll_store_ops_t *ops);

/* ops->set, with a failure's status kept and its text (the slot's own, if
 * it recorded one) carried as "the store's set of '<key>' failed: ...".
 * One thread per store. */
coll_status_t coll__kv_set(const coll_store_ops_t *ops, const char *key,
                           const void *value, size_t len);

/* ops->get, waiting at most timeout_ms (0: not at all, < 0: no bound).
 * *len is the value's full length (which may exceed cap). COLL_ERR_TIMEOUT
 * names the key; COLL_ERR_PROTOCOL when the slot said COLL_OK without
 * setting *len; other failures as for coll__kv_set. One thread per store. */
coll_status_t coll__kv_get(const coll_store_ops_t *ops, const char *key,
                           void *value, size_t cap, size_t *len,
                           int64_t timeout_ms);

/* Asks, without waiting, which of the keys "<prefix><r>" for r in
 * 0..world-1 (skipping `self`) are missing: their ranks go to
 * missing[0..*n) in increasing order (missing holds world entries). A
 * failure other than a missing key ends the probe with its status. One
 * thread per store. */
coll_status_t coll__kv_missing(const coll_store_ops_t *ops, const char *prefix,
                               int world, int self, int *missing, int *n);

#endif
