/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_load.c: fills the NCCL/CUDA table by dlopen (libnccl.so.2 or
 * COLL_NCCL_LIBRARY, and the CUDA runtime), so libcoll.so links to neither,
 * and tells callers exactly which piece is missing. */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/gpu_table.h"

/* The CUDA runtime this file was compiled against comes first; other majors
 * follow because the few entry points used here kept their ABI. */
#define CUDART_MAJOR (CUDART_VERSION / 1000)

static uv_once_t load_once = UV_ONCE_INIT;
static uv_mutex_t load_mu;
static coll_nccl_table_t loaded;
/* 1 once a half was tried (its fields are then final); release/acquire so
 * a reader that sees 1 sees the fields. */
static atomic_int cuda_tried, nccl_tried;
static _Atomic(const coll_nccl_table_t *) installed;

static void load_init(void) { uv_mutex_init(&load_mu); }

const coll_nccl_table_t *coll__nccl_table(void) {
  const coll_nccl_table_t *t = atomic_load(&installed);
  return t != NULL ? t : &loaded;
}

void coll__nccl_table_install(const coll_nccl_table_t *t) {
  uv_once(&load_once, load_init);
  uv_mutex_lock(&load_mu);
  memset(&loaded, 0, sizeof loaded);
  atomic_store(&cuda_tried, 0);
  atomic_store(&nccl_tried, 0);
  atomic_store(&installed, t);
  uv_mutex_unlock(&load_mu);
}

/* An entry point and the table slot it fills. */
typedef struct entry {
  const char *name;
  size_t slot; /* offsetof(coll_nccl_table_t, ...) */
  int optional;
} entry_t;

#define SLOT(field) offsetof(coll_nccl_table_t, field)

static const entry_t cuda_entries[] = {
    {"cudaGetDeviceCount", SLOT(cuda_get_device_count), 0},
    {"cudaGetDevice", SLOT(cuda_get_device), 0},
    {"cudaSetDevice", SLOT(cuda_set_device), 0},
    {"cudaDeviceGetPCIBusId", SLOT(cuda_device_get_pci_bus_id), 0},
    {"cudaGetErrorString", SLOT(cuda_get_error_string), 0},
    {"cudaGetLastError", SLOT(cuda_get_last_error), 0},
    {"cudaStreamCreate", SLOT(cuda_stream_create), 0},
    {"cudaStreamCreateWithFlags", SLOT(cuda_stream_create_with_flags), 0},
    {"cudaStreamWaitEvent", SLOT(cuda_stream_wait_event), 0},
    {"cudaStreamDestroy", SLOT(cuda_stream_destroy), 0},
    {"cudaStreamSynchronize", SLOT(cuda_stream_synchronize), 0},
    {"cudaStreamQuery", SLOT(cuda_stream_query), 0},
    {"cudaEventCreateWithFlags", SLOT(cuda_event_create), 0},
    {"cudaEventRecord", SLOT(cuda_event_record), 0},
    {"cudaEventQuery", SLOT(cuda_event_query), 0},
    {"cudaEventDestroy", SLOT(cuda_event_destroy), 0},
    {"cudaPointerGetAttributes", SLOT(cuda_pointer_get_attributes), 0},
    {"cudaMemcpyAsync", SLOT(cuda_memcpy_async), 0},
    {"cudaHostAlloc", SLOT(cuda_host_alloc), 0},
    {"cudaFreeHost", SLOT(cuda_free_host), 0},
    {"cudaMalloc", SLOT(cuda_malloc), 0},
    {"cudaFree", SLOT(cuda_free), 0},
    {"cudaRuntimeGetVersion", SLOT(cuda_runtime_get_version), 0},
    {"cudaDriverGetVersion", SLOT(cuda_driver_get_version), 0},
};

