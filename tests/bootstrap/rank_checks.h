/* SPDX-License-Identifier: Apache-2.0 */
/* rank_checks.h: collectives a rank runs and checks byte for byte against
 * the values every rank can compute (bt_fill_values, bt_reference),
 * recording the first failure and the count checked in its bt_rank_out_t.
 * Shared by the tests that run the same data movement over different
 * shared-memory paths. */
#ifndef COLL_TEST_RANK_CHECKS_H
#define COLL_TEST_RANK_CHECKS_H

#include <stddef.h>

#include "coll.h"
#include "rank_job.h"

/* A broadcast of each of the k sizes (bytes) from every root, until the
 * first failure. */
void bt_check_broadcasts(coll_comm_t *c, int rank, int world,
                         const size_t *sizes, size_t k, bt_rank_out_t *o);
/* An allgather of each of the k sizes (bytes per rank), in place for odd
 * positions in the list and out of place for even ones, until the first
 * failure. */
void bt_check_allgathers(coll_comm_t *c, int rank, int world,
                         const size_t *sizes, size_t k, bt_rank_out_t *o);

/* One reduce-scatter of n elements of dt per rank with op, from the
 * values of bt_reference's seeds, checked bit-exact against the serial
 * reference in rank order and for a send buffer left as it was. */
void bt_check_reduce_scatter(coll_comm_t *c, int rank, int world,
                             coll_dtype_t dt, coll_op_t op, size_t n,
                             bt_rank_out_t *o);

#endif
