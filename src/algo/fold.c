/* SPDX-License-Identifier: Apache-2.0 */
/* fold.c: the fold that lets an algorithm for a power-of-two world run on
 * any world (algo_util.h, coll__algo_fold). */
#include "algo/algo_util.h"

coll_status_t coll__algo_fold(const algo_fold_t *f, int rank, int n,
                              coll_status_t (*rounds)(void *arg, int rank,
                                                      int p),
                              void *arg) {
  int p = 1;
  while (p <= n / 2) p <<= 1;
  if (rank >= p) {
    /* Folded out: hand the value in, take the result back. The send is
     * waited first because the result lands in the same buffer; rank - p
     * posted its receive at its start, so that wait cannot stall. */
    COLL_CHECK(
        coll__algo_isend(f->run, &f->req[1], rank - p, f->buf, f->bytes));
    COLL_CHECK(coll__algo_wait(f->run, &f->req[1], 0));
    COLL_CHECK(
        coll__algo_irecv(f->run, &f->req[0], rank - p, f->buf, f->bytes));
    return coll__algo_wait(f->run, &f->req[0], f->bytes);
  }
  if (rank + p < n) {
    COLL_CHECK(
        coll__algo_irecv(f->run, &f->req[0], rank + p, f->spare, f->bytes));
    COLL_CHECK(coll__algo_wait(f->run, &f->req[0], f->bytes));
    f->fn(f->buf, f->spare, f->count);
  }
  COLL_CHECK(rounds(arg, rank, p));
  if (rank + p < n) {
    COLL_CHECK(
        coll__algo_isend(f->run, &f->req[1], rank + p, f->buf, f->bytes));
    COLL_CHECK(coll__algo_wait(f->run, &f->req[1], 0));
  }
  return COLL_OK;
}
