/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_table.h: every NCCL and CUDA runtime entry point libcoll uses, reached
 * through one table. In production the table is filled by dlopen (libcoll.so
 * has no link dependency on CUDA); tests install a host-memory stand-in. */
#ifndef COLL_CUDA_GPU_TABLE_H
#define COLL_CUDA_GPU_TABLE_H

/* nccl.h declares `ncclGroupStart()` without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "coll.h"

#define COLL_NCCL_WHY_MAX 320

/* ncclCommShrink's flags (nccl.h 2.27.3+), spelled out here so the backend
 * builds against an older nccl.h and looks the entry point up at run time. */
#ifndef NCCL_SHRINK_DEFAULT
#define NCCL_SHRINK_DEFAULT 0x00
#endif
#ifndef NCCL_SHRINK_ABORT
#define NCCL_SHRINK_ABORT 0x01
#endif
#ifndef NCCL_REVOKE_DEFAULT
#define NCCL_REVOKE_DEFAULT 0x00
#endif

/* Two halves, each present or not: the CUDA runtime (enough for staging
 * device buffers on CPU comms) and NCCL. A missing half carries the reason in
 * its *_why text; its slots are then NULL. */
typedef struct coll_nccl_table {
  const char *name; /* what filled the table, for logs */

  int have_cuda;
  char cuda_why[COLL_NCCL_WHY_MAX];
  cudaError_t (*cuda_get_device_count)(int *count);
  cudaError_t (*cuda_get_device)(int *dev);
  cudaError_t (*cuda_set_device)(int dev);
  /* "0000:3b:00.0": what tells one GPU of a host from another whatever
   * CUDA_VISIBLE_DEVICES numbers it (NCCL's duplicate-GPU check compares
   * the same, init.cc:903-907). */
  cudaError_t (*cuda_device_get_pci_bus_id)(char *id, int len, int dev);
  const char *(*cuda_get_error_string)(cudaError_t e);
  cudaError_t (*cuda_get_last_error)(void);
  cudaError_t (*cuda_stream_create)(cudaStream_t *s);
  /* libcoll's own streams are cudaStreamNonBlocking: they never wait for,
   * and are never waited on by, the legacy default stream. */
  cudaError_t (*cuda_stream_create_with_flags)(cudaStream_t *s, unsigned flags);
  cudaError_t (*cuda_stream_wait_event)(cudaStream_t s, cudaEvent_t e,
                                        unsigned flags);
  cudaError_t (*cuda_stream_destroy)(cudaStream_t s);
  cudaError_t (*cuda_stream_synchronize)(cudaStream_t s);
  cudaError_t (*cuda_stream_query)(cudaStream_t s);
  cudaError_t (*cuda_event_create)(cudaEvent_t *e, unsigned flags);
  cudaError_t (*cuda_event_record)(cudaEvent_t e, cudaStream_t s);
  cudaError_t (*cuda_event_query)(cudaEvent_t e);
  cudaError_t (*cuda_event_destroy)(cudaEvent_t e);
  /* attr points at COLL_CUDA_ATTR_BYTES zeroed bytes (see cuda_util.c). */
  cudaError_t (*cuda_pointer_get_attributes)(struct cudaPointerAttributes *a,
                                             const void *p);
  cudaError_t (*cuda_memcpy_async)(void *dst, const void *src, size_t bytes,
                                   enum cudaMemcpyKind kind, cudaStream_t s);
  cudaError_t (*cuda_host_alloc)(void **p, size_t bytes, unsigned flags);
  cudaError_t (*cuda_free_host)(void *p);
  cudaError_t (*cuda_malloc)(void **p, size_t bytes);
  cudaError_t (*cuda_free)(void *p);
  cudaError_t (*cuda_runtime_get_version)(int *v);
  cudaError_t (*cuda_driver_get_version)(int *v);
  /* Optional, from the driver library the runtime loaded: whether this
   * thread has a current context at all, so a device switch can be undone
   * without making a context on device 0 (cudaSetDevice(0) would). */
  CUresult (*cu_ctx_get_current)(CUcontext *ctx);
  CUresult (*cu_ctx_set_current)(CUcontext ctx);

  int have_nccl;
  char nccl_why[COLL_NCCL_WHY_MAX];
  ncclResult_t (*nccl_get_version)(int *version);
  const char *(*nccl_get_error_string)(ncclResult_t r);
  const char *(*nccl_get_last_error)(ncclComm_t c); /* optional (>= 2.13) */
  ncclResult_t (*nccl_get_unique_id)(ncclUniqueId *id);
  /* Every comm is made nonblocking (config.blocking = 0, NCCL >= 2.14):
   * calls that would wait for peers return ncclInProgress and
   * ncclCommGetAsyncError tells when they are done. */
  ncclResult_t (*nccl_comm_init_rank_config)(ncclComm_t *c, int nranks,
                                             ncclUniqueId id, int rank,
                                             ncclConfig_t *config);
  ncclResult_t (*nccl_comm_abort)(ncclComm_t c);
  ncclResult_t (*nccl_comm_destroy)(ncclComm_t c);
  ncclResult_t (*nccl_comm_get_async_error)(ncclComm_t c, ncclResult_t *e);
  ncclResult_t (*nccl_all_reduce)(const void *send, void *recv, size_t count,
                                  ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t c, cudaStream_t s);
  ncclResult_t (*nccl_broadcast)(const void *send, void *recv, size_t count,
                                 ncclDataType_t dt, int root, ncclComm_t c,
                                 cudaStream_t s);
  ncclResult_t (*nccl_reduce)(const void *send, void *recv, size_t count,
                              ncclDataType_t dt, ncclRedOp_t op, int root,
                              ncclComm_t c, cudaStream_t s);
  ncclResult_t (*nccl_all_gather)(const void *send, void *recv,
                                  size_t sendcount, ncclDataType_t dt,
                                  ncclComm_t c, cudaStream_t s);
  ncclResult_t (*nccl_reduce_scatter)(const void *send, void *recv,
                                      size_t recvcount, ncclDataType_t dt,
                                      ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t s);
  ncclResult_t (*nccl_send)(const void *buf, size_t count, ncclDataType_t dt,
                            int peer, ncclComm_t c, cudaStream_t s);
  ncclResult_t (*nccl_recv)(void *buf, size_t count, ncclDataType_t dt,
                            int peer, ncclComm_t c, cudaStream_t s);
  ncclResult_t (*nccl_group_start)(void);
  ncclResult_t (*nccl_group_end)(void);
  ncclResult_t (*nccl_red_op_create_pre_mul_sum)(ncclRedOp_t *op, void *scalar,
                                                 ncclDataType_t dt,
                                                 ncclScalarResidence_t res,
                                                 ncclComm_t c);
  ncclResult_t (*nccl_red_op_destroy)(ncclRedOp_t op, ncclComm_t c);
  /* Optional (>= 2.27.3): a comm of the ranks not in `exclude`, renumbered
   * in order; every survivor passes the same list. NCCL_SHRINK_ABORT ends
   * the parent's work first (after a failure). */
  ncclResult_t (*nccl_comm_shrink)(ncclComm_t c, int *exclude, int nexclude,
                                   ncclComm_t *out, ncclConfig_t *config,
                                   int flags);
  /* Optional (>= 2.18): a comm of the ranks that pass the same color,
   * ordered by key; every rank of c calls it. Like shrink, the new comm is
   * written to *out when NCCL's job ends, and c is ncclInProgress until
   * then. */
  ncclResult_t (*nccl_comm_split)(ncclComm_t c, int color, int key,
                                  ncclComm_t *out, ncclConfig_t *config);
  /* Optional (>= 2.28): stops c's work without freeing it; c is
   * ncclInProgress until its streams passed that work, then shrink, split
   * and destroy may follow. */
  ncclResult_t (*nccl_comm_revoke)(ncclComm_t c, int flags);
} coll_nccl_table_t;

