/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_util.h: the current CUDA device saved and restored around every call
 * that needs another one, and memory kinds told apart by the CUDA runtime. */
#ifndef COLL_CUDA_CUDA_UTIL_H
#define COLL_CUDA_CUDA_UTIL_H

#include "cuda/gpu_table.h"

/* What enter saved, for leave to put back. With the driver's context calls
 * (gpu_table.h) that is the thread's CUDA context itself, whatever made it
 * (the runtime's primary context, cuCtxCreate, a green context) or none:
 * the runtime's device alone would bring back the device's primary context
 * instead of a context the caller made. With a runtime before CUDA 12,
 * where cudaSetDevice binds no context, also the device the thread chose,
 * which dropping the context would not bring back. Without the driver's
 * calls, the runtime's device. */
typedef struct coll_cuda_saved {
  int kind;      /* COLL_SAVED_NOTHING, _DEVICE or _CONTEXT */
  int dev;       /* the runtime's device before enter, or -1 */
  CUcontext ctx; /* _CONTEXT: the thread's context before enter (or NULL) */
} coll_cuda_saved_t;
enum {
  COLL_SAVED_NOTHING = 0, /* nothing to put back (enter failed or did not
                             change the device) */
  COLL_SAVED_DEVICE,      /* cudaSetDevice(dev) */
  COLL_SAVED_CONTEXT      /* cuCtxSetCurrent(ctx), and on a runtime before
                             CUDA 12 cudaSetDevice(dev) where ctx is NULL */
};
#define COLL_CUDA_SAVED_INIT \
  { COLL_SAVED_NOTHING, -1, NULL }

/* Makes `dev` current, saving the caller's state in *saved. On failure the
 * caller's state is unchanged and there is nothing to put back. Pair with
 * leave; a second enter may follow before leave, which then puts back what
 * the first saved (pass the later ones a scratch). Never makes a context
 * on a device the caller did not ask for. */
coll_status_t coll__cuda_device_enter(const coll_nccl_table_t *t, int dev,
                                      coll_cuda_saved_t *saved,
                                      const char *what);
/* Puts back what enter saved. */
void coll__cuda_device_leave(const coll_nccl_table_t *t,
                             coll_cuda_saved_t saved);

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
