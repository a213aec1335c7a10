/* SPDX-License-Identifier: Apache-2.0 */
/* device_cuda.c: device buffers for --nccl through the CUDA runtime,
 * loaded with dlopen like libcoll loads it, so coll-perf still builds and
 * runs where CUDA is absent (--nccl then says so). The few entry points are
 * declared here with their C types: no CUDA header is needed. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

#include "perf.h"

/* cudaMemcpyKind's values, as in every CUDA release. */
enum { H2D = 1, D2H = 2 };

static struct {
  int (*get_device_count)(int *n);
  int (*set_device)(int dev);
  int (*malloc_)(void **p, size_t bytes);
  int (*free_)(void *p);
  int (*memcpy_)(void *dst, const void *src, size_t bytes, int kind);
  int ndev;
} cu;

static int cuda_setup(int world) {
  if (cu.ndev < world)
    fprintf(stderr,
            "coll-perf: --nccl: %d ranks on %d CUDA device(s): NCCL needs "
            "one device per rank\n",
            world, cu.ndev);
  return cu.ndev >= world ? 0 : -1;
}

static void cuda_select(int rank) { cu.set_device(rank % cu.ndev); }

static void *cuda_alloc(int rank, size_t bytes) {
  void *p = NULL;
  cuda_select(rank);
  return cu.malloc_(&p, bytes) == 0 ? p : NULL;
}

static void cuda_free(void *p) {
  if (p != NULL) cu.free_(p);
}

static int cuda_upload(void *dev, const void *host, size_t bytes) {
  return cu.memcpy_(dev, host, bytes, H2D) == 0 ? 0 : -1;
}

static int cuda_download(void *host, const void *dev, size_t bytes) {
  return cu.memcpy_(host, dev, bytes, D2H) == 0 ? 0 : -1;
}

static const perf_device_t cuda_device = {
    "CUDA runtime", cuda_setup,    cuda_select, cuda_alloc, cuda_free,
    cuda_upload,    cuda_download, NULL,        NULL,       NULL};

const perf_device_t *perf_device_cuda(void) {
  static const char *const names[] = {"libcudart.so", "libcudart.so.13",
                                      "libcudart.so.12", "libcudart.so.11"};
  void *lib = NULL, *f[5];
  size_t i;
  for (i = 0; i < sizeof names / sizeof names[0] && lib == NULL; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "coll-perf: --nccl: no CUDA runtime (libcudart): %s\n",
            dlerror());
    return NULL;
  }
  f[0] = dlsym(lib, "cudaGetDeviceCount");
  f[1] = dlsym(lib, "cudaSetDevice");
  f[2] = dlsym(lib, "cudaMalloc");
  f[3] = dlsym(lib, "cudaFree");
  f[4] = dlsym(lib, "cudaMemcpy");
  for (i = 0; i < 5; i++)
    if (f[i] == NULL) {
      fprintf(stderr,
              "coll-perf: --nccl: the CUDA runtime lacks an entry "
              "point\n");
      return NULL;
    }
  /* POSIX lets a dlsym result become a function pointer. */
  *(void **)&cu.get_device_count = f[0];
  *(void **)&cu.set_device = f[1];
  *(void **)&cu.malloc_ = f[2];
  *(void **)&cu.free_ = f[3];
  *(void **)&cu.memcpy_ = f[4];
  if (cu.get_device_count(&cu.ndev) != 0 || cu.ndev <= 0) {
    fprintf(stderr, "coll-perf: --nccl: no usable CUDA device\n");
    return NULL;
  }
  return &cuda_device;
}
