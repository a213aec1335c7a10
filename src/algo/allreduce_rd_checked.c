/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_rd_checked.c: a small allreduce with the descriptor agreement
 * folded into its messages, so that with the mismatch check on it costs the
 * recursive doubling's rounds and no more (one round trip on 2 ranks, not
 * two).
 *
 * The agreement and recursive doubling exchange with the same partners in
 * the same order (agree.h), so each message carries the sender's agreement
 * state followed by its partial result, on the agreement's tag. Each rank
 * merges the states as coll__agree does and reduces the results as
 * coll__allreduce_rd does (lower rank's value on the left), on copies in
 * scratch: the result reaches dst only once every rank is known to agree.
 * A rank whose descriptor differs may have taken the standalone agreement
 * (state only) or another size: its state says so, the pattern of messages
 * is the same, and every rank reports the mismatch with coll__agree's
 * text. */
#include <string.h>

#include "algo/agree.h"
#include "algo/algo_util.h"
#include "core/le.h"

#define MSG_CAP (COLL_AGREE_BYTES + COLL_AGREE_PAYLOAD_MAX)

typedef struct checked {
  algo_run_t run;
  agree_state_t st;
  unsigned char *cur; /* this rank's state, then its partial result */
  unsigned char *in;  /* the partner's, as received */
  size_t bytes, count;
  coll_reduce_fn_t fn;
  /* A peer whose descriptor equals ours sent no result, or one of another
   * size: it ran another path (a tuning variable set differently). */
  int odd;
  algo_req_t req[2];
} checked_t;

/* Sends this rank's state and partial result to peer (if send) and
 * receives peer's (if recv) into `got` and in->data, both posted before
 * either is waited. Returns with *fresh 1 if peer's result can be
 * combined. */
static coll_status_t swap(checked_t *C, int peer, int send, int recv,
                          agree_state_t *got, int *fresh) {
  size_t n = 0;
  *fresh = 0;
  coll__agree_pack(C->cur, &C->st);
  if (recv)
    COLL_CHECK(coll__algo_irecv(&C->run, &C->req[0], peer, C->in, MSG_CAP));
  if (send)
    COLL_CHECK(coll__algo_isend(&C->run, &C->req[1], peer, C->cur,
                                COLL_AGREE_BYTES + C->bytes));
  if (recv)
    COLL_CHECK(coll__algo_wait_range(&C->run, &C->req[0], COLL_AGREE_MIN_BYTES,
                                     MSG_CAP, &n));
  if (send) COLL_CHECK(coll__algo_wait(&C->run, &C->req[1], 0));
  if (!recv) return COLL_OK;
  /* A peer of this path sends the full form, its result after it. */
  if (coll__agree_unpack(C->in, n, got) == 0)
    return coll__algo_fail(&C->run, COLL_ERR_PROTOCOL,
                           "rank %d's agreement state: %zu bytes, short of "
                           "its form",
                           coll__ctx_rank(C->run.ctx, peer), n);
  if (n == COLL_AGREE_BYTES + C->bytes &&
      coll__get_le32(C->in + COLL_AGREE_DESC_BYTES) != COLL_AGREE_COMPACT)
    *fresh = 1;
  else if (memcmp(C->in, C->cur, COLL_AGREE_DESC_BYTES) == 0)
    C->odd = 1; /* same descriptor on the wire, another path */
  return COLL_OK;
}

/* Combines the partner's result (in) with ours (cur); `mine_left`: ours
 * is the left operand. The result ends in cur. */
static void combine(checked_t *C, int mine_left) {
  unsigned char *d = C->cur + COLL_AGREE_BYTES, *s = C->in + COLL_AGREE_BYTES;
  if (mine_left) {
    C->fn(d, s, C->count);
  } else {
    unsigned char *t = C->cur;
    C->fn(s, d, C->count); /* partner's value op mine, as partner computes */
    C->cur = C->in;
    C->in = t;
  }
}

static coll_status_t body(checked_t *C, int rank, int n) {
  agree_state_t in;
  int p = 1, mask, fresh;
  while (p <= n / 2) p <<= 1;
  if (rank >= p) {
    /* Folded out: hand the state and value in, take the result back. */
    COLL_CHECK(swap(C, rank - p, 1, 0, NULL, &fresh));
    COLL_CHECK(swap(C, rank - p, 0, 1, &in, &fresh));
    coll__agree_adopt(&C->st, &in);
    if (fresh) {
      unsigned char *t = C->cur;
      C->cur = C->in;
      C->in = t;
    }
    return COLL_OK;
  }
  if (rank + p < n) {
    COLL_CHECK(swap(C, rank + p, 0, 1, &in, &fresh));
    coll__agree_merge(&C->st, coll__ctx_rank(C->run.ctx, rank),
                      coll__ctx_rank(C->run.ctx, rank + p), &in);
    if (fresh) combine(C, 1);
  }
  for (mask = 1; mask < p; mask <<= 1) {
    int peer = rank ^ mask;
    COLL_CHECK(swap(C, peer, 1, 1, &in, &fresh));
    /* Disagreements name comm ranks, not positions. */
    coll__agree_merge(&C->st, coll__ctx_rank(C->run.ctx, rank),
                      coll__ctx_rank(C->run.ctx, peer), &in);
    if (fresh) combine(C, rank < peer);
  }
  if (rank + p < n) COLL_CHECK(swap(C, rank + p, 1, 0, NULL, &fresh));
  return COLL_OK;
}

coll_status_t coll__allreduce_rd_checked(const coll_algo_ctx_t *ctx,
                                         const coll_desc_t *d, const void *src,
                                         void *dst, size_t count,
                                         coll_dtype_t dt, coll_op_t op) {
  checked_t C;
  unsigned char *area;
  memset(&C, 0, sizeof C);
  C.fn = coll__algo_kernel("checked allreduce", dt, op);
  if (C.fn == NULL) return COLL_ERR_UNSUPPORTED;
  C.count = count;
  C.bytes = count * coll_dtype_size(dt);
  if (C.bytes > COLL_AGREE_PAYLOAD_MAX)
    return coll__err(COLL_ERR_INTERNAL,
                     "checked allreduce: %zu bytes, over the %zu it carries",
                     C.bytes, COLL_AGREE_PAYLOAD_MAX);
  if (ctx->world == 1) {
    if (dst != src && C.bytes > 0) memcpy(dst, src, C.bytes);
    return COLL_OK;
  }
  coll__algo_run_init(&C.run, ctx, "checked allreduce", ALGO_PH_AGREE);
  coll__agree_state_init(&C.st, d);
  /* Two messages: one receives while the other holds our value. */
  area = coll__scratch_get(ctx->scratch, 2 * MSG_CAP);
  if (area == NULL)
    return coll__algo_fail(&C.run, COLL_ERR_NO_MEMORY, "scratch");
  C.cur = area;
  C.in = area + MSG_CAP;
  if (C.bytes > 0) memcpy(C.cur + COLL_AGREE_BYTES, src, C.bytes);
  if (body(&C, ctx->rank, ctx->world) != COLL_OK) {
    coll__algo_cancel(&C.run, C.req, 2);
    return coll__algo_done(&C.run);
  }
  COLL_CHECK(coll__agree_verdict(&C.st, C.odd, coll__ctx_rank(ctx, ctx->rank),
                                 d, "the small allreduce"));
  if (C.bytes > 0) memcpy(dst, C.cur + COLL_AGREE_BYTES, C.bytes);
  return COLL_OK;
}
