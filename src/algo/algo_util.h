/* SPDX-License-Identifier: Apache-2.0 */
/* algo_util.h: request bookkeeping and failure handling shared by the
 * algorithm files. The first failure wins; every request an algorithm posted
 * is reaped before it returns, after aborting the transport if one could
 * still be pending. One thread per run. */
#ifndef COLL_ALGO_ALGO_UTIL_H
#define COLL_ALGO_ALGO_UTIL_H

#include <stddef.h>

#include "algo/algo.h"
#include "core/error.h"
#include "reduce/reduce.h"

/* Tag phases (the low 11 bits of COLL_ALGO_TAG): one per message stream, so
 * streams of one collective never match each other's messages. */
enum {
  ALGO_PH_AGREE = 1,
  ALGO_PH_RING = 2,
  ALGO_PH_RD = 3,
  ALGO_PH_BCAST = 4,
  ALGO_PH_REDUCE = 5,
  ALGO_PH_GATHER = 6,
  ALGO_PH_BARRIER = 7,
  ALGO_PH_SHM = 8,   /* sends nothing: its errors' runs only */
  ALGO_PH_PROBE = 9, /* the link probe at creation (link_probe.c) */
  ALGO_PH_RH = 10,   /* halving-doubling allreduce */
  ALGO_PH_SCATTER = 11,
  ALGO_PH_ALLTOALL = 12,
  /* Federated average: its tags count its own rounds instead of the comm's
   * collectives (a late contribution is matched by round), so its phases
   * sit at the top, clear of every other algorithm's. */
  ALGO_PH_FED_CONTRIB = 0x7FE,
  ALGO_PH_FED_RESULT = 0x7FF
};

/* One posted send or receive. */
typedef struct algo_req {
  coll_treq_t h;
  int peer; /* the comm rank */
  int live; /* posted and not yet completed */
  int is_recv;
} algo_req_t;

/* One algorithm run: its context, its tag and its first failure. */
typedef struct algo_run {
  const coll_algo_ctx_t *ctx;
  const char *what; /* "ring allreduce": how every error text begins */
  uint32_t tag;
  coll_status_t status;
  char msg[COLL_ERRMSG_MAX];
} algo_run_t;

/* An algorithm's whole buffer, for coll__algo_fold: its run, two request
 * slots (receive, send), the buffer and scratch of the same size, and the
 * reduction. */
typedef struct algo_fold {
  algo_run_t *run;
  algo_req_t *req;
  char *buf, *spare;
  size_t bytes, count;
  coll_reduce_fn_t fn;
} algo_fold_t;

/* Runs `rounds` among ranks [0, p), p the largest power of two <= n, on a
 * world of n (fold.c): the ranks from p first hand their buffer to rank - p,
 * which combines it with its own (its own value on the left), and take the
 * result back at the end. For recursive doubling and halving-doubling. */
/* Halving-doubling's ranges (allreduce_rh.c). The deepest halving: p up to
 * 2^30 ranks. */
#define RH_LEVELS 31
/* A halving round pairs rank with peer over the range [lo, hi) both hold:
 * the lower keeps the first half [klo, khi) and sends [slo, shi). */
typedef struct rh_split {
  size_t klo, khi, slo, shi;
} rh_split_t;
static inline rh_split_t coll__rh_split(int rank, int peer, size_t lo,
                                        size_t hi) {
  size_t mid = lo + (hi - lo) / 2;
  rh_split_t h;
  h.klo = rank < peer ? lo : mid;
  h.khi = rank < peer ? mid : hi;
  h.slo = rank < peer ? mid : lo;
  h.shi = rank < peer ? hi : mid;
  return h;
}
/* The doubling round that undoes it: rank holds [lo, hi) of the round's
 * range [rlo, rhi), reduced; the partner's part, *plo to *phi, is the rest
 * (after this rank's if it is the lower, else before). */
static inline void coll__rh_rejoin(int rank, int peer, size_t rlo, size_t rhi,
                                   size_t lo, size_t hi, size_t *plo,
                                   size_t *phi) {
  *plo = rank < peer ? hi : rlo;
  *phi = rank < peer ? rhi : lo;
}

coll_status_t coll__algo_fold(const algo_fold_t *f, int rank, int n,
                              coll_status_t (*rounds)(void *arg, int rank,
                                                      int p),
                              void *arg);

/* Starts a run: clears this thread's error text (so a transport that fails
 * without a text is noticed) and computes the tag of `phase`. */
void coll__algo_run_init(algo_run_t *run, const coll_algo_ctx_t *ctx,
                         const char *what, uint32_t phase);

/* Moves the run to another message stream (`phase`) of the same
 * collective, for algorithms that send on two. */
void coll__algo_run_phase(algo_run_t *run, uint32_t phase);

/* Records failure s as "<what>: <fmt...>: <this thread's current text>"
 * unless an earlier one was recorded, and aborts the transport on the first
 * one: the streams are out of step, pending requests must fail at once, and
 * peers waiting on this rank learn of it now rather than at their deadline.
 * Returns the run's first status. */
coll_status_t coll__algo_fail(algo_run_t *run, coll_status_t s, const char *fmt,
                              ...) __attribute__((format(printf, 3, 4)));

/* Posts a send / receive into q, to / from the peer at position `peer` of
 * the run's context. On failure nothing is pending for q and the failure is
 * recorded. */
coll_status_t coll__algo_isend(algo_run_t *run, algo_req_t *q, int peer,
                               const void *buf, size_t len);
coll_status_t coll__algo_irecv(algo_run_t *run, algo_req_t *q, int peer,
                               void *buf, size_t cap);

/* Completes q before the run's deadline; a receive must deliver exactly
 * `len` bytes. On COLL_ERR_TIMEOUT q stays live (coll__algo_cancel reaps
 * it). */
coll_status_t coll__algo_wait(algo_run_t *run, algo_req_t *q, size_t len);

/* Completes the receive q before the run's deadline; it must deliver
 * between lo and hi bytes (hi is at most the capacity posted), and *got
 * says how many. As coll__algo_wait otherwise. */
coll_status_t coll__algo_wait_range(algo_run_t *run, algo_req_t *q, size_t lo,
                                    size_t hi, size_t *got);

/* After a failure (the transport is aborted): waits each live request of
 * reqs[0..n), which fails at once. */
void coll__algo_cancel(algo_run_t *run, algo_req_t *reqs, size_t n);

/* Ends a run: puts the first failure's text back (waits while cancelling
 * may have overwritten it) and returns the run's status. */
coll_status_t coll__algo_done(algo_run_t *run);

/* Moves `bytes` at buf in segments of `seg` bytes: receives each segment
 * from `from` (if >= 0) into buf and sends it to `to` (if >= 0) once it is
 * there. On failure its own requests are already reaped. Used by the
 * pipelined chain broadcast and the reduce's gather. */
coll_status_t coll__algo_stream(algo_run_t *run, int from, int to, char *buf,
                                size_t bytes, size_t seg);

/* A reduction kernel for (dt, op), or NULL with the failure recorded. */
coll_reduce_fn_t coll__algo_kernel(const char *what, coll_dtype_t dt,
                                   coll_op_t op);

#endif