/* Pre-multiplied sums arrived in 2.11, ncclGetLastError in 2.13,
 * ncclCommSplit in 2.18, ncclCommShrink in 2.27.3 and ncclCommRevoke in
 * 2.28; older libraries still serve the rest (premul_sum and comm_shrink
 * then report the version, and an abort falls back to ncclCommAbort). */
static const entry_t nccl_entries[] = {
    {"ncclGetVersion", SLOT(nccl_get_version), 0},
    {"ncclGetErrorString", SLOT(nccl_get_error_string), 0},
    {"ncclGetLastError", SLOT(nccl_get_last_error), 1},
    {"ncclGetUniqueId", SLOT(nccl_get_unique_id), 0},
    {"ncclCommInitRankConfig", SLOT(nccl_comm_init_rank_config), 0},
    {"ncclCommAbort", SLOT(nccl_comm_abort), 0},
    {"ncclCommDestroy", SLOT(nccl_comm_destroy), 0},
    {"ncclCommGetAsyncError", SLOT(nccl_comm_get_async_error), 0},
    {"ncclAllReduce", SLOT(nccl_all_reduce), 0},
    {"ncclBroadcast", SLOT(nccl_broadcast), 0},
    {"ncclReduce", SLOT(nccl_reduce), 0},
    {"ncclAllGather", SLOT(nccl_all_gather), 0},
    {"ncclReduceScatter", SLOT(nccl_reduce_scatter), 0},
    {"ncclSend", SLOT(nccl_send), 0},
    {"ncclRecv", SLOT(nccl_recv), 0},
    {"ncclGroupStart", SLOT(nccl_group_start), 0},
    {"ncclGroupEnd", SLOT(nccl_group_end), 0},
    {"ncclRedOpCreatePreMulSum", SLOT(nccl_red_op_create_pre_mul_sum), 1},
    {"ncclRedOpDestroy", SLOT(nccl_red_op_destroy), 1},
    {"ncclCommShrink", SLOT(nccl_comm_shrink), 1},
    {"ncclCommSplit", SLOT(nccl_comm_split), 1},
    {"ncclCommRevoke", SLOT(nccl_comm_revoke), 1},
};

/* Fills the slots from lib (POSIX lets a dlsym result become a function
 * pointer); -1 with `why` naming the first mandatory entry point missing. */
static int resolve(void *lib, const entry_t *e, size_t n, coll_nccl_table_t *t,
                   char *why) {
  size_t i;
  for (i = 0; i < n; i++) {
    void *p = dlsym(lib, e[i].name);
    memcpy((char *)t + e[i].slot, &p, sizeof p);
    if (p == NULL && !e[i].optional) {
      snprintf(why, COLL_NCCL_WHY_MAX, "entry point %s not found", e[i].name);
      return -1;
    }
  }
  return 0;
}

typedef cudaError_t (*version_fn)(int *v);

/* 1 if the driver is new enough for the runtime in lib (or there is no
 * driver at all, which cudaGetDeviceCount reports better later). */
static int driver_supports(void *lib, const char *name, char *why, size_t cap) {
  version_fn rt = (version_fn)dlsym(lib, "cudaRuntimeGetVersion");
  version_fn drv = (version_fn)dlsym(lib, "cudaDriverGetVersion");
  int have = 0, need = 0;
  if (rt == NULL || drv == NULL) return 1; /* resolve() names what is missing */
  if (rt(&need) != cudaSuccess || drv(&have) != cudaSuccess || have == 0)
    return 1;
  if (have >= need) return 1;
  snprintf(why, cap,
           "%.32s needs a driver for CUDA %d.%d, the driver has %d.%d; ", name,
           need / 1000, (need % 1000) / 10, have / 1000, (have % 1000) / 10);
  return 0;
}

/* The first runtime that loads and that the driver supports: one already in
 * the process (a framework's) first, then by name. A runtime newer than the
 * driver is passed over for an older major (M5 of the NCCL review). */
