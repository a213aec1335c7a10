/* SPDX-License-Identifier: Apache-2.0 */
/* ring.h: the pipelined ring pass that the ring allreduce, reduce-scatter,
 * allgather and the large reduce are made of. */
#ifndef COLL_ALGO_RING_H
#define COLL_ALGO_RING_H

#include <stddef.h>

#include "algo/algo.h"
#include "reduce/reduce.h"

/* One pass around the ring over `world` blocks of buf. Block c holds
 * q + (c < rem) elements and starts at element c*q + min(c, rem). At step s
 * (0 <= s < nsteps) every rank (a position of the context) sends block (rank +
 * shift - s) mod world to rank+1 and receives block (rank + shift - s - 1) mod
 * world from rank-1: the block it sends at step s+1. Steps below nreduce reduce
 * what arrives into buf (dst = dst op src with fn); later steps store it.
 *
 *   allreduce:      shift 0,  nsteps 2(n-1), nreduce n-1
 *   reduce-scatter: shift -1, nsteps n-1,    nreduce n-1 (block r ends on r)
 *   allgather:      shift 0,  nsteps n-1,    nreduce 0   (block r given)
 */
typedef struct coll_ring_pass {
  const char *what; /* "ring allreduce": how error texts begin */
  char *buf;
  size_t esz; /* bytes per element */
  size_t q, rem;
  int shift;
  int nsteps;
  int nreduce;
  coll_reduce_fn_t fn; /* needed when nreduce > 0 */
  /* The block of position c lies where block blocks[c] of the even split
   * does (a layout by comm rank walked in host order); NULL: block c. */
  const int *blocks;
  /* 0: a round covers RING_ROUND_SEGS segments of each block (ring.c);
   * else at most this many bytes of each block, in whole segments (one at
   * least), so that no more raw data than this runs ahead of the reduced
   * data (the two-rank allreduce, allreduce_ring.c). */
  size_t round_bytes;
} coll_ring_pass_t;

/* Raw data the two-rank allreduce lets run ahead of the reduced stream
 * (allreduce_pair.c has the measurements). */
#define COLL_RING_PAIR_LEAD_BYTES ((size_t)512 << 10)

/* Runs the pass with the context's transport, deadline and scratch, under
 * the algo.h failure rules. world 1 and empty blocks send nothing. */
coll_status_t coll__ring_run(const coll_algo_ctx_t *ctx,
                             const coll_ring_pass_t *p);

/* Block c of an even split of count elements over world blocks. */
static inline size_t coll__ring_block(size_t count, int world, int c,
                                      size_t *off) {
  size_t q = count / (size_t)world, rem = count % (size_t)world;
  size_t uc = (size_t)c;
  *off = uc * q + (uc < rem ? uc : rem);
  return q + (uc < rem);
}

#endif
