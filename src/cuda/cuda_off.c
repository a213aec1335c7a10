/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_off.c: libcoll built without CUDA headers: every pointer is host
 * memory, so nothing is ever staged. */
#include "core/error.h"
#include "cuda/staging.h"

int coll__work_on_device(const coll_work_t *w) {
  (void)w;
  return 0;
}

coll_status_t coll__staged_run(void *cpu, const coll_work_t *w,
                               coll_host_run_fn run, atomic_int *aborted,
                               int64_t timeout_ms) {
  (void)cpu, (void)w, (void)run, (void)aborted, (void)timeout_ms;
  return coll__err(COLL_ERR_NOT_AVAILABLE,
                   "staging: libcoll was built without CUDA support");
}
