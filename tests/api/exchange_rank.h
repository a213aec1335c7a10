/* SPDX-License-Identifier: Apache-2.0 */
/* exchange_rank.h: one rank's run of gather, scatter, alltoall and
 * alltoallv, checked against a serial reference: every block's bytes are
 * a function of who sends it to whom, so each rank knows what it must
 * hold. Shared by the thread, process and NCCL stand-in tests. A rank
 * records its first failure; the test thread asserts. */
#ifndef COLL_TESTS_EXCHANGE_RANK_H
#define COLL_TESTS_EXCHANGE_RANK_H

#include <stddef.h>

#include "coll.h"

typedef struct xr_out {
  int failed;  /* 1 once something went wrong */
  int checked; /* calls checked */
  char msg[512];
} xr_out_t;

typedef struct xr_opts {
  /* Buffers for the calls (NULL: malloc/free); the checks read them
   * directly, so they must be host-readable (the NCCL stand-in's are). */
  void *(*alloc)(size_t bytes);
  void (*release)(void *p);
  int quick;    /* fewer counts and dtypes */
  int mismatch; /* also an alltoallv whose counts differ (CPU comms) */
} xr_opts_t;

/* Runs every case on comm c and records into out. */
void xr_run(coll_comm_t *c, const xr_opts_t *o, xr_out_t *out);

#endif