static void *open_cudart(char *tried, size_t cap) {
  char names[6][32], skipped[COLL_NCCL_WHY_MAX] = "";
  int n = 0, major, pass, i;
  void *lib;
  snprintf(names[n++], sizeof names[0], "libcudart.so.%d", CUDART_MAJOR);
  snprintf(names[n++], sizeof names[0], "libcudart.so");
  for (major = 13; major >= 11; major--)
    if (major != CUDART_MAJOR)
      snprintf(names[n++], sizeof names[0], "libcudart.so.%d", major);
  for (pass = 0; pass < 2; pass++) {
    for (i = 0; i < n; i++) {
      char why[160];
      lib = dlopen(names[i], RTLD_NOW | (pass == 0 ? RTLD_NOLOAD : 0));
      if (lib == NULL) continue;
      if (!driver_supports(lib, names[i], why, sizeof why)) {
        size_t len = strlen(skipped);
        snprintf(skipped + len, sizeof skipped - len, "%s", why);
        dlclose(lib);
        continue;
      }
      COLL_INFO(COLL_LOG_NCCL, "CUDA runtime: %s", names[i]);
      return lib;
    }
  }
  snprintf(tried, cap, "%s%s, %s, %s, %s", skipped, names[0], names[1],
           names[2], names[3]);
  return NULL;
}

/* The driver's context calls, from the libcuda the runtime just loaded
 * (optional: without them device switches are undone the runtime's way). */
static void resolve_driver(coll_nccl_table_t *t) {
  void *drv, *get, *set;
  int n = 0;
  t->cuda_get_device_count(&n); /* makes the runtime load its driver */
  drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (drv == NULL) return;
  get = dlsym(drv, "cuCtxGetCurrent");
  set = dlsym(drv, "cuCtxSetCurrent");
  if (get == NULL || set == NULL) return;
  memcpy(&t->cu_ctx_get_current, &get, sizeof get);
  memcpy(&t->cu_ctx_set_current, &set, sizeof set);
}

static void load_cuda(coll_nccl_table_t *t) {
  char tried[COLL_NCCL_WHY_MAX - 64];
  void *lib = open_cudart(tried, sizeof tried);
  if (lib == NULL) {
    snprintf(t->cuda_why, sizeof t->cuda_why,
             "no usable CUDA runtime library (tried %s)", tried);
    return;
  }
  if (resolve(lib, cuda_entries, sizeof cuda_entries / sizeof cuda_entries[0],
              t, t->cuda_why) != 0)
    return;
  resolve_driver(t);
  /* The library stays loaded for the life of the process: streams and
   * events made through it may outlive any one comm. */
  t->have_cuda = 1;
}

static void load_nccl(coll_nccl_table_t *t) {
  const char *path = coll__knob_text(COLL_ENV_NCCL_LIBRARY);
  void *lib;
  char *why = t->nccl_why;
  if (path == NULL) path = "libnccl.so.2";
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(why, COLL_NCCL_WHY_MAX,
             "NCCL could not be loaded (%.100s%s): %.160s", path,
             coll__knob_text(COLL_ENV_NCCL_LIBRARY) ? ", from COLL_NCCL_LIBRARY"
                                                    : "",
             dlerror());
    return;
  }
  if (resolve(lib, nccl_entries, sizeof nccl_entries / sizeof nccl_entries[0],
              t, why) != 0) {
    char tmp[COLL_NCCL_WHY_MAX];
    snprintf(tmp, sizeof tmp, "%.100s: %.180s (too old an NCCL?)", path, why);
    memcpy(why, tmp, sizeof tmp);
    return;
  }
  t->have_nccl = 1;
  COLL_INFO(COLL_LOG_NCCL, "NCCL loaded from %s", path);
}

