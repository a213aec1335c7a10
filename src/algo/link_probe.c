/* SPDX-License-Identifier: Apache-2.0 */
/* link_probe.c: the comm times its own links once, at creation, and picks
 * the allreduce size from which the ring beats recursive doubling there.
 *
 * Why measure: the two algorithms trade latency for bytes. Recursive
 * doubling takes log2(n) steps but sends the whole buffer in each; the
 * ring takes 2(n-1) steps of 1/n of it. With 4 ranks doubling sends 4/3
 * of the ring's bytes, so on a slow link (1 Gbit/s between hosts: 0.71x
 * the link rate at 64 KiB under doubling, 0.94x under the ring) the ring
 * wins from a few tens of KiB, while over loopback a step costs more than
 * the bytes and doubling wins up to a few hundred KiB. One constant
 * cannot serve both.
 *
 * The model (alpha: one step's fixed cost; c: seconds per byte; S: the
 * buffer; p: the largest power of two <= n; k = log2(p) steps, plus two
 * for the fold when n is not a power of two):
 *     doubling  k * (alpha + S c)
 *     ring      2 (n - 1) * (alpha + S c / n)
 * so the ring is faster from S* = alpha (2(n-1) - k) / (c (k - 2(n-1)/n)).
 * With n = 4 that is 8 alpha / c: over loopback here (about 30 us a step,
 * 2 GB/s) 480 KB, near the 256 KiB measured before; over a 1 Gbit/s link
 * with 40 us a step, 37 KB. With n <= 2 doubling never sends more, so it
 * stays doubling.
 *
 * The probe: every rank shifts a few bytes, then COLL_LINK_PROBE_BYTES,
 * to the next position of the ring while receiving from the previous one
 * (the ring's own links, in host order), keeps the fastest of a few runs
 * of each, and the comm takes the largest alpha and c any rank saw by an
 * allreduce: the slowest link paces the ring, and every rank must pick the
 * same algorithm. About 2 ms over loopback, 35 ms over 1 Gbit/s. */
#include "algo/link_probe.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"
#include "core/clock.h"

#define SMALL_BYTES 8
#define SMALL_RUNS 5
#define LARGE_RUNS 3

typedef struct probe {
  algo_run_t run;
  algo_req_t req[2];
  int next, prev;
  char *sbuf, *rbuf;
} probe_t;

/* One shift of len bytes around the ring; *secs is how long it took. */
static coll_status_t shift(probe_t *P, size_t len, double *secs) {
  uint64_t t0 = coll__now_ns();
  COLL_CHECK(coll__algo_irecv(&P->run, &P->req[0], P->prev, P->rbuf, len));
  COLL_CHECK(coll__algo_isend(&P->run, &P->req[1], P->next, P->sbuf, len));
  COLL_CHECK(coll__algo_wait(&P->run, &P->req[0], len));
  COLL_CHECK(coll__algo_wait(&P->run, &P->req[1], 0));
  *secs = (double)(coll__now_ns() - t0) * 1e-9;
  return COLL_OK;
}

/* The fastest of `runs` shifts of len bytes, after one to warm up (the
 * first large one also opens the TCP windows). */
static coll_status_t fastest(probe_t *P, size_t len, int runs, double *best) {
  double t;
  int i;
  COLL_CHECK(shift(P, len, &t));
  *best = INFINITY;
  for (i = 0; i < runs; i++) {
    COLL_CHECK(shift(P, len, &t));
    if (t < *best) *best = t;
  }
  return COLL_OK;
}

static coll_status_t probe_body(probe_t *P, double *small, double *large) {
  COLL_CHECK(fastest(P, SMALL_BYTES, SMALL_RUNS, small));
  return fastest(P, COLL_LINK_PROBE_BYTES, LARGE_RUNS, large);
}

