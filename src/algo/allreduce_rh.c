/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_rh.c: allreduce for mid-size buffers on links where bytes
 * cost: a reduce-scatter by recursive halving, then an allgather by
 * recursive doubling (Rabenseifner's algorithm). Each rank sends what the
 * ring sends, 2 (p-1)/p of the buffer, but in 2 log2(p) steps instead of
 * 2 (p-1): on 4 ranks 4 steps instead of 6, on 8 ranks 6 instead of 14.
 * With n not a power of two, the ranks from p (the largest power of two
 * below n) fold their buffer into rank - p first and get the result back
 * at the end, as in recursive doubling.
 *
 * Halving: in the round with partner rank ^ m (m = 1, 2, 4, ... p/2) both
 * partners hold the same element range; the lower keeps its first half,
 * the higher its second, each sends the other half to the partner and
 * combines what it receives into the half it keeps. After the last round
 * each rank holds one p-th of the buffer reduced over all ranks, computed
 * there only, so the allgather that follows (the same rounds backwards,
 * exchanging the halves whole) gives every rank the same bits.
 *
 * The halving rounds are the descriptor check's pattern (agree.h): on a
 * power-of-two world whose halves fit a check message it carries the check
 * in them, each message the sender's state then the half, on the check's
 * tag; the reductions then land in scratch, and dst is written only by the
 * doubling rounds, which run once every rank is known to agree. On a link
 * where bytes cost (where auto takes this algorithm), a message is a
 * packet and its headers, which a check of its own would spend on top (4
 * ranks over 1 Gbit/s: 4 us of a 64 KiB allreduce's 830). Elsewhere the
 * check runs alone first: a folded-out rank would send its whole buffer,
 * more than a check message may carry. */
#include <string.h>

#include "algo/agree.h"
#include "algo/algo_util.h"

typedef struct rh {
  algo_run_t run;
  coll_check_t K, *k; /* k: &K while the check rides here, else NULL */
  const char *src;    /* what the first halving round reads */
  char *work;         /* where the halving reduces: dst, or scratch */
  char *dst;
  char *spare; /* receive buffer where no check rides */
  size_t bytes, count, esz;
  coll_reduce_fn_t fn;
  algo_req_t req[2];
  /* The element range this rank held before each halving round, by
   * round: the allgather's round k joins back to lo[k]..hi[k]. */
  size_t lo[RH_LEVELS], hi[RH_LEVELS];
} rh_t;

/* One halving round with peer over the range both hold: sends the half the
 * peer keeps, receives this rank's and reduces it into work (this rank's
 * value on the left: only it combines these elements, and the allgather
 * hands every rank its bits). */
static coll_status_t halve(rh_t *R, int peer, rh_split_t h, int first) {
  const char *from = first ? R->src : R->work;
  size_t kb = (h.khi - h.klo) * R->esz;
  coll_check_step_t x = {
      peer,     1,  1, from + h.slo * R->esz, (h.shi - h.slo) * R->esz,
      R->spare, kb, 0};
  char *got;
  COLL_CHECK(coll__check_swap(R->k, &R->run, R->req, &x, &got));
  if (got == NULL || kb == 0) return COLL_OK;
  if (first && R->work != R->src)
    memcpy(R->work + h.klo * R->esz, R->src + h.klo * R->esz, kb);
  R->fn(R->work + h.klo * R->esz, got, h.khi - h.klo);
  return COLL_OK;
}

/* Sends n elements from `from` to peer and receives m elements from it
 * into `into`, both posted before either is waited. */
static coll_status_t join(rh_t *R, int peer, const char *from, size_t n,
                          char *into, size_t m) {
  COLL_CHECK(coll__algo_irecv(&R->run, &R->req[0], peer, into, m * R->esz));
  COLL_CHECK(coll__algo_isend(&R->run, &R->req[1], peer, from, n * R->esz));
  COLL_CHECK(coll__algo_wait(&R->run, &R->req[0], m * R->esz));
  return coll__algo_wait(&R->run, &R->req[1], 0);
}

/* Halving, then (with the check riding, once it passed) doubling among
 * ranks [0, p). */
static coll_status_t rh_rounds(void *arg, int rank, int p) {
  rh_t *R = arg;
  size_t lo = 0, hi = R->count;
  int k = 0, m;
  for (m = 1; m < p; m *= 2, k++) {
    rh_split_t h = coll__rh_split(rank, rank ^ m, lo, hi);
    R->lo[k] = lo;
    R->hi[k] = hi;
    COLL_CHECK(halve(R, rank ^ m, h, k == 0));
    lo = h.klo;
    hi = h.khi;
  }
  if (R->k != NULL) {
    COLL_CHECK(coll__check_verdict(R->k, R->run.ctx,
                                   "the halving-doubling allreduce"));
    if (hi > lo)
      memcpy(R->dst + lo * R->esz, R->work + lo * R->esz, (hi - lo) * R->esz);
    coll__algo_run_phase(&R->run, ALGO_PH_RH);
  }
  for (m = p / 2; m >= 1; m /= 2) {
    int peer = rank ^ m;
    /* Back to the range of the round that split with this partner: the
     * partner holds the rest of it, reduced (the half after this rank's
     * if this rank is the lower, else the half before). */
    size_t plo, phi;
    k--;
    coll__rh_rejoin(rank, peer, R->lo[k], R->hi[k], lo, hi, &plo, &phi);
    COLL_CHECK(join(R, peer, R->dst + lo * R->esz, hi - lo,
                    R->dst + plo * R->esz, phi - plo));
    lo = R->lo[k];
    hi = R->hi[k];
  }
  return COLL_OK;
}

/* 1 where the check rides in the halving: a power-of-two world (no fold)
 * whose first halves fit a check message. */
static int carries(const coll_algo_ctx_t *ctx, size_t count, size_t esz) {
  int n = ctx->world;
  return (n & (n - 1)) == 0 &&
         coll__check_carried(ctx, (count - count / 2) * esz);
}

/* The check riding: work in scratch after the check's message areas;
 * without: in place on dst, receives in scratch. */
static coll_status_t buffers(rh_t *R, const coll_algo_ctx_t *ctx,
                             const void *src, void *dst) {
  char *mem;
  R->dst = dst;
  if (R->k != NULL) {
    mem = coll__scratch_get(ctx->scratch, 2 * COLL_CHECK_AREA + R->bytes);
    if (mem == NULL) return COLL_ERR_NO_MEMORY;
    coll__check_init(R->k, ctx, mem);
    R->work = mem + 2 * COLL_CHECK_AREA;
    R->src = src;
    return COLL_OK;
  }
  R->spare = coll__scratch_get(ctx->scratch, R->bytes);
  if (R->spare == NULL) return COLL_ERR_NO_MEMORY;
  if (src != dst) memcpy(dst, src, R->bytes);
  R->work = dst;
  R->src = dst;
  return COLL_OK;
}

coll_status_t coll__allreduce_rh(const coll_algo_ctx_t *ctx, const void *src,
                                 void *dst, size_t count, coll_dtype_t dt,
                                 coll_op_t op) {
  rh_t R;
  memset(&R, 0, sizeof R);
  R.fn = coll__algo_kernel("halving-doubling allreduce", dt, op);
  if (R.fn == NULL) return COLL_ERR_UNSUPPORTED;
  R.esz = coll_dtype_size(dt);
  R.count = count;
  R.bytes = count * R.esz;
  if (carries(ctx, count, R.esz))
    R.k = &R.K;
  else
    COLL_CHECK(coll__check_alone(ctx));
  if (ctx->world == 1 || (count == 0 && R.k == NULL)) {
    if (src != dst && R.bytes > 0) memcpy(dst, src, R.bytes);
    return COLL_OK;
  }
  coll__algo_run_init(&R.run, ctx, "halving-doubling allreduce",
                      R.k != NULL ? ALGO_PH_AGREE : ALGO_PH_RH);
  if (buffers(&R, ctx, src, dst) != COLL_OK)
    return coll__algo_fail(&R.run, COLL_ERR_NO_MEMORY, "receive buffer");
  if (R.k != NULL) {
    /* A power of two: no fold. A mismatch is a verdict, not a failure:
     * nothing is pending then. */
    coll_status_t s = rh_rounds(&R, ctx->rank, ctx->world);
    if (s == COLL_OK || R.run.status == COLL_OK) return s;
  } else {
    algo_fold_t f = {&R.run, R.req, R.dst, R.spare, R.bytes, R.count, R.fn};
    if (coll__algo_fold(&f, ctx->rank, ctx->world, rh_rounds, &R) == COLL_OK)
      return COLL_OK;
  }
  coll__algo_cancel(&R.run, R.req, 2);
  return coll__algo_done(&R.run);
}
