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
 * Halving: in the round with partner rank ^ m (m = 1, 2, 4, ... p/2: the
 * descriptor agreement's partners in its order, so the checked form can
 * carry the agreement, allreduce_rh_checked.c) both partners hold the same
 * element range; the lower keeps its first half, the higher its second,
 * each sends the other half to the partner and combines what it receives
 * into the half it keeps. After the last round each rank holds one p-th of
 * the buffer reduced over all ranks, computed there only, so the allgather
 * that follows (the same rounds backwards, exchanging the halves whole)
 * gives every rank the same bits. */
#include <string.h>

#include "algo/algo_util.h"

typedef struct rh {
  algo_run_t run;
  char *buf;
  char *spare; /* scratch for the halves received */
  size_t bytes, count, esz;
  coll_reduce_fn_t fn;
  algo_req_t req[2];
  /* The element range this rank held before each halving round, by
   * round: the allgather's round k joins back to lo[k]..hi[k]. */
  size_t lo[RH_LEVELS], hi[RH_LEVELS];
} rh_t;

/* Sends n elements from `from` to peer and receives m elements from it
 * into `into`, both posted before either is waited. */
static coll_status_t rh_exchange(rh_t *R, int peer, const char *from, size_t n,
                                 char *into, size_t m) {
  COLL_CHECK(coll__algo_irecv(&R->run, &R->req[0], peer, into, m * R->esz));
  COLL_CHECK(coll__algo_isend(&R->run, &R->req[1], peer, from, n * R->esz));
  COLL_CHECK(coll__algo_wait(&R->run, &R->req[0], m * R->esz));
  return coll__algo_wait(&R->run, &R->req[1], 0);
}

/* Halving then doubling among ranks [0, p). */
static coll_status_t rh_rounds(void *arg, int rank, int p) {
  rh_t *R = arg;
  size_t lo = 0, hi = R->count;
  int k = 0, m;
  for (m = 1; m < p; m *= 2, k++) {
    int peer = rank ^ m;
    rh_split_t h = coll__rh_split(rank, peer, lo, hi);
    R->lo[k] = lo;
    R->hi[k] = hi;
    COLL_CHECK(rh_exchange(R, peer, R->buf + h.slo * R->esz, h.shi - h.slo,
                           R->spare, h.khi - h.klo));
    /* Only this rank combines these elements (this rank's value on the
     * left), and the allgather hands every rank its bits. */
    if (h.khi > h.klo) R->fn(R->buf + h.klo * R->esz, R->spare, h.khi - h.klo);
    lo = h.klo;
    hi = h.khi;
  }
  for (m = p / 2; m >= 1; m /= 2) {
    int peer = rank ^ m;
    /* Back to the range of the round that split with this partner: the
     * partner holds the rest of it, reduced (the half after this rank's
     * if this rank is the lower, else the half before). */
    size_t plo, phi;
    k--;
    coll__rh_rejoin(rank, peer, R->lo[k], R->hi[k], lo, hi, &plo, &phi);
    COLL_CHECK(rh_exchange(R, peer, R->buf + lo * R->esz, hi - lo,
                           R->buf + plo * R->esz, phi - plo));
    lo = R->lo[k];
    hi = R->hi[k];
  }
  return COLL_OK;
}

coll_status_t coll__allreduce_rh(const coll_algo_ctx_t *ctx, void *buf,
                                 size_t count, coll_dtype_t dt, coll_op_t op) {
  rh_t R;
  memset(&R, 0, sizeof R);
  R.fn = coll__algo_kernel("halving-doubling allreduce", dt, op);
  if (R.fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (ctx->world == 1 || count == 0) return COLL_OK;
  coll__algo_run_init(&R.run, ctx, "halving-doubling allreduce", ALGO_PH_RH);
  R.buf = buf;
  R.count = count;
  R.esz = coll_dtype_size(dt);
  R.bytes = count * R.esz;
  R.spare = coll__scratch_get(ctx->scratch, R.bytes);
  if (R.spare == NULL)
    return coll__algo_fail(&R.run, COLL_ERR_NO_MEMORY, "receive buffer");
  algo_fold_t f = {&R.run, R.req, R.buf, R.spare, R.bytes, R.count, R.fn};
  if (coll__algo_fold(&f, ctx->rank, ctx->world, rh_rounds, &R) != COLL_OK)
    coll__algo_cancel(&R.run, R.req, 2);
  return coll__algo_done(&R.run);
}
