/* SPDX-License-Identifier: Apache-2.0 */
/* topo.h: the order a CPU comm walks its ranks in. Ranks are grouped by
 * host (hosts in the order of their lowest rank, so rank 0 comes first),
 * and by rank within a host, whatever the numbering: a ring then crosses
 * from one host to the next once per host, not once per rank, and the
 * ranks of one host are neighbours for the two-level allreduce. Every rank
 * computes the same order from the host table learnt at rendezvous. */
#ifndef COLL_ALGO_TOPO_H
#define COLL_ALGO_TOPO_H

#include "coll.h"

typedef struct coll_topo {
  int world;
  int nhosts;
  int local;    /* ranks on every host when all hosts have as many; else 0 */
  int identity; /* 1: position r is rank r (order and pos add nothing) */
  int *order;   /* position -> comm rank; NULL with a single host */
  int *pos;     /* comm rank -> position; NULL likewise */
  /* This rank's column for the two-level allreduce (local > 0): the rank
   * with this rank's local index on each host, hosts in order. */
  int *column;
} coll_topo_t;

/* The walk order of a world of ranks whose rank r is on host host_of[r]
 * (NULL: all on one host), as seen by rank `self`. COLL_ERR_NO_MEMORY on
 * failure (nothing to free then). */
coll_status_t coll__topo_init(coll_topo_t *tp, int world, int self,
                              const int *host_of);
void coll__topo_free(coll_topo_t *tp);

/* 1 when the two-level allreduce applies: more than one host, the same
 * number of ranks on each, and more than one per host. */
static inline int coll__topo_two_level(const coll_topo_t *tp) {
  return tp != NULL && tp->nhosts > 1 && tp->local > 1;
}

#endif
