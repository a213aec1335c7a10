/* SPDX-License-Identifier: Apache-2.0 */
/* staging_pool.h: pinned host slabs (with their copy events) kept for reuse,
 * since cudaHostAlloc costs far more than one staged collective. */
#ifndef COLL_CUDA_STAGING_POOL_H
#define COLL_CUDA_STAGING_POOL_H

#include <uv.h>

#include "cuda/gpu_table.h"

#define COLL_STAGE_SLOTS 3

typedef struct coll_slab {
  void *ptr; /* pinned, cap bytes */
  size_t cap;
  int dev; /* device current when the events were made */
  cudaEvent_t ev[COLL_STAGE_SLOTS];
  struct coll_slab *next;
} coll_slab_t;

/* A slab of at least `bytes` for device `dev`, from the pool or new. */
coll_status_t coll__slab_get(const coll_nccl_table_t *t, size_t bytes, int dev,
                             coll_slab_t **out);
/* Returns a slab to the pool (or frees it when the pool is full). */
void coll__slab_put(const coll_nccl_table_t *t, coll_slab_t *s);
/* The staging segment per slot, 4 MiB by default (0 restores it). Every
 * rank must use the same: for tests, before any comm stages. */
void coll__staging_segment_set(size_t bytes);

/* Bytes of pinned memory the pool keeps now; *largest (may be NULL) is the
 * largest slab among them. For tests. Any thread. */
size_t coll__slab_pool_bytes(size_t *largest);

/* Frees every pooled slab (tests, before a table is uninstalled). */
void coll__slab_pool_clear(void);

#endif
