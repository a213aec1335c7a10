/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_off.c: libcoll built without CUDA headers: every pointer is host
 * memory, so nothing is ever staged. */
#include "core/error.h"
#include "cuda/staged_p2p.h"
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

coll_status_t coll__staged_p2p_start(coll_transport_t *tp, const coll_work_t *w,
                                     coll_staged_p2p_t **out) {
  (void)tp, (void)w;
  *out = NULL;
  return coll__err(COLL_ERR_NOT_AVAILABLE,
                   "staging: libcoll was built without CUDA support");
}

coll_status_t coll__staged_p2p_progress(coll_staged_p2p_t *sp, int may_post,
                                        int64_t wait_ms, int *done,
                                        size_t *len) {
  (void)sp, (void)may_post, (void)wait_ms;
  *done = 1;
  *len = 0;
  return COLL_ERR_NOT_AVAILABLE;
}

int coll__staged_p2p_posted(const coll_staged_p2p_t *sp) {
  (void)sp;
  return 0;
}

int coll__staged_p2p_in_transport(const coll_staged_p2p_t *sp) {
  (void)sp;
  return 0;
}

void coll__staged_p2p_end(coll_staged_p2p_t *sp) { (void)sp; }
