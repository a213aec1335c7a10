/* SPDX-License-Identifier: Apache-2.0 */
/* peer.c: --peer-protocol: the measurement bench/'s drivers make
 * (bench/bench_loop.h), run through coll-perf (also on ranks as threads) so
 * that its rows sit beside Open MPI's and Gloo's. The same sizes (4 KiB,
 * 64 KiB, 1 MiB, 16 MiB, 64 MiB; -b/-e, when given, keep those between),
 * in-place f32 SUM allreduce on a zeroed buffer, and per size:
 *
 *   1. 20 warm-up calls (2 above 1 MiB), then 20 (2) timed ones to estimate
 *      how many calls fill BENCH_SECONDS (default 0.5 s); the ranks agree
 *      on that count by averaging it with an allreduce (at least 3);
 *   2. a one-float allreduce as a rough barrier, then the timed loop;
 *   3. the time per call averaged over ranks (an allreduce of the times);
 *   4. one allreduce of rank r's (r+1)*(i%13+1), checked exactly on every
 *      rank, and whether any rank saw a wrong element;
 *
 * and rank 0 prints "bytes time_us algbw_GBps busbw_GBps" in the drivers'
 * columns (busbw = algbw * 2(n-1)/n, GB = 1e9 bytes), VERIFY-FAILED on a
 * row where a rank saw a wrong element. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "perf.h"

static const size_t peer_sizes[] = {4096, 65536, 1u << 20, 16u << 20,
                                    64u << 20};

static double now_s(void) { return (double)uv_hrtime() / 1e9; }

static int ar(const perf_rank_t *pr, float *buf, size_t count) {
  coll_status_t s =
      coll_allreduce(pr->comm, buf, buf, count, COLL_F32, COLL_SUM, NULL);
  if (s == COLL_OK) return 0;
  if (s != COLL_ERR_ABORTED || pr->fail == NULL)
    fprintf(stderr,
            "coll-perf: rank %d: allreduce (%zu bytes) failed: %s: %s\n",
            pr->rank, count * sizeof(float), coll_status_name(s),
            coll_last_error());
  if (pr->fail != NULL) pr->fail(pr->fail_ctx);
  return -1;
}

/* One float summed over the ranks. */
static int ar_scalar(const perf_rank_t *pr, float v, float *out) {
  float x = v;
  if (ar(pr, &x, 1) != 0) return -1;
  *out = x;
  return 0;
}

static double target_seconds(void) {
  const char *e = getenv("BENCH_SECONDS");
  double t = e != NULL ? atof(e) : 0.5;
  return t > 0 ? t : 0.5;
}

/* Times one size; *bad is 1 when any rank saw a wrong element. */
static int peer_size(const perf_rank_t *pr, size_t bytes, double *per_us,
                     int *bad) {
  size_t count = bytes / sizeof(float), i;
  void *raw;
  float *buf = perf_buf_alloc(count * sizeof *buf, pr->o->offset, 1, &raw), sum;
  int warm = bytes <= (1u << 20) ? 20 : 2, k, rc = -1, n = pr->world;
  long iters, it, wrong = 0;
  double t0, est;
  if (buf == NULL) {
    fprintf(stderr, "coll-perf: rank %d: out of memory\n", pr->rank);
    if (pr->fail != NULL) pr->fail(pr->fail_ctx);
    return -1;
  }
  for (k = 0; k < warm; k++)
    if (ar(pr, buf, count) != 0) goto out;
  t0 = now_s();
  for (k = 0; k < warm; k++)
    if (ar(pr, buf, count) != 0) goto out;
  est = target_seconds() / ((now_s() - t0) / warm);
  if (est < 3) est = 3;
  if (est > 1000000) est = 1000000;
  if (ar_scalar(pr, (float)(long)est, &sum) != 0) goto out;
  iters = (long)(sum / (float)n);
  if (iters < 3) iters = 3;
  if (ar_scalar(pr, 0.0f, &sum) != 0) goto out;
  t0 = now_s();
  for (it = 0; it < iters; it++)
    if (ar(pr, buf, count) != 0) goto out;
  if (ar_scalar(pr, (float)((now_s() - t0) / (double)iters * 1e6), &sum) != 0)
    goto out;
  *per_us = sum / n;
  for (i = 0; i < count; i++) buf[i] = (float)((pr->rank + 1) * (i % 13 + 1));
  if (ar(pr, buf, count) != 0) goto out;
  for (i = 0; i < count; i++)
    if (buf[i] != (float)(n * (n + 1) / 2 * (long)(i % 13 + 1))) wrong++;
  if (ar_scalar(pr, wrong != 0 ? 1.0f : 0.0f, &sum) != 0) goto out;
  *bad = sum != 0;
  rc = 0;
out:
  perf_buf_free(raw);
  return rc;
}

int perf_peer_bench(const perf_rank_t *pr) {
  const perf_opts_t *o = pr->o;
  int failed = 0, bad = 0;
  size_t s;
  if (pr->rank == 0) {
    printf("# peer=coll n=%d target_s=%.2f\n", pr->world, target_seconds());
    printf("%10s %12s %10s %10s\n", "bytes", "time_us", "algbw_GBps",
           "busbw_GBps");
    fflush(stdout);
  }
  for (s = 0; s < sizeof peer_sizes / sizeof peer_sizes[0]; s++) {
    size_t bytes = peer_sizes[s];
    double per_us = 0, alg;
    if (bytes < o->min_bytes || bytes > o->max_bytes) continue;
    if (peer_size(pr, bytes, &per_us, &bad) != 0) return PERF_EXIT_FAILED;
    failed |= bad;
    if (pr->rank != 0) continue;
    alg = per_us > 0 ? (double)bytes / (per_us * 1e-6) / 1e9 : 0;
    printf("%10zu %12.2f %10.3f %10.3f%s\n", bytes, per_us, alg,
           alg * 2.0 * (pr->world - 1) / pr->world,
           bad ? "  VERIFY-FAILED" : "");
    fflush(stdout);
  }
  return failed ? PERF_EXIT_FAILED : 0;
}
