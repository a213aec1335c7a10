/* SPDX-License-Identifier: Apache-2.0 */
/* staging_pool.c: the pinned slab pool behind device-buffer staging, and
 * the slabs set aside because a copy may still write them. */
#include "cuda/staging_pool.h"

#include <stdlib.h>

#include "core/error.h"

#define POOL_MAX 4                  /* slabs kept (pinned memory is scarce) */
#define SEG_BYTES ((size_t)4 << 20) /* per slot; fixed so ranks agree */
#define SEG_MIN ((size_t)4 << 10)

static size_t seg_bytes = SEG_BYTES;

static uv_once_t pool_once = UV_ONCE_INIT;
static uv_mutex_t pool_mu;
static coll_slab_t *pool;   /* under pool_mu */
static int pooled;          /* under pool_mu */
static coll_slab_t *parked; /* under pool_mu */

static void pool_init(void) { uv_mutex_init(&pool_mu); }

void coll__staging_segment_set(size_t bytes) {
  if (bytes == 0) {
    seg_bytes = SEG_BYTES;
    return;
  }
  if (bytes < SEG_MIN) bytes = SEG_MIN;
  seg_bytes = (bytes + 63) & ~(size_t)63;
}

size_t coll__staging_segment(void) { return seg_bytes; }

static void slab_free(coll_slab_t *s) {
  const coll_nccl_table_t *t = s->t;
  int i;
  for (i = 0; i < COLL_STAGE_SLOTS; i++)
    if (s->ev[i] != NULL) t->cuda_event_destroy(s->ev[i]);
  if (s->ev_caller != NULL) t->cuda_event_destroy(s->ev_caller);
  if (s->st != NULL) t->cuda_stream_destroy(s->st);
  if (s->ptr != NULL) t->cuda_free_host(s->ptr);
  free(s);
}

/* Whether a slab is worth keeping pinned: the collective pipeline never
 * needs more than its slots of one segment each (staging.c plans so), so
 * only a whole-message slab (fedavg, a large point-to-point message) is
 * larger, and it goes back to the system at once (review finding M9). */
static int poolable(const coll_slab_t *s) {
  return s->cap <= (size_t)COLL_STAGE_SLOTS * seg_bytes;
}

/* Keeps s if it qualifies; returns s when the caller must free it. Pool
 * lock held. */
static coll_slab_t *pool_keep(coll_slab_t *s) {
  if (pooled >= POOL_MAX || !poolable(s)) return s;
  s->next = pool;
  pool = s;
  pooled++;
  return NULL;
}

/* Moves parked slabs whose fence passed (no copy can touch them any more)
 * back into use. Pool lock held; the queries never block. */
static void reclaim(coll_slab_t **to_free) {
  coll_slab_t **pp = &parked, *s;
  while ((s = *pp) != NULL) {
    if (!s->fenced || s->t->cuda_event_query(s->ev[0]) != cudaSuccess) {
      pp = &s->next;
      continue;
    }
    *pp = s->next;
    s->fenced = 0;
    if (pool_keep(s) != NULL) {
      s->next = *to_free;
      *to_free = s;
    }
  }
}

/* The smallest pooled slab that fits. Pool lock held. */
static coll_slab_t *pool_take(const coll_nccl_table_t *t, size_t bytes,
                              int dev) {
  coll_slab_t **pp, **best = NULL;
  coll_slab_t *s;
  for (pp = &pool; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->cap >= bytes && (*pp)->dev == dev && (*pp)->t == t &&
        (best == NULL || (*pp)->cap < (*best)->cap))
      best = pp;
  if (best == NULL) return NULL;
  s = *best;
  *best = s->next;
  s->next = NULL;
  pooled--;
  return s;
}

static coll_status_t slab_new(const coll_nccl_table_t *t, size_t bytes, int dev,
                              coll_slab_t **out) {
  coll_slab_t *s = calloc(1, sizeof *s);
  cudaError_t e;
  int i;
  if (s == NULL) return coll__err(COLL_ERR_NO_MEMORY, "staging: out of memory");
  s->t = t;
  s->dev = dev;
  s->cap = bytes < 4096 ? 4096 : bytes;
  e = t->cuda_host_alloc(&s->ptr, s->cap, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    s->ptr = NULL;
    slab_free(s);
    return coll__cuda_result(t, e, "staging: cudaHostAlloc");
  }
  e = t->cuda_stream_create_with_flags(&s->st, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    s->st = NULL;
    slab_free(s);
    return coll__cuda_result(t, e, "staging: cudaStreamCreateWithFlags");
  }
  for (i = 0; i <= COLL_STAGE_SLOTS; i++) {
    cudaEvent_t *ev = i < COLL_STAGE_SLOTS ? &s->ev[i] : &s->ev_caller;
    e = t->cuda_event_create(ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      *ev = NULL;
      slab_free(s);
      return coll__cuda_result(t, e, "staging: cudaEventCreate");
    }
  }
  *out = s;
  return COLL_OK;
}

coll_status_t coll__slab_get(const coll_nccl_table_t *t, size_t bytes, int dev,
                             coll_slab_t **out) {
  coll_slab_t *s, *to_free = NULL;
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  reclaim(&to_free);
  s = pool_take(t, bytes, dev);
  uv_mutex_unlock(&pool_mu);
  while (to_free != NULL) {
    coll_slab_t *next = to_free->next;
    slab_free(to_free);
    to_free = next;
  }
  if (s != NULL) {
    *out = s;
    return COLL_OK;
  }
  return slab_new(t, bytes, dev, out);
}

void coll__slab_put(coll_slab_t *s) {
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  s = pool_keep(s);
  uv_mutex_unlock(&pool_mu);
  if (s != NULL) slab_free(s);
}

void coll__slab_park(coll_slab_t *s) {
  /* The fence sits behind every copy queued on the slab's stream; until it
   * passes, a copy may still write the slab (or read it into the caller's
   * buffer). */
  s->fenced = s->t->cuda_event_record(s->ev[0], s->st) == cudaSuccess;
  uv_once(&pool_once, pool_init);
  uv_mutex_lock(&pool_mu);
  s->next = parked;
  parked = s;
  uv_mutex_unlock(&pool_mu);
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
    slab_free(s);
  }
  while ((s = parked) != NULL) {
    parked = s->next;
    slab_free(s);
  }
  pooled = 0;
  uv_mutex_unlock(&pool_mu);
}
