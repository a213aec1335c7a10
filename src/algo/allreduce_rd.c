/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_rd.c: latency-optimal allreduce for small buffers: recursive
 * doubling, log2(n) rounds that each exchange the whole buffer with
 * rank ^ 2^k and combine. With n not a power of two, the ranks from p (the
 * largest power of two below n) first fold their buffer into rank - p and
 * get the result back at the end.
 *
 * Both partners of a round combine the same two values in the same order,
 * the lower rank's as the left operand, so every rank ends with the same
 * bits whatever the kernel does with operand order. */
#include <string.h>

#include "algo/algo_util.h"

typedef struct rd {
  algo_run_t run;
  char *buf;
  char *spare; /* scratch the size of buf */
  size_t bytes, count;
  coll_reduce_fn_t fn;
  algo_req_t req[2];
} rd_t;

/* Sends `src` to peer and receives peer's buffer into `dst`, both posted
 * before either is waited. */
static coll_status_t rd_exchange(rd_t *R, int peer, const void *src,
                                 void *dst) {
  COLL_CHECK(coll__algo_irecv(&R->run, &R->req[0], peer, dst, R->bytes));
  COLL_CHECK(coll__algo_isend(&R->run, &R->req[1], peer, src, R->bytes));
  COLL_CHECK(coll__algo_wait(&R->run, &R->req[0], R->bytes));
  return coll__algo_wait(&R->run, &R->req[1], 0);
}

/* The doubling rounds among ranks [0, p). `cur` holds this rank's value;
 * the other of buf/spare is free for the next receive. */
static coll_status_t rd_rounds(void *arg, int rank, int p) {
  rd_t *R = arg;
  char *cur = R->buf;
  int mask;
  for (mask = 1; mask < p; mask <<= 1) {
    int peer = rank ^ mask;
    char *in = cur == R->buf ? R->spare : R->buf;
    COLL_CHECK(rd_exchange(R, peer, cur, in));
    if (rank < peer) {
      R->fn(cur, in, R->count);
    } else {
      R->fn(in, cur, R->count); /* peer's value op mine, as peer computes */
      cur = in;
    }
  }
  if (cur != R->buf) memcpy(R->buf, cur, R->bytes);
  return COLL_OK;
}

coll_status_t coll__allreduce_rd(const coll_algo_ctx_t *ctx, void *buf,
                                 size_t count, coll_dtype_t dt, coll_op_t op) {
  rd_t R;
  memset(&R, 0, sizeof R);
  R.fn = coll__algo_kernel("recursive-doubling allreduce", dt, op);
  if (R.fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (ctx->world == 1 || count == 0) return COLL_OK;
  coll__algo_run_init(&R.run, ctx, "recursive-doubling allreduce", ALGO_PH_RD);
  R.buf = buf;
  R.count = count;
  R.bytes = count * coll_dtype_size(dt);
  R.spare = coll__scratch_get(ctx->scratch, R.bytes);
  if (R.spare == NULL)
    return coll__algo_fail(&R.run, COLL_ERR_NO_MEMORY, "receive buffer");
  algo_fold_t f = {&R.run, R.req, R.buf, R.spare, R.bytes, R.count, R.fn};
  if (coll__algo_fold(&f, ctx->rank, ctx->world, rd_rounds, &R) != COLL_OK)
    coll__algo_cancel(&R.run, R.req, 2);
  return coll__algo_done(&R.run);
}
