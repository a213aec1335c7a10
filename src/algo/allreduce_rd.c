/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_rd.c: latency-optimal allreduce for small buffers: recursive
 * doubling, log2(n) rounds that each exchange the whole buffer with
 * rank ^ 2^k and combine. With n not a power of two, the ranks from p (the
 * largest power of two below n) first fold their buffer into rank - p and
 * get the result back at the end.
 *
 * Its messages are the descriptor check's pattern (agree.h), so it carries
 * the check: each message is the sender's state, then its partial result,
 * on the check's tag, and the result reaches dst only once every rank is
 * known to agree. Up to COLL_AGREE_PAYLOAD_MAX bytes; above that (or with
 * the ranks on shared memory) the check runs alone first. So with the
 * check on, a small allreduce costs its own rounds and no more: one round
 * trip on 2 ranks, not two.
 *
 * Both partners of a round combine the same two values in the same order,
 * the lower rank's as the left operand, so every rank ends with the same
 * bits whatever the kernel does with operand order. */
#include <string.h>

#include "algo/agree.h"
#include "algo/algo_util.h"

typedef struct rd {
  algo_run_t run;
  coll_check_t K, *k; /* k: &K while the check rides here, else NULL */
  char *mine;         /* this rank's value */
  char *spare;        /* a receive buffer where no check rides */
  size_t bytes, count;
  coll_reduce_fn_t fn;
  algo_req_t req[2];
} rd_t;

/* One step with peer: sends this rank's value (if send), receives the
 * peer's (if recv) into *got, NULL where the check says it is of no use. */
static coll_status_t step(rd_t *R, int peer, int send, int recv, int adopt,
                          char **got) {
  /* A result taken back goes straight to mine. */
  coll_check_step_t x = {peer,     send,     recv,
                         R->mine,  R->bytes, adopt ? R->mine : R->spare,
                         R->bytes, adopt};
  return coll__check_swap(R->k, &R->run, R->req, &x, got);
}

/* Takes what arrived as this rank's value: the buffers swap roles, no
 * copy. */
static void take(rd_t *R, char *got) {
  if (R->k != NULL) {
    coll__check_flip(R->k);
    R->mine = coll__check_mine(R->k);
  } else {
    R->spare = R->mine;
    R->mine = got;
  }
}

/* mine op= the peer's value, the lower rank's on the left as the peer
 * computes it: where this rank is the higher, into what arrived. */
static void combine(rd_t *R, char *got, int mine_left) {
  if (mine_left) {
    R->fn(R->mine, got, R->count);
    return;
  }
  R->fn(got, R->mine, R->count);
  take(R, got);
}

static coll_status_t rd_body(rd_t *R, int rank, int n) {
  char *got;
  int p = 1, mask;
  while (p <= n / 2) p <<= 1;
  if (rank >= p) {
    /* Folded out: hand the value in, take the result back. */
    COLL_CHECK(step(R, rank - p, 1, 0, 0, &got));
    COLL_CHECK(step(R, rank - p, 0, 1, 1, &got));
    if (got != NULL && got != R->mine) take(R, got);
    return COLL_OK;
  }
  if (rank + p < n) {
    COLL_CHECK(step(R, rank + p, 0, 1, 0, &got));
    if (got != NULL) combine(R, got, 1);
  }
  for (mask = 1; mask < p; mask <<= 1) {
    int peer = rank ^ mask;
    COLL_CHECK(step(R, peer, 1, 1, 0, &got));
    if (got != NULL) combine(R, got, rank < peer);
  }
  if (rank + p < n) COLL_CHECK(step(R, rank + p, 1, 0, 0, &got));
  return COLL_OK;
}

/* The buffers: with the check riding, mine is a copy of src where the
 * check's messages send it from (dst is written at the end); without, mine
 * is dst and spare is scratch. */
static coll_status_t buffers(rd_t *R, const coll_algo_ctx_t *ctx,
                             const void *src, void *dst) {
  char *mem;
  if (R->k != NULL) {
    mem = coll__scratch_get(ctx->scratch, 2 * COLL_CHECK_AREA);
    if (mem == NULL) return COLL_ERR_NO_MEMORY;
    coll__check_init(R->k, ctx, mem);
    R->mine = coll__check_mine(R->k);
    if (R->bytes > 0) memcpy(R->mine, src, R->bytes);
    return COLL_OK;
  }
  R->spare = coll__scratch_get(ctx->scratch, R->bytes);
  if (R->spare == NULL) return COLL_ERR_NO_MEMORY;
  if (src != dst) memcpy(dst, src, R->bytes);
  R->mine = dst;
  return COLL_OK;
}

coll_status_t coll__allreduce_rd(const coll_algo_ctx_t *ctx, const void *src,
                                 void *dst, size_t count, coll_dtype_t dt,
                                 coll_op_t op) {
  rd_t R;
  memset(&R, 0, sizeof R);
  R.fn = coll__algo_kernel("recursive-doubling allreduce", dt, op);
  if (R.fn == NULL) return COLL_ERR_UNSUPPORTED;
  R.count = count;
  R.bytes = count * coll_dtype_size(dt);
  if (coll__check_carried(ctx, R.bytes))
    R.k = &R.K;
  else
    COLL_CHECK(coll__check_alone(ctx));
  if (ctx->world == 1 || (count == 0 && R.k == NULL)) {
    if (src != dst && R.bytes > 0) memcpy(dst, src, R.bytes);
    return COLL_OK;
  }
  coll__algo_run_init(&R.run, ctx, "recursive-doubling allreduce",
                      R.k != NULL ? ALGO_PH_AGREE : ALGO_PH_RD);
  if (buffers(&R, ctx, src, dst) != COLL_OK)
    return coll__algo_fail(&R.run, COLL_ERR_NO_MEMORY, "receive buffer");
  if (rd_body(&R, ctx->rank, ctx->world) != COLL_OK) {
    coll__algo_cancel(&R.run, R.req, 2);
    return coll__algo_done(&R.run);
  }
  if (R.k == NULL) {
    if (R.mine != dst) memcpy(dst, R.mine, R.bytes);
    return COLL_OK;
  }
  COLL_CHECK(coll__check_verdict(R.k, ctx, "the small allreduce"));
  if (R.bytes > 0) memcpy(dst, R.mine, R.bytes);
  return COLL_OK;
}
