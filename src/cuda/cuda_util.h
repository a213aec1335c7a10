/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_util.h: the current CUDA device saved and restored around every call
 * that needs another one, and memory kinds told apart by the CUDA runtime. */
#ifndef COLL_CUDA_CUDA_UTIL_H
#define COLL_CUDA_CUDA_UTIL_H

#include "cuda/gpu_table.h"

/* What enter saved: a device to restore, or one of these. */
#define COLL_NO_DEVICE (-1) /* nothing to restore (enter failed) */
#define COLL_NO_CONTEXT                               \
  (-2) /* the thread had no CUDA context: leave drops \
          the one enter made current, instead of      \
          cudaSetDevice(0), which would create a      \
          context on device 0 (W3 of the review) */

/* Makes `dev` current, saving the caller's state in *saved. On failure the
 * caller's device is unchanged and *saved is COLL_NO_DEVICE. Pair with
 * leave. */
coll_status_t coll__cuda_device_enter(const coll_nccl_table_t *t, int dev,
                                      int *saved, const char *what);
/* Restores what enter saved. */
void coll__cuda_device_leave(const coll_nccl_table_t *t, int saved);

typedef enum coll_mem_kind {
  COLL_MEM_HOST = 0, /* pageable host memory, unknown to CUDA */
  COLL_MEM_PINNED,   /* page-locked host memory (cudaHostAlloc/Register) */
  COLL_MEM_DEVICE,   /* cudaMalloc'ed device memory */
  COLL_MEM_MANAGED   /* cudaMallocManaged */
} coll_mem_kind_t;

/* Asks the CUDA runtime what p is (never guesses, never dereferences p).
 * *dev is the device of device/managed memory, else -1. */
coll_status_t coll__cuda_mem_kind(const coll_nccl_table_t *t, const void *p,
                                  coll_mem_kind_t *kind, int *dev);

#endif
