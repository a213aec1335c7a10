/* SPDX-License-Identifier: Apache-2.0 */
/* memcpy_rate.c: how fast one core copies memory right now, the figure
 * that tells which of its modes this machine is in for a sitting (the
 * same host has measured Open MPI vader at 3.5 and at 7.4 GB/s at 16 MiB
 * from one sitting to the next). vs-peers.sh prints it before and after
 * its runs, so a table carries the mode it was measured in.
 *
 *   memcpy_rate [bytes]      (default 16 MiB)
 *
 * Prints "memcpy <bytes> B: <GB/s> GB/s" (GB = 1e9 bytes), the median of
 * 15 timed copies between two buffers already touched, one thread. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t bytes = 16u << 20;
  if (argc > 1) {
    char *end = NULL;
    unsigned long long v = strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v == 0) {
      fprintf(stderr, "memcpy_rate: '%s' is not a byte count above 0\n",
              argv[1]);
      return 2;
    }
    bytes = (size_t)v;
  }
  char *src = malloc(bytes), *dst = malloc(bytes);
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "memcpy_rate: cannot allocate 2 x %zu bytes\n", bytes);
    free(src);
    free(dst);
    return 1;
  }
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  enum { RUNS = 15 };
  double rate[RUNS];
  for (int i = 0; i < RUNS; i++) {
    double t0 = now_s();
    memcpy(dst, src, bytes);
    double t = now_s() - t0;
    /* Read one byte back so the copy cannot be dropped. */
    if (dst[bytes / 2] != 1) {
      fprintf(stderr, "memcpy_rate: the copy did not land\n");
      return 1;
    }
    dst[bytes / 2] = 2;
    rate[i] = t > 0 ? (double)bytes / t / 1e9 : 0;
  }
  qsort(rate, RUNS, sizeof rate[0], by_value);
  printf("memcpy %zu B: %.2f GB/s\n", bytes, rate[RUNS / 2]);
  free(src);
  free(dst);
  return 0;
}
