/* SPDX-License-Identifier: Apache-2.0 */
/* staging_pool.h: pinned host slabs, each with libcoll's own stream and its
 * copy events, kept for reuse (cudaHostAlloc costs far more than one staged
 * collective) up to the size the collective pipeline needs. */
#ifndef COLL_CUDA_STAGING_POOL_H
#define COLL_CUDA_STAGING_POOL_H

#include <uv.h>

#include "cuda/gpu_table.h"

#define COLL_STAGE_SLOTS 3

typedef struct coll_slab {
  void *ptr; /* pinned, cap bytes */
  size_t cap;
  int dev; /* device current when the stream and events were made */
  const coll_nccl_table_t *t; /* the table it came from, and is freed by */
  /* Every copy of the slab runs on this stream. It is cudaStreamNonBlocking,
   * so it neither waits for nor holds up the legacy default stream and the
   * other blocking streams of the device (review finding H6); ordering
   * against the caller's stream is explicit, through events. */
  cudaStream_t st;
  cudaEvent_t ev[COLL_STAGE_SLOTS]; /* per pipeline slot; ev[0]: the drain */
  cudaEvent_t ev_caller;            /* recorded on the caller's stream */
  int fenced; /* parked: ev[0] was recorded on st behind everything */
  struct coll_slab *next;
} coll_slab_t;

/* A slab of at least `bytes` for device `dev`, from the pool or new (then
 * its stream and events are made on the current device, which must be
 * dev). Any thread. */
coll_status_t coll__slab_get(const coll_nccl_table_t *t, size_t bytes, int dev,
                             coll_slab_t **out);
/* Returns a slab whose copies all completed: kept if it is no larger than
 * COLL_STAGE_SLOTS segments and the pool has room, freed otherwise. Any
 * thread. */
void coll__slab_put(coll_slab_t *s);
/* Sets aside a slab whose copies may still run (a wait failed, or was
 * aborted, with copies queued): it is never handed out again while its
 * stream has work before the fence recorded here, and for ever if no fence
 * could be recorded. Any thread. */
void coll__slab_park(coll_slab_t *s);

/* The staging segment per pipeline slot, 4 MiB by default; set rounds up
 * to a multiple of 64 bytes, at least 4 KiB (0 restores the default). Every
 * rank must use the same: for tests, before any comm stages. */
void coll__staging_segment_set(size_t bytes);
size_t coll__staging_segment(void);

/* Bytes of pinned memory the pool keeps now; *largest (may be NULL) is the
 * largest slab among them. For tests. Any thread. */
size_t coll__slab_pool_bytes(size_t *largest);

/* Frees every pooled and parked slab (tests, before a table is uninstalled,
 * once no stream work can run any more). */
void coll__slab_pool_clear(void);

#endif
