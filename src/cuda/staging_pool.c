/* SPDX-License-Identifier: Apache-2.0 */
/* staging_pool.c: the pinned slab pool behind device-buffer staging. */
#include "cuda/staging_pool.h"

#include <stdlib.h>

#include "core/error.h"

#define POOL_MAX 4 /* slabs kept (pinned memory is scarce) */

static uv_once_t pool_once = UV_ONCE_INIT;
static uv_mutex_t pool_mu;
static coll_slab_t *pool; /* under pool_mu */
static int pooled;
static const coll_nccl_table_t *pool_table; /* the table the slabs came from */

static void pool_init(void) { uv_mutex_init(&pool_mu); }

static void slab_free(const coll_nccl_table_t *t, coll_slab_t *s) {
  int i;
  for (i = 0; i < COLL_STAGE_SLOTS; i++)
    if (s->ev[i] != NULL) t->cuda_event_destroy(s->ev[i]);
  if (s->ptr != NULL) t->cuda_free_host(s->ptr);
  free(s);
}

static coll_slab_t *pool_take(size_t bytes, int dev) {
  coll_slab_t **pp, *s = NULL;
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  for (pp = &pool; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->cap >= bytes && (*pp)->dev == dev) {
      s = *pp;
      *pp = s->next;
      s->next = NULL;
      pooled--;
      break;
    }
  }
  uv_mutex_unlock(&pool_mu);
  return s;
}

coll_status_t coll__slab_get(const coll_nccl_table_t *t, size_t bytes, int dev,
                             coll_slab_t **out) {
  coll_slab_t *s = pool_take(bytes, dev);
  cudaError_t e;
  int i;
  if (s != NULL) {
    *out = s;
    return COLL_OK;
  }
  s = calloc(1, sizeof *s);
  if (s == NULL) return coll__err(COLL_ERR_NO_MEMORY, "staging: out of memory");
  s->dev = dev;
  s->cap = bytes < 4096 ? 4096 : bytes;
  e = t->cuda_host_alloc(&s->ptr, s->cap, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    s->ptr = NULL;
    slab_free(t, s);
    return coll__cuda_result(t, e, "staging: cudaHostAlloc");
  }
  for (i = 0; i < COLL_STAGE_SLOTS; i++) {
    e = t->cuda_event_create(&s->ev[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
      s->ev[i] = NULL;
      slab_free(t, s);
      return coll__cuda_result(t, e, "staging: cudaEventCreate");
    }
  }
  *out = s;
  return COLL_OK;
}

void coll__slab_put(const coll_nccl_table_t *t, coll_slab_t *s) {
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  if (pooled < POOL_MAX && (pool_table == NULL || pool_table == t)) {
    pool_table = t;
    s->next = pool;
    pool = s;
    pooled++;
    s = NULL;
  }
  uv_mutex_unlock(&pool_mu);
  if (s != NULL) slab_free(t, s);
}

size_t coll__slab_pool_bytes(size_t *largest) {
  coll_slab_t *s;
  size_t total = 0, big = 0;
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  for (s = pool; s != NULL; s = s->next) {
    total += s->cap;
    if (s->cap > big) big = s->cap;
  }
  uv_mutex_unlock(&pool_mu);
  if (largest != NULL) *largest = big;
  return total;
}

void coll__slab_pool_clear(void) {
  coll_slab_t *s;
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  while ((s = pool) != NULL) {
    pool = s->next;
    slab_free(pool_table, s);
  }
  pooled = 0;
  pool_table = NULL;
  uv_mutex_unlock(&pool_mu);
}
