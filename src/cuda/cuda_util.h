/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_util.h: the current CUDA device saved and restored around every call
 * that needs another one, and memory kinds told apart by the CUDA runtime. */
#ifndef COLL_CUDA_CUDA_UTIL_H
#define COLL_CUDA_CUDA_UTIL_H

#include "cuda/gpu_table.h"

/* Makes `dev` current, saving the caller's device in *saved. On failure the
 * caller's device is unchanged and *saved is -1. Pair with leave. */
coll_status_t coll__cuda_device_enter(const coll_nccl_table_t *t, int dev,
                                      int *saved, const char *what);
/* Restores the device enter saved (nothing if saved < 0). */
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
