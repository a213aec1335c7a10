/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_scatter_shm.c: reduce-scatter designed for shared memory. In
 * rounds, every rank copies the next piece of each of its world blocks
 * into its slot (piece d for rank d, side by side), then reduces its own
 * piece from every rank's slot in rank order 0, 1, ..., world-1 straight
 * into its output: each input is written once and read once, each output
 * written once. The ring instead sends world-1 partial sums through
 * messages and reduces on every hop. Every element is combined in rank
 * order, whatever the size.
 *
 * Large inputs between processes (shm_direct.h): one round, every rank
 * publishes where its input is, then reduces its own block chunk by chunk,
 * each peer's piece copied once through the kernel into scratch and
 * combined in rank order, straight into its output; it returns once every
 * rank posted OUT (peers may still copy from its input until then). */
#include <string.h>

#include "algo/shm_direct.h"
#include "algo/shm_round.h"

/* The single copy's chunk: two of them (the sum and the piece arriving)
 * stay within the second-level cache. */
#define CMA_CHUNK (256u * 1024u)

static coll_status_t single_copy(shm_run_t *S, coll_reduce_fn_t fn,
                                 const char *in, char *out, size_t count,
                                 size_t es) {
  size_t chunk = CMA_CHUNK / es, done;
  char *acc = coll__scratch_get(S->run.ctx->scratch, 2 * (size_t)CMA_CHUNK);
  char *piece = acc + CMA_CHUNK;
  if (acc == NULL)
    return coll__algo_fail(&S->run, COLL_ERR_NO_MEMORY, "reduce chunk");
  COLL_CHECK(coll__shm_round_next(S));
  coll__shm_direct_publish(S, in, NULL);
  coll__shm_round_post(S, COLL_T_FLAG_IN);
  COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_IN, "the addresses"));
  for (done = 0; done < count; done += chunk) {
    size_t n = count - done < chunk ? count - done : chunk;
    size_t off = ((size_t)S->self * count + done) * es, len = n * es;
    for (int r = 0; r < S->world; r++) {
      const char *from =
          (r == S->self ? in : coll__shm_direct_ptr(S, r, 0)) + off;
      if (r == 0)
        COLL_CHECK(coll__shm_direct_read(S, r, acc, from, len, "inputs"));
      else if (r == S->self)
        fn(acc, from, n);
      else {
        COLL_CHECK(coll__shm_direct_read(S, r, piece, from, len, "inputs"));
        fn(acc, piece, n);
      }
    }
    memcpy(out + done * es, acc, len);
  }
  coll__shm_round_post(S, COLL_T_FLAG_OUT);
  COLL_CHECK(coll__shm_round_wait(S, COLL_T_FLAG_OUT, "readers"));
  return coll__algo_done(&S->run);
}

coll_status_t coll__reduce_scatter_shm(const coll_algo_ctx_t *ctx,
                                       const void *src, void *dst, size_t count,
                                       coll_dtype_t dt, coll_op_t op) {
  shm_run_t S;
  coll_reduce_fn_t fn;
  size_t es = coll_dtype_size(dt), per_round, done = 0;
  const char *in = src;
  char *out = dst;
  COLL_CHECK(coll__shm_round_init(&S, ctx, "shm reduce-scatter"));
  fn = coll__algo_kernel(S.run.what, dt, op);
  if (fn == NULL) return COLL_ERR_INVALID_ARG;
  if (count == 0) return COLL_OK;
  if (S.world < 2) {
    memcpy(out, in, count * es);
    return COLL_OK;
  }
  if (coll__shm_direct_copies(&S, count * es * (size_t)S.world))
    return single_copy(&S, fn, in, out, count, es);
  /* A piece for each rank side by side in one slot. */
  per_round = S.R->slot_bytes / es / (size_t)S.world;
  if (per_round == 0)
    return coll__err(COLL_ERR_INTERNAL, "%s: a slot holds no element per rank",
                     S.run.what);
  while (done < count) {
    size_t n = count - done < per_round ? count - done : per_round;
    char *slot;
    int r;
    if (coll__shm_round_next(&S) != COLL_OK) break;
    slot = coll__shm_round_slot(&S, S.self);
    for (r = 0; r < S.world; r++)
      memcpy(slot + (size_t)r * n * es, in + ((size_t)r * count + done) * es,
             n * es);
    coll__shm_round_post(&S, COLL_T_FLAG_IN);
    if (coll__shm_round_wait(&S, COLL_T_FLAG_IN, "inputs") != COLL_OK) break;
    memcpy(out + done * es,
           coll__shm_round_slot(&S, 0) + (size_t)S.self * n * es, n * es);
    for (r = 1; r < S.world; r++)
      fn(out + done * es, coll__shm_round_slot(&S, r) + (size_t)S.self * n * es,
         n);
    coll__shm_round_post(&S, COLL_T_FLAG_OUT);
    done += n;
  }
  return coll__algo_done(&S.run);
}