coll_status_t coll__link_probe(const coll_algo_ctx_t *ctx,
                               coll_link_est_t *out) {
  probe_t P;
  double small = 0, large = 0, v[2];
  coll_status_t s;
  memset(&P, 0, sizeof P);
  memset(out, 0, sizeof *out);
  if (ctx->world < 2) return COLL_OK;
  coll__algo_run_init(&P.run, ctx, "link probe", ALGO_PH_PROBE);
  P.next = (ctx->rank + 1) % ctx->world;
  P.prev = (ctx->rank + ctx->world - 1) % ctx->world;
  P.sbuf = calloc(1, COLL_LINK_PROBE_BYTES);
  P.rbuf = malloc(COLL_LINK_PROBE_BYTES);
  if (P.sbuf == NULL || P.rbuf == NULL) {
    free(P.sbuf);
    free(P.rbuf);
    return coll__algo_fail(&P.run, COLL_ERR_NO_MEMORY, "probe buffers");
  }
  if (probe_body(&P, &small, &large) != COLL_OK)
    coll__algo_cancel(&P.run, P.req, 2);
  free(P.sbuf);
  free(P.rbuf);
  COLL_CHECK(coll__algo_done(&P.run));
  v[0] = small;
  v[1] = large > small ? (large - small) / (double)COLL_LINK_PROBE_BYTES : 0;
  s = coll__allreduce_rd(ctx, v, v, 2, COLL_F64, COLL_MAX);
  if (s != COLL_OK) return s;
  out->alpha_s = v[0];
  out->s_per_byte = v[1];
  return COLL_OK;
}

/* Steps of recursive doubling for n ranks: log2 of the largest power of
 * two <= n, and two more (fold in, result out) when n is not one. */
static int rd_steps(int n) {
  int p = 1, k = 0;
  while (p * 2 <= n) {
    p *= 2;
    k++;
  }
  return p < n ? k + 2 : k;
}

/* Where an algorithm of `steps` steps that sends `share` of the buffer in
 * all (over its steps) gets faster than doubling's k steps of the whole
 * buffer: alpha (steps - k) / (c (k - share)); SIZE_MAX where it never
 * does, clamped to [COLL_LINK_RING_MIN, COLL_LINK_RING_MAX]. */
static size_t crossover(int n, double steps, double share,
                        const coll_link_est_t *e) {
  int k = rd_steps(n);
  double denom = k - share, bytes;
  if (n <= 2 || denom <= 0) return SIZE_MAX;
  if (e->s_per_byte <= 0) return COLL_LINK_RING_MAX;
  bytes = e->alpha_s * (steps - k) / (e->s_per_byte * denom);
  if (!(bytes >= (double)COLL_LINK_RING_MIN)) return COLL_LINK_RING_MIN;
  if (bytes >= (double)COLL_LINK_RING_MAX) return COLL_LINK_RING_MAX;
  return (size_t)bytes;
}

size_t coll__link_ring_threshold(int n, const coll_link_est_t *e) {
  return crossover(n, 2.0 * (n - 1), 2.0 * (n - 1) / n, e);
}

size_t coll__link_rh_threshold(int n, const coll_link_est_t *e) {
  int k = rd_steps(n);
  if ((n & (n - 1)) != 0) return SIZE_MAX;
  return crossover(n, 2.0 * k, 2.0 * (n - 1) / n, e);
}

/* The two-level allreduce: a reduce-scatter and an allgather within the
 * host (2 (L - 1) steps of 1/L of the buffer) and a ring among the H
 * hosts for each slice (2 (H - 1) steps of 1/(L H)). On 2 hosts x 2 ranks
 * that is 4 alpha / c, half the flat ring's 8 alpha / c. */
size_t coll__link_two_level_threshold(int hosts, int local,
                                      const coll_link_est_t *e) {
  double L = local, H = hosts;
  return crossover(hosts * local, 2.0 * (L - 1) + 2.0 * (H - 1),
                   2.0 * (L - 1) / L + 2.0 * (H - 1) / (L * H), e);
}
