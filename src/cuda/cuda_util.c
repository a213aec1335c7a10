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

/* CUDA 12 made cudaSetDevice bind the device's primary context at once;
 * before, it only chose the device, for the runtime to bind on first use. */
static int runtime_binds_at_set(const coll_nccl_table_t *t) {
  int v = 0;
  if (t->cuda_runtime_get_version == NULL ||
      t->cuda_runtime_get_version(&v) != cudaSuccess)
    return 1;
  return v >= 12000;
}

coll_status_t coll__cuda_device_enter(const coll_nccl_table_t *t, int dev,
                                      coll_cuda_saved_t *saved,
                                      const char *what) {
  int cur = -1;
  CUcontext ctx = NULL;
  cudaError_t e;
  *saved = (coll_cuda_saved_t)COLL_CUDA_SAVED_INIT;
  if (t->cu_ctx_get_current != NULL &&
      t->cu_ctx_get_current(&ctx) == CUDA_SUCCESS) {
    /* A thread without a context reports device 0, or the device it chose
     * (before CUDA 12), to cudaGetDevice: either way, switch. */
    e = t->cuda_get_device(&cur);
    if (e != cudaSuccess) return coll__cuda_result(t, e, what);
    if (ctx != NULL && cur == dev) return COLL_OK;
    COLL_CHECK(set_device(t, dev, what));
    *saved = (coll_cuda_saved_t){COLL_SAVED_CONTEXT, cur, ctx};
    return COLL_OK;
  }
  e = t->cuda_get_device(&cur);
  if (e != cudaSuccess) return coll__cuda_result(t, e, what);
  if (cur == dev) return COLL_OK;
  COLL_CHECK(set_device(t, dev, what));
  *saved = (coll_cuda_saved_t){COLL_SAVED_DEVICE, cur, NULL};
  return COLL_OK;
}

void coll__cuda_device_leave(const coll_nccl_table_t *t,
                             coll_cuda_saved_t saved) {
  CUcontext now = NULL;
  int cur = -1;
  if (saved.kind == COLL_SAVED_CONTEXT) {
    if ((t->cu_ctx_get_current(&now) != CUDA_SUCCESS || now != saved.ctx) &&
        t->cu_ctx_set_current(saved.ctx) != CUDA_SUCCESS)
      COLL_WARN(COLL_LOG_NCCL, "could not restore the thread's CUDA context");
    /* Before CUDA 12 the thread's choice of device outlives its context:
     * choosing it again makes no context. From 12 on it would make one
     * (cudaSetDevice binds it), on a device the caller never used. */
    if (saved.ctx == NULL && !runtime_binds_at_set(t) &&
        t->cuda_set_device(saved.dev) != cudaSuccess)
      COLL_WARN(COLL_LOG_NCCL, "could not restore the current CUDA device %d",
                saved.dev);
    return;
  }
  if (saved.kind != COLL_SAVED_DEVICE) return;
  if (t->cuda_get_device(&cur) == cudaSuccess && cur == saved.dev) return;
  if (t->cuda_set_device(saved.dev) != cudaSuccess)
    COLL_WARN(COLL_LOG_NCCL, "could not restore the current CUDA device %d",
              saved.dev);
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
