/* SPDX-License-Identifier: Apache-2.0 */
/* standin_cuda.c: the CUDA runtime half of the stand-in: devices (current
 * device per thread), contexts, registered "device" and pinned memory, and
 * installing the table (streams and events: standin_stream.c). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/gpu_table.h"
#include "cuda/staging_pool.h"
#include "standin_impl.h"

si_state_t si;
_Thread_local int si_cur_dev;
_Thread_local int si_group_depth;
_Thread_local int si_cur_ctx;
_Thread_local struct ncclComm *si_group_inits[SI_MAXR];
_Thread_local int si_group_ninit;
static coll_nccl_table_t table;
static uv_once_t si_once = UV_ONCE_INIT;
/* standin_bus_id: this thread's view of the devices' PCI bus ids ("" is
 * the default), valid while bus_gen is si.generation. */
static _Thread_local char bus_ids[SI_MAXDEV][SI_BUS_ID_MAX];
static _Thread_local unsigned bus_gen;

static void si_init(void) {
  uv_mutex_init(&si.mu);
  uv_cond_init(&si.cv);
}

void si_init_once(void) { uv_once(&si_once, si_init); }

void si_misuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(si.misuse, sizeof si.misuse, fmt, ap);
  va_end(ap);
  si.st.misuse++;
}

int64_t si_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void si_wait_a_bit(void) { uv_cond_timedwait(&si.cv, &si.mu, 1000000); }

static cudaError_t get_device_count(int *n) {
  SI_NO_DRIVER();
  if (si.cfg.ndev <= 0) return cudaErrorNoDevice;
  *n = si.cfg.ndev;
  return cudaSuccess;
}

static cudaError_t get_device(int *d) {
  SI_NO_DRIVER();
  *d = si_cur_dev;
  return cudaSuccess;
}

/* Contexts as this thread sees them (si_cur_ctx): 0 none, 1..SI_MAXDEV
 * device d's primary context as d + 1, from SI_CTX_MADE on one made by
 * standin_ctx_create (cuCtxCreate, a green context) on device
 * (v - SI_CTX_MADE) % SI_MAXDEV. */
#define SI_CTX_MADE 1000
static int ctx_made_next;

static int runtime_12(void) {
  return si.cfg.cuda_runtime == 0 || si.cfg.cuda_runtime >= 12000;
}

/* The runtime makes the current device's primary context on first use. */
void si_touch_ctx(void) {
  if (si_cur_ctx != 0) return;
  si_cur_ctx = si_cur_dev + 1;
  si.st.contexts |= 1u << si_cur_dev;
}

/* CUDA 12+: cudaSetDevice binds the device's primary context at once.
 * Before, it only chooses the device: the runtime binds its primary
 * context on the next call that needs one. */
