/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_status.c: the one place where ncclResult_t and cudaError_t become
 * coll_status_t, each with the library's own text. */
#include <stdio.h>

#include "core/error.h"
#include "cuda/gpu_table.h"

coll_status_t coll__nccl_result(const coll_nccl_table_t *t, ncclResult_t r,
                                ncclComm_t c, const char *what) {
  const char *text = "unknown";
  const char *detail = NULL;
  coll_status_t s;
  if (r == ncclSuccess) return COLL_OK;
  if (t->nccl_get_error_string != NULL) text = t->nccl_get_error_string(r);
  if (c != NULL && t->nccl_get_last_error != NULL)
    detail = t->nccl_get_last_error(c);
  /* A remote error means a peer failed or went away: callers treat that as
   * a lost peer, like the CPU transports do. Everything else is NCCL's. */
  s = r == ncclRemoteError ? COLL_ERR_PEER_LOST : COLL_ERR_BACKEND;
  if (detail != NULL && detail[0] != '\0')
    return coll__err(s, "%s: NCCL error %d (%s): %s", what, (int)r, text,
                     detail);
  return coll__err(s, "%s: NCCL error %d (%s)", what, (int)r, text);
}

coll_status_t coll__cuda_result(const coll_nccl_table_t *t, cudaError_t e,
                                const char *what) {
  const char *text = "unknown";
  coll_status_t s;
  if (e == cudaSuccess) return COLL_OK;
  if (t->cuda_get_error_string != NULL) text = t->cuda_get_error_string(e);
  switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
      s = COLL_ERR_NOT_AVAILABLE; /* no driver / no device: nothing to run */
      break;
    case cudaErrorMemoryAllocation: s = COLL_ERR_NO_MEMORY; break;
    default: s = COLL_ERR_BACKEND; break;
  }
  return coll__err(s, "%s: CUDA error %d (%s)", what, (int)e, text);
}

int coll__nccl_version_code(int major, int minor, int patch) {
  /* NCCL changed its encoding at 2.9: 2.8.4 is 2804, 2.9.6 is 20906. */
  if (major <= 2 && minor <= 8) return major * 1000 + minor * 100 + patch;
  return major * 10000 + minor * 100 + patch;
}

void coll__nccl_version_text(int code, char *buf, size_t cap) {
  if (code >= 10000)
    snprintf(buf, cap, "%d.%d.%d", code / 10000, (code / 100) % 100,
             code % 100);
  else
    snprintf(buf, cap, "%d.%d.%d", code / 1000, (code / 100) % 10, code % 100);
}
