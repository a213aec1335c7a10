/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_rh_checked.c: the halving-doubling allreduce (allreduce_rh.c)
 * with the descriptor agreement carried in its halving messages, so the
 * check costs no messages of its own: on links where bytes cost (where
 * halving-doubling is chosen), a message is a packet and its headers,
 * which the agreement's own two rounds spent on top of the data (4 ranks
 * over 1 Gbit/s: 4 us of a 64 KiB allreduce's 830).
 *
 * The halving rounds exchange with the agreement's partners in its order
 * (agree.h), on its tag: each message is the sender's state, compact while
 * it knows of no disagreement, then the half the partner keeps. After the
 * last halving round every rank knows whether all agree, as after the
 * agreement. Until then the reductions land in scratch: the user's buffer
 * is written only by the doubling rounds, which run once every rank is
 * known to agree, on the halving-doubling tag. A rank whose descriptor
 * differs may have taken another path of the agreement (the standalone
 * agreement, or recursive doubling with it folded in): the partners and
 * the order are the same, every message fits the others' receives, and
 * every rank reports the mismatch with coll__agree's text.
 *
 * For a power-of-two world whose halves fit an agreement message
 * (COLL_AGREE_PAYLOAD_MAX): a rank folded into another would send its
 * whole buffer, and the standalone agreement receives no more than that. */
#include <string.h>

#include "algo/agree.h"
#include "algo/algo_util.h"

/* A received compact state sits at in + IN_AT, its half at in + DATA_AT;
 * a sent one ends at out + OUT_DATA, where the half begins. */
#define IN_AT 16
#define DATA_AT (IN_AT + COLL_AGREE_MIN_BYTES)
#define OUT_DATA 192
#define MSG_CAP (COLL_AGREE_BYTES + COLL_AGREE_PAYLOAD_MAX)

typedef struct rhc {
  algo_run_t run;
  agree_state_t st;
  const char *src;
  char *dst;
  char *work;         /* the halves this rank keeps, reduced */
  unsigned char *out; /* this rank's state, then the half it sends */
  unsigned char *in;  /* the partner's, as received */
  size_t count, esz;
  coll_reduce_fn_t fn;
  /* A peer with our descriptor sent no half, or one of another size: it
   * ran another path (a tuning variable set differently). */
  int odd;
  algo_req_t req[2];
  size_t lo[RH_LEVELS], hi[RH_LEVELS];
} rhc_t;

int coll__rh_checked_fits(int world, size_t count, size_t esz) {
  return world > 1 && (world & (world - 1)) == 0 &&
         (count - count / 2) * esz <= COLL_AGREE_PAYLOAD_MAX;
}

/* One halving round: sends [slo, shi) of `from` after this rank's state,
 * receives the partner's state and the half this rank keeps, [klo, khi),
 * and reduces it into work. Once a disagreement is known (or a peer on
 * another path) the data no longer matters: the state goes alone. */
static coll_status_t halve(rhc_t *C, int rank, int peer, const char *from,
                           rh_split_t h, int first) {
  size_t sb = (h.shi - h.slo) * C->esz, kb = (h.khi - h.klo) * C->esz;
  size_t n = 0, slen, got_len;
  unsigned char *msg;
  agree_state_t got;
  const coll_algo_ctx_t *ctx = C->run.ctx;
  /* A compact state ends at OUT_DATA, where the half follows it; a full
   * one (a disagreement known) or one after a peer on another path goes
   * alone from the start of out, which holds either form. */
  if (C->st.flag == 0 && C->st.ra < 0 && !C->odd) {
    msg = C->out + OUT_DATA - COLL_AGREE_MIN_BYTES;
    slen = coll__agree_pack_compact(msg, &C->st) + sb;
    if (sb > 0) memcpy(C->out + OUT_DATA, from + h.slo * C->esz, sb);
  } else {
    msg = C->out;
    slen = coll__agree_pack_compact(msg, &C->st);
  }
  COLL_CHECK(
      coll__algo_irecv(&C->run, &C->req[0], peer, C->in + IN_AT, MSG_CAP));
  COLL_CHECK(coll__algo_isend(&C->run, &C->req[1], peer, msg, slen));
  COLL_CHECK(coll__algo_wait_range(&C->run, &C->req[0], COLL_AGREE_MIN_BYTES,
                                   MSG_CAP, &n));
  COLL_CHECK(coll__algo_wait(&C->run, &C->req[1], 0));
  got_len = coll__agree_unpack(C->in + IN_AT, n, &got);
  if (got_len == 0)
    return coll__algo_fail(&C->run, COLL_ERR_PROTOCOL,
                           "rank %d's agreement state: %zu bytes, short of "
                           "its form",
                           coll__ctx_rank(ctx, peer), n);
  /* Disagreements name comm ranks, not positions. */
  coll__agree_merge(&C->st, coll__ctx_rank(ctx, rank),
                    coll__ctx_rank(ctx, peer), &got);
  if (got_len != COLL_AGREE_MIN_BYTES || n != COLL_AGREE_MIN_BYTES + kb) {
    if (coll__desc_equal(&got.mine, &C->st.mine)) C->odd = 1;
    return COLL_OK;
  }
  if (C->st.flag || C->odd || kb == 0) return COLL_OK;
  /* Only this rank combines these elements (its own value on the left). */
  if (first) memcpy(C->work + h.klo * C->esz, C->src + h.klo * C->esz, kb);
  C->fn(C->work + h.klo * C->esz, C->in + DATA_AT, h.khi - h.klo);
  return COLL_OK;
}

