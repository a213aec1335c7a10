/* SPDX-License-Identifier: Apache-2.0 */
/* shm_direct.c: the direct mode's addresses and single copies
 * (shm_direct.h). */
#include "algo/shm_direct.h"

#include <string.h>

void coll__shm_direct_publish(shm_run_t *S, const void *a, const void *b) {
  unsigned char *note = coll__rounds_note(S->R, S->self, S->b);
  memcpy(note + SHM_DIRECT_NOTE_PTRS, &a, sizeof a);
  memcpy(note + SHM_DIRECT_NOTE_PTRS + sizeof a, &b, sizeof b);
}

char *coll__shm_direct_ptr(const shm_run_t *S, int r, int k) {
  const unsigned char *note = coll__rounds_note(S->R, r, S->b);
  char *p;
  memcpy(&p, note + SHM_DIRECT_NOTE_PTRS + (size_t)k * sizeof p, sizeof p);
  return p;
}

coll_status_t coll__shm_direct_read(shm_run_t *S, int r, void *dst,
                                    const void *from, size_t len,
                                    const char *what) {
  coll_status_t s;
  if (len == 0) return COLL_OK;
  if (r == S->self) {
    memmove(dst, from, len);
    return COLL_OK;
  }
  s = coll__t_peer_read(S->run.ctx->t, r, dst, from, len);
  if (s != COLL_OK)
    return coll__algo_fail(&S->run, s, "round %llu, %s from rank %d",
                           (unsigned long long)S->round, what, r);
  return COLL_OK;
}
