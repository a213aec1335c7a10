/* SPDX-License-Identifier: Apache-2.0 */
/* allgather_shm.c: allgather designed for shared memory. In rounds of up
 * to a slot of each rank's block, every rank copies its piece into its slot
 * and then every other rank's piece out: each block is written once into
 * shared memory and read once by each rank, where the ring passes it
 * through world-1 hops of messages.
 *
 * Large blocks between processes (shm_direct.h): one round, every rank
 * publishes where its buffer is and copies every other rank's block
 * straight out of its owner's buffer, one copy through the kernel. */
#include <string.h>

#include "algo/shm_direct.h"
#include "algo/shm_round.h"

static coll_status_t single_copy(shm_run_t *S, char *out, size_t block) {
  COLL_CHECK(coll__shm_round_next(S));
  coll__shm_direct_publish(S, out, NULL);
  coll__shm_round_post(S, COLL_T_FLAG_IN);
  COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_IN, "the addresses"));
  for (int r = 0; r < S->world; r++)
    if (r != S->self)
      COLL_CHECK(coll__shm_direct_read(
          S, r, out + (size_t)r * block,
          coll__shm_direct_ptr(S, r, 0) + (size_t)r * block, block, "blocks"));
  coll__shm_round_post(S, COLL_T_FLAG_OUT);
  /* Peers may still be copying this rank's block. */
  COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_OUT, "readers"));
  return coll__algo_done(&S->run);
}

coll_status_t coll__allgather_shm(const coll_algo_ctx_t *ctx, void *buf,
                                  size_t block_bytes) {
  shm_run_t S;
  size_t done = 0;
  char *out = buf;
  COLL_CHECK(coll__shm_round_init(&S, ctx, "shm allgather"));
  if (block_bytes == 0 || S.world < 2) return COLL_OK;
  if (coll__shm_direct_copies(&S, block_bytes * (size_t)S.world))
    return single_copy(&S, out, block_bytes);
  while (done < block_bytes) {
    size_t n = block_bytes - done < S.R->slot_bytes ? block_bytes - done
                                                    : S.R->slot_bytes;
    int r;
    if (coll__shm_round_next(&S) != COLL_OK) break;
    memcpy(coll__shm_round_slot(&S, S.self), out + S.self * block_bytes + done,
           n);
    coll__shm_round_post(&S, COLL_T_FLAG_IN);
    if (coll__shm_round_wait(&S, COLL_T_FLAG_IN, "the pieces") != COLL_OK)
      break;
    for (r = 0; r < S.world; r++)
      if (r != S.self)
        memcpy(out + r * block_bytes + done, coll__shm_round_slot(&S, r), n);
    coll__shm_round_post(&S, COLL_T_FLAG_OUT);
    done += n;
  }
  return coll__algo_done(&S.run);
}
