/* SPDX-License-Identifier: Apache-2.0 */
/* overlap.c: whether a nonblocking allreduce moves while its ranks compute,
 * as DDP overlaps its gradient allreduce with the backward pass: each try
 * issues an in-place f32 SUM iallreduce, computes on the CPU for a fixed
 * time without calling libcoll, then asks coll_test() whether it is done
 * and waits for it. Run by bench/overlap.sh under coll-run; rank 0 prints
 *
 *   overlap ranks N bytes B compute_ms C alone_ms A done K tries T
 *     wait_ms_median W wait_ms_max X
 *
 * (one line): A is the median time of the allreduce alone (blocking),
 * K the tries in which every rank's request was done when its compute
 * ended, W and X how long the ranks then still waited (the slowest rank
 * of each try; median and maximum over the tries). Every try's result is
 * checked exactly; a wrong element makes the exit code 1.
 *
 * OVERLAP_BYTES (default 16 MiB), OVERLAP_COMPUTE_MS (50), OVERLAP_TRIES
 * (24) set the case. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static long env_long(const char *name, long dflt) {
  const char *e = getenv(name);
  long v = e != NULL ? strtol(e, NULL, 10) : 0;
  return v > 0 ? v : dflt;
}

static int fail(const char *what, coll_status_t s) {
  fprintf(stderr, "overlap: %s: %s: %s\n", what, coll_status_name(s),
          coll_last_error());
  exit(1);
}

/* Busy arithmetic on a small array (it stays in cache and never touches
 * the allreduce's buffer) until ms have passed, reading the clock every
 * 512 steps. The sum is returned so the work is not optimised away. */
static double compute(double ms) {
  static double a[512];
  double end = now_ms() + ms, acc = 0;
  while (now_ms() < end)
    for (int i = 0; i < 512; i++) {
      a[i] = a[i] * 0.999 + (double)i * 1e-3;
      acc += a[i];
    }
  return acc;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rank r's (r+1)*(k%13+1): the sum over n ranks is exact in f32. */
static void fill(float *buf, size_t count, int rank, int k) {
  float v = (float)((rank + 1) * (k % 13 + 1));
  for (size_t i = 0; i < count; i++) buf[i] = v;
}

static int check(const float *buf, size_t count, int n, int k) {
  float want = (float)(n * (n + 1) / 2 * (k % 13 + 1));
  for (size_t i = 0; i < count; i++)
    if (buf[i] != want) return 0;
  return 1;
}

static void allreduce_f64(coll_comm_t *c, double *v, int count, coll_op_t op) {
  coll_status_t s = coll_allreduce(c, v, v, (size_t)count, COLL_F64, op, NULL);
  if (s != COLL_OK) fail("coll_allreduce (figures)", s);
}

int main(void) {
  size_t bytes = (size_t)env_long("OVERLAP_BYTES", 16L << 20);
  double compute_ms = (double)env_long("OVERLAP_COMPUTE_MS", 50);
  int tries = (int)env_long("OVERLAP_TRIES", 24), rank, n, done_all = 0;
  size_t count = bytes / sizeof(float);
  coll_comm_t *c = NULL;
  coll_status_t s = coll_comm_init_env(NULL, &c);
  double alone[5], *waits, bad = 0;
  volatile double sink = 0; /* keeps the compute */
  float *buf = malloc(count * sizeof *buf);
  if (s != COLL_OK) fail("coll_comm_init_env", s);
  waits = malloc((size_t)tries * sizeof *waits);
  if (buf == NULL || waits == NULL) {
    fprintf(stderr, "overlap: out of memory\n");
    return 1;
  }
  rank = coll_comm_rank(c);
  n = coll_comm_size(c);

  /* The allreduce alone: one warm-up, then 5 timed (the slowest rank's). */
  for (int k = -1; k < 5; k++) {
    double t0, t1 = 0;
    fill(buf, count, rank, k + 13);
    allreduce_f64(c, &t1, 1, COLL_SUM); /* a barrier */
    t0 = now_ms();
    s = coll_allreduce(c, buf, buf, count, COLL_F32, COLL_SUM, NULL);
    if (s != COLL_OK) fail("coll_allreduce", s);
    t1 = now_ms() - t0;
    if (!check(buf, count, n, k + 13)) bad = 1;
    allreduce_f64(c, &t1, 1, COLL_MAX);
    if (k >= 0) alone[k] = t1;
  }

  for (int k = 0; k < tries; k++) {
    coll_request_t *req = NULL;
    double fig[2] = {0, 0}, t0;
    int done = 0;
    fill(buf, count, rank, k);
    allreduce_f64(c, fig, 1, COLL_SUM); /* a barrier */
    s = coll_iallreduce(c, buf, buf, count, COLL_F32, COLL_SUM, NULL, &req);
    if (s != COLL_OK) fail("coll_iallreduce", s);
    sink += compute(compute_ms);
    s = coll_test(req, &done);
    if (s != COLL_OK) fail("coll_test", s);
    t0 = now_ms();
    s = coll_wait(req);
    if (s != COLL_OK) fail("coll_wait", s);
    if (!check(buf, count, n, k)) bad = 1;
    /* Not done on some rank: the MAX of "not done" and of the wait. */
    fig[0] = done ? 0 : 1;
    fig[1] = now_ms() - t0;
    allreduce_f64(c, fig, 2, COLL_MAX);
    done_all += fig[0] == 0;
    waits[k] = fig[1];
  }
  allreduce_f64(c, &bad, 1, COLL_MAX);
  if (rank == 0) {
    double wmed = median(waits, tries), wmax = waits[tries - 1];
    printf(
        "overlap ranks %d bytes %zu compute_ms %.0f alone_ms %.2f done %d "
        "tries %d wait_ms_median %.2f wait_ms_max %.2f%s\n",
        n, bytes, compute_ms, median(alone, 5), done_all, tries, wmed, wmax,
        bad ? " VERIFY-FAILED" : "");
  }
  coll_comm_destroy(c);
  free(waits);
  free(buf);
  return bad ? 1 : 0;
}
