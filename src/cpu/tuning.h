/* SPDX-License-Identifier: Apache-2.0 */
/* tuning.h: everything a CPU comm chooses its algorithms and segments by,
 * in one record, computed in one place (tuning.c) from what the transport
 * says of itself, the ranks' hosts and the knobs (core/env.h), and passed
 * down: the algorithm tables (allreduce.c, cpu_util.c) read it, and the
 * algorithms get their part in their context. */
#ifndef COLL_CPU_TUNING_H
#define COLL_CPU_TUNING_H

#include <stddef.h>

#include "algo/link_probe.h"

typedef struct coll_tuning {
  /* COLL_ALGO's word (COLL_ALGO_AUTO, COLL_ALGO_RING, ...). */
  int algo;
  /* Ranks check they agree on each collective's descriptor. */
  int check_mismatch;

  /* Allreduce, under COLL_ALGO=auto: the ring from ring_threshold bytes,
   * the two-level allreduce from two_level_threshold where the hosts
   * allow it, halving-doubling from rh_threshold below rh_max (SIZE_MAX:
   * never). */
  size_t ring_threshold;
  size_t two_level_threshold;
  size_t rh_threshold;
  size_t rh_max;

  /* The ring's pipeline segment, and what long blocks' segments may grow
   * to (algo/ring.c); the same on every rank once the comm is made. */
  size_t seg_bytes;
  size_t seg_max_bytes;

  /* Where the transport maps shared memory (shared): allreduces below
   * shm_allreduce_below bytes run through it (0: at every size),
   * broadcast and allgather below shm_others_below, reduce-scatter below
   * shm_reduce_scatter_below (transport.h says why each). */
  int shared;
  size_t shm_allreduce_below;
  size_t shm_others_below;
  size_t shm_reduce_scatter_below;

  /* What the link probe measured at creation; zero: no probe ran. */
  coll_link_est_t link;
} coll_tuning_t;

#endif