/* The table in use: the installed one, or the libraries loaded by dlopen.
 * Never NULL; a half may be missing. Loads nothing by itself. Any thread. */
const coll_nccl_table_t *coll__nccl_table(void);

/* The table with its CUDA half loaded and a driver and a device usable, or
 * COLL_ERR_NOT_AVAILABLE saying which piece is missing ("what: ..."). */
coll_status_t coll__cuda_ready(const char *what, const coll_nccl_table_t **out);
/* The same, with NCCL loaded too. */
coll_status_t coll__nccl_ready(const char *what, const coll_nccl_table_t **out);

/* The table if this process already uses CUDA (the driver library is
 * loaded, or a table is installed) and the CUDA runtime loads with a device
 * visible; NULL otherwise. Never creates a CUDA context on a process that has
 * none, and leaves this thread's error text as it was. Any thread. */
const coll_nccl_table_t *coll__cuda_if_in_use(void);

/* Installs t in place of the loaded libraries (NULL: back to them) and
 * forgets what was loaded, so the next use loads again. For tests; no call
 * may be in flight. */
void coll__nccl_table_install(const coll_nccl_table_t *t);

/* The one place each where NCCL's and CUDA's codes become coll_status_t:
 * records "what: NCCL error N (text): detail" and returns the status. c may
 * be NULL (no comm detail). */
coll_status_t coll__nccl_result(const coll_nccl_table_t *t, ncclResult_t r,
                                ncclComm_t c, const char *what);
coll_status_t coll__cuda_result(const coll_nccl_table_t *t, cudaError_t e,
                                const char *what);

/* "2.18.3" from NCCL's version code (both the old and the new encoding). */
void coll__nccl_version_text(int code, char *buf, size_t cap);
/* NCCL_VERSION(major, minor, patch) as the library reports it. */
int coll__nccl_version_code(int major, int minor, int patch);

#endif
