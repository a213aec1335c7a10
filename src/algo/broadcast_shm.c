/* SPDX-License-Identifier: Apache-2.0 */
/* broadcast_shm.c: broadcast designed for shared memory. In rounds of a
 * slot, the root copies the next piece into its slot and every other rank
 * copies it out: each byte is written once into shared memory and read
 * once by each rank, where the chain over the shared-memory transport's
 * messages copies it in and out at every hop. */
#include <string.h>

#include "algo/shm_round.h"

coll_status_t coll__broadcast_shm(const coll_algo_ctx_t *ctx, void *buf,
                                  size_t bytes, int root) {
  shm_run_t S;
  size_t done = 0;
  COLL_CHECK(coll__shm_round_init(&S, ctx, "shm broadcast"));
  if (bytes == 0 || S.world < 2) return COLL_OK;
  while (done < bytes) {
    size_t n =
        bytes - done < S.sh->slot_bytes ? bytes - done : S.sh->slot_bytes;
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