static const coll_nccl_table_t *ensure(atomic_int *tried,
                                       void (*load)(coll_nccl_table_t *)) {
  const coll_nccl_table_t *t = atomic_load(&installed);
  if (t != NULL) return t;
  if (atomic_load_explicit(tried, memory_order_acquire)) return &loaded;
  uv_once(&load_once, load_init);
  uv_mutex_lock(&load_mu);
  if (!atomic_load_explicit(tried, memory_order_relaxed)) {
    load(&loaded);
    loaded.name = "dlopen";
    atomic_store_explicit(tried, 1, memory_order_release);
  }
  uv_mutex_unlock(&load_mu);
  return &loaded;
}

coll_status_t coll__cuda_ready(const char *what,
                               const coll_nccl_table_t **out) {
  const coll_nccl_table_t *t = ensure(&cuda_tried, load_cuda);
  char text[COLL_ERRMSG_MAX];
  cudaError_t e;
  int n = 0;
  if (!t->have_cuda)
    return coll__err(COLL_ERR_NOT_AVAILABLE, "%s: %s", what, t->cuda_why);
  e = t->cuda_get_device_count(&n);
  if (e != cudaSuccess) {
    coll__cuda_result(t, e, "cudaGetDeviceCount");
    coll__err_save(text);
    if (e == cudaErrorNoDevice)
      return coll__err(COLL_ERR_NOT_AVAILABLE, "%s: no CUDA device (%s)", what,
                       text);
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "%s: no usable CUDA driver or device (%s)", what, text);
  }
  if (n <= 0)
    return coll__err(COLL_ERR_NOT_AVAILABLE, "%s: no CUDA device is visible",
                     what);
  *out = t;
  return COLL_OK;
}

coll_status_t coll__nccl_ready(const char *what,
                               const coll_nccl_table_t **out) {
  const coll_nccl_table_t *t = ensure(&nccl_tried, load_nccl);
  if (!t->have_nccl)
    return coll__err(COLL_ERR_NOT_AVAILABLE, "%s: %s", what, t->nccl_why);
  return coll__cuda_ready(what, out);
}

/* One walk of the link map. dlpi_adds counts every object loaded since
 * the process started, so while it is what the last fruitless walk saw,
 * the driver is still absent and the walk stops at the first object: the
 * check costs one callback per collective instead of one per object. */
typedef struct driver_walk {
  int first;
  unsigned long long adds;
} driver_walk_t;
static _Atomic unsigned long long walked_adds; /* 0: no fruitless walk yet */

static int is_driver(struct dl_phdr_info *info, size_t size, void *data) {
  driver_walk_t *w = data;
  if (w->first) {
    w->first = 0;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs)) {
      w->adds = info->dlpi_adds;
      if (w->adds != 0 && w->adds == atomic_load(&walked_adds)) return -1;
    }
  }
  return info->dlpi_name != NULL &&
         strstr(info->dlpi_name, "libcuda.so") != NULL;
}

const coll_nccl_table_t *coll__cuda_if_in_use(void) {
  static atomic_int driver_seen;
  const coll_nccl_table_t *t = NULL;
  char keep[COLL_ERRMSG_MAX];
  /* Device memory needs the driver: a process that has not loaded
   * libcuda.so.1 holds none, and asking the runtime would create a context
   * (and GPU memory) on behalf of a CPU-only user. */
  if (atomic_load(&installed) == NULL && !atomic_load(&driver_seen)) {
    /* Walk the loaded objects instead of dlopen(RTLD_NOLOAD): that one
     * searches the library path (a dozen failed openat per collective on a
     * CPU-only machine), this one only reads the link map. */
    driver_walk_t w = {1, 0};
    int found = dl_iterate_phdr(is_driver, &w);
    if (found != 1) {
      if (found == 0) atomic_store(&walked_adds, w.adds);
      return NULL;
    }
    atomic_store(&driver_seen, 1);
  }
  coll__err_save(keep);
  if (coll__cuda_ready("staging", &t) != COLL_OK) t = NULL;
  coll__err_restore(keep);
  return t;
}