/* Sends [lo, hi) of dst to peer and receives [plo, phi) from it. */
static coll_status_t join(rhc_t *C, int peer, size_t lo, size_t hi, size_t plo,
                          size_t phi) {
  COLL_CHECK(coll__algo_irecv(&C->run, &C->req[0], peer, C->dst + plo * C->esz,
                              (phi - plo) * C->esz));
  COLL_CHECK(coll__algo_isend(&C->run, &C->req[1], peer, C->dst + lo * C->esz,
                              (hi - lo) * C->esz));
  COLL_CHECK(coll__algo_wait(&C->run, &C->req[0], (phi - plo) * C->esz));
  return coll__algo_wait(&C->run, &C->req[1], 0);
}

/* The halving with the agreement, then (if every rank agrees) the
 * doubling into dst. */
static coll_status_t body(rhc_t *C, int rank, int p) {
  size_t lo = 0, hi = C->count;
  int k = 0, m;
  for (m = 1; m < p; m *= 2, k++) {
    int peer = rank ^ m;
    rh_split_t h = coll__rh_split(rank, peer, lo, hi);
    C->lo[k] = lo;
    C->hi[k] = hi;
    COLL_CHECK(halve(C, rank, peer, k == 0 ? C->src : C->work, h, k == 0));
    lo = h.klo;
    hi = h.khi;
  }
  if (C->st.flag || C->odd) return COLL_OK;
  if (hi > lo)
    memcpy(C->dst + lo * C->esz, C->work + lo * C->esz, (hi - lo) * C->esz);
  coll__algo_run_phase(&C->run, ALGO_PH_RH);
  for (m = p / 2; m >= 1; m /= 2) {
    int peer = rank ^ m;
    size_t plo, phi;
    k--;
    coll__rh_rejoin(rank, peer, C->lo[k], C->hi[k], lo, hi, &plo, &phi);
    COLL_CHECK(join(C, peer, lo, hi, plo, phi));
    lo = C->lo[k];
    hi = C->hi[k];
  }
  return COLL_OK;
}

coll_status_t coll__allreduce_rh_checked(const coll_algo_ctx_t *ctx,
                                         const coll_desc_t *d, const void *src,
                                         void *dst, size_t count,
                                         coll_dtype_t dt, coll_op_t op) {
  rhc_t C;
  unsigned char *area;
  size_t bytes, half;
  memset(&C, 0, sizeof C);
  C.fn = coll__algo_kernel("checked halving-doubling allreduce", dt, op);
  if (C.fn == NULL) return COLL_ERR_UNSUPPORTED;
  C.esz = coll_dtype_size(dt);
  C.count = count;
  bytes = count * C.esz;
  half = (count - count / 2) * C.esz;
  if (!coll__rh_checked_fits(ctx->world, count, C.esz) && ctx->world > 1)
    return coll__err(COLL_ERR_INTERNAL,
                     "checked halving-doubling allreduce: %d ranks, %zu "
                     "bytes: it takes a power of two and halves of at most "
                     "%zu",
                     ctx->world, bytes, COLL_AGREE_PAYLOAD_MAX);
  if (ctx->world == 1) {
    if (dst != src && bytes > 0) memcpy(dst, src, bytes);
    return COLL_OK;
  }
  coll__algo_run_init(&C.run, ctx, "checked halving-doubling allreduce",
                      ALGO_PH_AGREE);
  coll__agree_state_init(&C.st, d);
  /* work, then the message out, then the message in: 64-byte steps. */
  area =
      coll__scratch_get(ctx->scratch, ((bytes + 63) & ~(size_t)63) + OUT_DATA +
                                          half + 64 + IN_AT + MSG_CAP);
  if (area == NULL)
    return coll__algo_fail(&C.run, COLL_ERR_NO_MEMORY, "scratch");
  C.work = (char *)area;
  C.out = area + ((bytes + 63) & ~(size_t)63);
  C.in = C.out + ((OUT_DATA + half + 63) & ~(size_t)63);
  C.src = src;
  C.dst = dst;
  if (body(&C, ctx->rank, ctx->world) != COLL_OK) {
    coll__algo_cancel(&C.run, C.req, 2);
    return coll__algo_done(&C.run);
  }
  return coll__agree_verdict(&C.st, C.odd, coll__ctx_rank(ctx, ctx->rank), d,
                             "the halving-doubling allreduce");
}
