/* SPDX-License-Identifier: Apache-2.0 */
/* broadcast_shm.c: broadcast designed for shared memory. In rounds of a
 * slot, the root copies the next piece into its slot and every other rank
 * copies it out: each byte is written once into shared memory and read
 * once by each rank, where the chain over the shared-memory transport's
 * messages copies it in and out at every hop.
 *
 * Large buffers between processes (shm_direct.h): one round, the root
 * publishes where its buffer is and every other rank copies it straight
 * out of the root's memory, one copy through the kernel; the root returns
 * once every rank posted OUT. */
#include <string.h>

#include "algo/shm_direct.h"
#include "algo/shm_round.h"

static coll_status_t single_copy(shm_run_t *S, void *buf, size_t bytes,
                                 int root) {
  COLL_CHECK(coll__shm_round_next(S));
  if (S->self == root) coll__shm_direct_publish(S, buf, NULL);
  coll__shm_round_post(S, COLL_T_FLAG_IN);
  COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_IN, "the root's address"));
  if (S->self != root)
    COLL_CHECK(coll__shm_direct_read(S, root, buf,
                                     coll__shm_direct_ptr(S, root, 0), bytes,
                                     "the root's buffer"));
  coll__shm_round_post(S, COLL_T_FLAG_OUT);
  if (S->self == root)
    COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_OUT, "readers"));
  return coll__algo_done(&S->run);
}

coll_status_t coll__broadcast_shm(const coll_algo_ctx_t *ctx, void *buf,
                                  size_t bytes, int root) {
  shm_run_t S;
  size_t done = 0;
  COLL_CHECK(coll__shm_round_init(&S, ctx, "shm broadcast"));
  if (bytes == 0 || S.world < 2) return COLL_OK;
  if (coll__shm_direct_copies(&S, bytes))
    return single_copy(&S, buf, bytes, root);
  while (done < bytes) {
    size_t n = bytes - done < S.R->slot_bytes ? bytes - done : S.R->slot_bytes;
    if (coll__shm_round_next(&S) != COLL_OK) break;
    if (S.self == root)
      memcpy(coll__shm_round_slot(&S, root), (char *)buf + done, n);
    coll__shm_round_post(&S, COLL_T_FLAG_IN);
    if (coll__shm_round_wait(&S, COLL_T_FLAG_IN, "the root's piece") != COLL_OK)
      break;
    if (S.self != root)
      memcpy((char *)buf + done, coll__shm_round_slot(&S, root), n);
    coll__shm_round_post(&S, COLL_T_FLAG_OUT);
    done += n;
  }
  return coll__algo_done(&S.run);
}