static cudaError_t set_device(int d) {
  SI_NO_DRIVER();
  if (d < 0 || d >= si.cfg.ndev) return cudaErrorInvalidDevice;
  si_cur_dev = d;
  uv_mutex_lock(&si.mu);
  si_cur_ctx = 0;
  if (runtime_12()) si_touch_ctx();
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static CUresult ctx_get_current(CUcontext *ctx) {
  if (si.cfg.no_driver) return CUDA_ERROR_NOT_INITIALIZED;
  *ctx = si_cur_ctx ? (CUcontext)(uintptr_t)si_cur_ctx : NULL;
  return CUDA_SUCCESS;
}

CUcontext standin_ctx_create(int dev) {
  int v;
  uv_mutex_lock(&si.mu);
  v = SI_CTX_MADE + SI_MAXDEV * ctx_made_next++ + dev;
  uv_mutex_unlock(&si.mu);
  return (CUcontext)(uintptr_t)v;
}

static CUresult ctx_set_current(CUcontext ctx) {
  int v = (int)(uintptr_t)ctx;
  if (si.cfg.no_driver) return CUDA_ERROR_NOT_INITIALIZED;
  si_cur_ctx = v;
  if (v >= SI_CTX_MADE)
    si_cur_dev = (v - SI_CTX_MADE) % SI_MAXDEV;
  else if (v != 0)
    si_cur_dev = v - 1;
  else if (runtime_12())
    si_cur_dev = 0; /* the runtime answers device 0 again (unverified) */
  /* Before CUDA 12 the device the thread chose outlives its context. */
  return CUDA_SUCCESS;
}

const char *si_bus_id(int dev) {
  static const char none[] = "";
  if (dev < 0 || dev >= SI_MAXDEV) return none;
  if (bus_gen != si.generation) {
    memset(bus_ids, 0, sizeof bus_ids);
    bus_gen = si.generation;
  }
  /* Device d of a machine that shows every GPU: bus 0x18 + 8 d, as on a
   * board of eight. */
  if (bus_ids[dev][0] == '\0')
    snprintf(bus_ids[dev], sizeof bus_ids[dev], "0000:%02x:00.0",
             0x18 + 8 * dev);
  return bus_ids[dev];
}

void standin_bus_id(int dev, const char *id) {
  if (dev < 0 || dev >= SI_MAXDEV) return;
  (void)si_bus_id(dev); /* the table of this install */
  if (id == NULL)
    bus_ids[dev][0] = '\0';
  else
    snprintf(bus_ids[dev], sizeof bus_ids[dev], "%s", id);
}

/* As the runtime: "0000:3b:00.0", at most len bytes with the NUL. */
static cudaError_t device_get_pci_bus_id(char *id, int len, int dev) {
  SI_NO_DRIVER();
  if (dev < 0 || dev >= si.cfg.ndev) return cudaErrorInvalidDevice;
  if (id == NULL || len <= 0) return cudaErrorInvalidValue;
  snprintf(id, (size_t)len, "%s", si_bus_id(dev));
  return cudaSuccess;
}

static cudaError_t runtime_version(int *v) {
  *v = si.cfg.cuda_runtime != 0 ? si.cfg.cuda_runtime : 13000;
  return cudaSuccess;
}

static cudaError_t driver_version(int *v) {
  SI_NO_DRIVER();
  *v = 13000;
  return cudaSuccess;
}

static const char *error_string(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    default: return "stand-in CUDA error";
  }
}

static cudaError_t get_last_error(void) { return cudaSuccess; }

static si_mem_t *mem_find(const void *p) {
  si_mem_t *m;
  for (m = si.mem; m != NULL; m = m->next)
    if ((const char *)p >= m->p && (const char *)p < m->p + m->bytes) return m;
  return NULL;
}

static cudaError_t pointer_attributes(struct cudaPointerAttributes *a,
                                      const void *p) {
  si_mem_t *m;
  SI_NO_DRIVER();
  uv_mutex_lock(&si.mu);
  m = mem_find(p);
  a->type = m == NULL    ? cudaMemoryTypeUnregistered
            : m->dev < 0 ? cudaMemoryTypeHost
                         : cudaMemoryTypeDevice;
  a->device = m != NULL && m->dev >= 0 ? m->dev : 0;
  uv_mutex_unlock(&si.mu);
  return cudaSuccess;
}

static void *mem_add(size_t bytes, int dev) {
  si_mem_t *m = calloc(1, sizeof *m);
  m->p = calloc(1, bytes ? bytes : 1);
  m->bytes = bytes ? bytes : 1;
  m->dev = dev;
  uv_mutex_lock(&si.mu);
  m->next = si.mem;
  si.mem = m;
  if (dev < 0) si.st.host_allocs_live++;
  uv_mutex_unlock(&si.mu);
  return m->p;
}

static int mem_remove(void *p) {
  si_mem_t **pp, *m;
  int found = 0;
  uv_mutex_lock(&si.mu);
  for (pp = &si.mem; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->p == p) {
      m = *pp;
      *pp = m->next;
      if (m->dev < 0) si.st.host_allocs_live--;
      free(m->p);
      free(m);
      found = 1;
      break;
    }
  }
  if (!found) si_misuse("free of unknown memory %p", p);
  uv_mutex_unlock(&si.mu);
  return found;
}

