/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_util.c: current-device save/restore and pointer kinds. */
#include "cuda/cuda_util.h"

#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* cudaPointerAttributes grew across CUDA majors; the runtime loaded may be
 * newer than the header, so it writes into room to spare. */
#define COLL_CUDA_ATTR_BYTES 512

static coll_status_t set_device(const coll_nccl_table_t *t, int dev,
                                const char *what) {
  char why[COLL_ERRMSG_MAX];
  cudaError_t e = t->cuda_set_device(dev);
  if (e == cudaSuccess) return COLL_OK;
  coll__cuda_result(t, e, "cudaSetDevice");
  coll__err_save(why);
  return coll__err(COLL_ERR_BACKEND, "%s: cannot make device %d current: %s",
                   what, dev, why);
}

coll_status_t coll__cuda_device_enter(const coll_nccl_table_t *t, int dev,
                                      int *saved, const char *what) {
  int cur = -1;
  CUcontext ctx = NULL;
  cudaError_t e;
  *saved = COLL_NO_DEVICE;
  /* A thread without a context reports device 0 to cudaGetDevice; ask the
   * driver first, so leave can tell "device 0" from "none". */
  if (t->cu_ctx_get_current != NULL &&
      t->cu_ctx_get_current(&ctx) == CUDA_SUCCESS && ctx == NULL) {
    COLL_CHECK(set_device(t, dev, what));
    *saved = COLL_NO_CONTEXT;
    return COLL_OK;
  }
  e = t->cuda_get_device(&cur);
  if (e != cudaSuccess) return coll__cuda_result(t, e, what);
  if (cur != dev) COLL_CHECK(set_device(t, dev, what));
  *saved = cur;
  return COLL_OK;
}

void coll__cuda_device_leave(const coll_nccl_table_t *t, int saved) {
  int cur = -1;
  if (saved == COLL_NO_CONTEXT) {
    if (t->cu_ctx_set_current(NULL) != CUDA_SUCCESS)
      COLL_WARN(COLL_LOG_NCCL, "could not drop the CUDA context made current");
    return;
  }
  if (saved < 0) return;
  if (t->cuda_get_device(&cur) == cudaSuccess && cur == saved) return;
  if (t->cuda_set_device(saved) != cudaSuccess)
    COLL_WARN(COLL_LOG_NCCL, "could not restore the current CUDA device %d",
              saved);
}

coll_status_t coll__cuda_mem_kind(const coll_nccl_table_t *t, const void *p,
                                  coll_mem_kind_t *kind, int *dev) {
  union {
    struct cudaPointerAttributes a;
    unsigned char room[COLL_CUDA_ATTR_BYTES];
  } u;
  cudaError_t e;
  memset(&u, 0, sizeof u);
  *kind = COLL_MEM_HOST;
  *dev = -1;
  e = t->cuda_pointer_get_attributes(&u.a, p);
  if (e == cudaErrorInvalidValue) {
    /* Runtimes before 11.0 answer plain host memory with an error that
     * sticks until read: clear it, the pointer is host memory. */
    t->cuda_get_last_error();
    return COLL_OK;
  }
  if (e != cudaSuccess)
    return coll__cuda_result(t, e, "cudaPointerGetAttributes");
  switch (u.a.type) {
    case cudaMemoryTypeDevice:
      *kind = COLL_MEM_DEVICE;
      *dev = u.a.device;
      break;
    case cudaMemoryTypeManaged:
      *kind = COLL_MEM_MANAGED;
      *dev = u.a.device;
      break;
    case cudaMemoryTypeHost: *kind = COLL_MEM_PINNED; break;
    default: *kind = COLL_MEM_HOST; break;
  }
  return COLL_OK;
}
