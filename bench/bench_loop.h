/* SPDX-License-Identifier: Apache-2.0 */
/* bench_loop.h: the one timing loop every allreduce driver of bench/ runs
 * (libcoll, Open MPI, Gloo, the plain TCP ring), so their rows compare.
 *
 * A driver supplies an in-place f32 SUM allreduce of `count` floats and
 * calls bench_loop_run(). For each size (4 KiB, 64 KiB, 1 MiB, 16 MiB,
 * 64 MiB; BENCH_SIZES=a,b,... in bytes picks others):
 *
 *   1. a zeroed, 64-byte-aligned buffer (zeros stay zeros: no overflow,
 *      no denormals); W warm-up calls (20 up to 1 MiB, else 2);
 *   2. W timed calls to estimate how many fill BENCH_SECONDS (default 0.5;
 *      at least 3, at most a million); the ranks agree on the mean of
 *      their estimates through the allreduce itself;
 *   3. a one-float allreduce as a barrier, then the timed loop;
 *   4. the time per call, averaged over the ranks;
 *   5. one allreduce of rank r's (r+1)*(i%13+1), checked exactly on every
 *      rank against n(n+1)/2*(i%13+1); whether any rank saw a wrong element.
 *
 * Rank 0 prints "# peer=NAME n=N target_s=T", then per size
 * "bytes time_us algbw_GBps busbw_GBps" (algbw = bytes/time, GB = 1e9
 * bytes; busbw = algbw * 2(n-1)/n, the nccl-tests convention), with
 * "VERIFY-FAILED" after a row where a rank saw a wrong element, and on
 * stderr one progress line per size. The return value is 1 after a wrong
 * element, else 0. Header-only, C11 or C++. */
#ifndef COLL_BENCH_LOOP_H
#define COLL_BENCH_LOOP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*bench_allreduce_fn)(float *buf, size_t count, void *ctx);

static double bench_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double bench_target_s(void) {
  const char *e = getenv("BENCH_SECONDS");
  double t = e != NULL ? atof(e) : 0.5;
  return t > 0 ? t : 0.5;
}

/* The sizes to run: BENCH_SIZES (bytes, comma-separated, multiples of 4)
 * or the five defaults. Returns how many were written to out (max cap). */
static int bench_sizes(size_t *out, int cap) {
  static const size_t defaults[] = {4096, 65536, 1u << 20, 16u << 20,
                                    64u << 20};
  const char *e = getenv("BENCH_SIZES");
  int n = 0;
  if (e == NULL || *e == '\0') {
    for (n = 0; n < 5 && n < cap; n++) out[n] = defaults[n];
    return n;
  }
  while (*e != '\0' && n < cap) {
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    if (end == e) break;
    if (v >= 4 && v % 4 == 0) out[n++] = (size_t)v;
    e = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') break;
  }
  return n;
}

/* One float summed over the ranks (every rank gets the same). */
static float bench_sum1(bench_allreduce_fn ar, void *ctx, float v) {
  static float x;
  x = v;
  ar(&x, 1, ctx);
  return x;
}

/* Times one size; returns the mean time per call in us, *bad set when any
 * rank saw a wrong element. */
static double bench_one_size(bench_allreduce_fn ar, void *ctx, int rank, int n,
                             size_t bytes, int *bad) {
  size_t count = bytes / sizeof(float), i;
  float *buf = (float *)aligned_alloc(64, (bytes + 63) / 64 * 64);
  int warm = bytes <= (1u << 20) ? 20 : 2, k;
  long iters, it, wrong = 0;
  double t0, est, per_us;
  if (buf == NULL) {
    fprintf(stderr, "bench: rank %d: out of memory (%zu bytes)\n", rank, bytes);
    exit(1);
  }
  memset(buf, 0, bytes);
  for (k = 0; k < warm; k++) ar(buf, count, ctx);
  t0 = bench_now_s();
  for (k = 0; k < warm; k++) ar(buf, count, ctx);
  est = bench_target_s() / ((bench_now_s() - t0) / warm);
  if (est < 3) est = 3;
  if (est > 1e6) est = 1e6;
  iters = (long)(bench_sum1(ar, ctx, (float)(long)est) / (float)n);
  if (iters < 3) iters = 3;
  bench_sum1(ar, ctx, 0.0f);
  t0 = bench_now_s();
  for (it = 0; it < iters; it++) ar(buf, count, ctx);
  per_us = (bench_now_s() - t0) / (double)iters * 1e6;
  per_us = bench_sum1(ar, ctx, (float)per_us) / (float)n;
  for (i = 0; i < count; i++) buf[i] = (float)((rank + 1) * (long)(i % 13 + 1));
  ar(buf, count, ctx);
  for (i = 0; i < count; i++)
    if (buf[i] != (float)((long)n * (n + 1) / 2 * (long)(i % 13 + 1))) wrong++;
  *bad = bench_sum1(ar, ctx, wrong != 0 ? 1.0f : 0.0f) != 0.0f;
  free(buf);
  if (rank == 0)
    fprintf(stderr, "# %d ranks, %zu bytes: %ld calls, %s\n", n, bytes, iters,
            *bad ? "VERIFY FAILED" : "verified");
  return per_us;
}

static int bench_loop_run(const char *name, int rank, int n,
                          bench_allreduce_fn ar, void *ctx) {
  size_t sizes[32];
  int nsizes = bench_sizes(sizes, 32), s, failed = 0;
  if (rank == 0) {
    printf("# peer=%s n=%d target_s=%.2f\n", name, n, bench_target_s());
    printf("%10s %12s %10s %10s\n", "bytes", "time_us", "algbw_GBps",
           "busbw_GBps");
    fflush(stdout);
  }
  for (s = 0; s < nsizes; s++) {
    int bad = 0;
    double per_us = bench_one_size(ar, ctx, rank, n, sizes[s], &bad);
    double alg = per_us > 0 ? (double)sizes[s] / (per_us * 1e-6) / 1e9 : 0;
    failed |= bad;
    if (rank != 0) continue;
    printf("%10zu %12.2f %10.3f %10.3f%s\n", sizes[s], per_us, alg,
           alg * 2.0 * (n - 1) / n, bad ? "  VERIFY-FAILED" : "");
    fflush(stdout);
  }
  return failed;
}

#endif