static cudaError_t host_alloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  SI_NO_DRIVER();
  *p = mem_add(bytes, -1);
  return cudaSuccess;
}

static cudaError_t free_host(void *p) {
  SI_NO_DRIVER();
  return mem_remove(p) ? cudaSuccess : cudaErrorInvalidValue;
}

static cudaError_t dev_malloc(void **p, size_t bytes) {
  SI_NO_DRIVER();
  *p = mem_add(bytes, si_cur_dev);
  return cudaSuccess;
}

static cudaError_t dev_free(void *p) {
  SI_NO_DRIVER();
  return mem_remove(p) ? cudaSuccess : cudaErrorInvalidValue;
}

void *standin_dev_alloc(int dev, size_t bytes) { return mem_add(bytes, dev); }
void standin_dev_free(void *p) { mem_remove(p); }

void si_cuda_fill(coll_nccl_table_t *t) {
  t->have_cuda = 1;
  t->cuda_get_device_count = get_device_count;
  t->cuda_get_device = get_device;
  t->cuda_set_device = set_device;
  t->cuda_device_get_pci_bus_id = device_get_pci_bus_id;
  t->cuda_get_error_string = error_string;
  t->cuda_get_last_error = get_last_error;
  t->cuda_runtime_get_version = runtime_version;
  t->cuda_driver_get_version = driver_version;
  t->cu_ctx_get_current = ctx_get_current;
  t->cu_ctx_set_current = ctx_set_current;
  t->cuda_pointer_get_attributes = pointer_attributes;
  t->cuda_host_alloc = host_alloc;
  t->cuda_free_host = free_host;
  t->cuda_malloc = dev_malloc;
  t->cuda_free = dev_free;
  si_stream_fill(t);
}

void standin_install(const standin_config_t *cfg) {
  si_init_once();
  uv_mutex_lock(&si.mu);
  si.cfg = *cfg;
  if (si.cfg.ndev > SI_MAXDEV) si.cfg.ndev = SI_MAXDEV;
  if (si.cfg.version == 0) si.cfg.version = 22809;
  si.hang = cfg->hang;
  si.generation++;
  si.stalled = 0;
  si.fail_next = ncclSuccess;
  si.fail_skip = 0;
  si.hook_fn = NULL;
  si.fail_init_rank = -1;
  memset(&si.st, 0, sizeof si.st);
  si.misuse[0] = '\0';
  si.last_error[0] = '\0';
  si_streams_install();
  uv_mutex_unlock(&si.mu);
  si_cur_dev = 0;
  si_cur_ctx = 0;
  si_group_depth = 0;
  si_group_ninit = 0;
  si_group_naborts = 0;

  memset(&table, 0, sizeof table);
  table.name = "stand-in";
  si_cuda_fill(&table);
  if (cfg->no_nccl)
    snprintf(table.nccl_why, sizeof table.nccl_why,
             "NCCL could not be loaded (libnccl.so.2): stand-in without NCCL");
  else
    si_nccl_fill(&table);
  coll__nccl_table_install(&table);
}

void standin_uninstall(void) {
  si_mem_t *m;
  /* Pooled staging slabs came from this table: free them through it. */
  coll__slab_pool_clear();
  coll__nccl_table_install(NULL);
  uv_mutex_lock(&si.mu);
  si_nccl_free_all();
  si_streams_free_all();
  while ((m = si.mem) != NULL) {
    si.mem = m->next;
    free(m->p);
    free(m);
  }
  uv_mutex_unlock(&si.mu);
}

void standin_stats(standin_stats_t *out) {
  uv_mutex_lock(&si.mu);
  *out = si.st;
  uv_mutex_unlock(&si.mu);
}

const char *standin_misuse_text(void) { return si.misuse; }
