/* SPDX-License-Identifier: Apache-2.0 */
/* test_kv.h: an in-memory key/value store shared by the rank threads of one
 * test process, behind coll_store_ops_t, with knobs that make a rank's
 * view of it fail the ways a caller's store can. */
#ifndef COLL_TEST_KV_H
#define COLL_TEST_KV_H

#include <stddef.h>

#include "coll.h"

typedef struct test_kv test_kv_t;

/* A new empty store; NULL when out of memory. Freed by test_kv_free. */
test_kv_t *test_kv_new(void);
void test_kv_free(test_kv_t *kv);
/* Sets key directly (a value planted before the ranks start). */
void test_kv_put(test_kv_t *kv, const char *key, const void *value, size_t len);
/* 1 and the value (NUL-terminated, truncated to cap - 1) when key exists,
 * else 0. */
int test_kv_peek(test_kv_t *kv, const char *key, char *buf, size_t cap);
/* How many keys the store holds. */
int test_kv_count(test_kv_t *kv);

/* Plants what the ranks other than `rank` of `world` leave in the store
 * when they arrive: "coll/compat/<q>" (this build's text), and with ok
 * "coll/outcome/<q>" = "ok" (they succeeded), so that one rank can run
 * alone past the compatibility check (and the agreement on the outcome). */
void test_kv_plant_peers(test_kv_t *kv, int rank, int world, int ok);

/* One rank's view: its ops table reaches kv through `prefix` (prepended
 * to every key, as torch's PrefixStore does), and fails as told. */
typedef struct test_kv_view {
  test_kv_t *kv;
  const char *prefix;       /* NULL: none */
  coll_status_t fail_set;   /* not COLL_OK: every set returns it */
  coll_status_t fail_get;   /* not COLL_OK: every get returns it */
  const char *fail_text;    /* recorded by a failing slot; NULL: none */
  int forget_len;           /* get says COLL_OK but leaves *len alone */
  int late;                 /* a get that may wait times out, key or not */
  coll_status_t fail_probe; /* not COLL_OK: a get told not to wait fails */
  const char *only;         /* not NULL: the failures and lateness above
                               touch only keys that contain it */
  int64_t zero_gets;        /* gets that were asked not to wait */
} test_kv_view_t;

/* Fills *ops (size, ctx = v, set, get) for v. */
void test_kv_ops(test_kv_view_t *v, coll_store_ops_t *ops);

#endif
