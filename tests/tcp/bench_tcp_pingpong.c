/* SPDX-License-Identifier: Apache-2.0 */
/* bench_tcp_pingpong.c: latency and bandwidth of the TCP transport between
 * two processes on loopback: ping-pong for small messages, a simultaneous
 * exchange (what a 2-rank allreduce does), and streaming with a window.
 *
 *   bench_tcp_pingpong [--ip ADDR] [--spin-ns N] [--sock-buf BYTES]
 *                      [--seconds S] [--stream-mib M]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "tcp_test_util.h"

#define WINDOW 4

static double g_seconds = 0.5;
static size_t g_stream_bytes = (size_t)1 << 30;

static coll_status_t wait1(coll_transport_t *t, coll_treq_t r) {
  return coll__t_wait(t, r, coll__deadline(60000), NULL);
}

#define CK(call)                                                            \
  do {                                                                      \
    coll_status_t s_ = (call);                                              \
    if (s_ != COLL_OK) {                                                    \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, coll_last_error()); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* Both ranks agree on an iteration count: rank 0 picks, rank 1 learns. */
static long agree_iters(coll_transport_t *t, int rank, long n) {
  CK(rank == 0 ? coll__t_send(t, 1, 900, &n, sizeof n, -1)
               : coll__t_recv(t, 0, 900, &n, sizeof n, -1));
  return n;
}

static void pingpong_once(coll_transport_t *t, int rank, char *buf, size_t n) {
  if (rank == 0) {
    CK(coll__t_send(t, 1, 1, buf, n, -1));
    CK(coll__t_recv(t, 1, 1, buf, n, -1));
  } else {
    CK(coll__t_recv(t, 0, 1, buf, n, -1));
    CK(coll__t_send(t, 0, 1, buf, n, -1));
  }
}

static void exchange_once(coll_transport_t *t, int rank, char *s, char *r,
                          size_t n) {
  coll_treq_t a, b;
  CK(coll__t_irecv(t, 1 - rank, 2, r, n, &a));
  CK(coll__t_isend(t, 1 - rank, 2, s, n, &b));
  CK(wait1(t, b));
  CK(wait1(t, a));
}

/* Runs `once` until about g_seconds pass (rank 0 calibrates); returns the
 * seconds per iteration. */
typedef void (*once_fn)(coll_transport_t *, int, char *, char *, size_t);

static void pp_adapter(coll_transport_t *t, int rank, char *s, char *r,
                       size_t n) {
  (void)r;
  pingpong_once(t, rank, s, n);
}

static double timed(coll_transport_t *t, int rank, once_fn fn, char *s, char *r,
                    size_t n) {
  long i, iters = 10;
  uint64_t t0;
  for (i = 0; i < 20; i++) fn(t, rank, s, r, n); /* warm up */
  t0 = coll__now_ns();
  for (i = 0; i < iters; i++) fn(t, rank, s, r, n);
  iters = (long)(g_seconds * 1e9 * (double)iters /
                 (double)(coll__now_ns() - t0 + 1));
  if (iters < 10) iters = 10;
  iters = agree_iters(t, rank, iters);
  t0 = coll__now_ns();
  for (i = 0; i < iters; i++) fn(t, rank, s, r, n);
  return (double)(coll__now_ns() - t0) / 1e9 / (double)iters;
}

/* Rank 0 streams `count` messages of n bytes with WINDOW in flight; rank 1
 * receives them; a final byte comes back. Returns seconds. */
static double stream(coll_transport_t *t, int rank, char *buf, size_t n,
                     long count) {
  coll_treq_t w[WINDOW];
  char ack = 0;
  long i;
  uint64_t t0 = coll__now_ns();
  for (i = 0; i < count; i++) {
    if (i >= WINDOW) CK(wait1(t, w[i % WINDOW]));
    if (rank == 0)
      CK(coll__t_isend(t, 1, 3, buf, n, &w[i % WINDOW]));
    else
      CK(coll__t_irecv(t, 0, 3, buf + (size_t)(i % WINDOW) * n, n,
                       &w[i % WINDOW]));
  }
  for (i = count > WINDOW ? count - WINDOW : 0; i < count; i++)
    CK(wait1(t, w[i % WINDOW]));
  if (rank == 0)
    CK(coll__t_recv(t, 1, 4, &ack, 1, -1));
  else
    CK(coll__t_send(t, 0, 4, &ack, 1, -1));
  return (double)(coll__now_ns() - t0) / 1e9;
}

static int bench(tt_job_t *job, int rank, int world, void *arg) {
  static const size_t lat[] = {8, 4096};
  static const size_t bw[] = {1 << 20, 16 << 20};
  coll_transport_t *t;
  char *s = calloc(1, WINDOW * ((size_t)16 << 20));
  char *r = calloc(1, (size_t)16 << 20);
  size_t i;
  (void)arg;
  if (s == NULL || r == NULL) return 3;
  /* Touch every page now, so no page fault is timed. */
  memset(s, 1, WINDOW * ((size_t)16 << 20));
  memset(r, 2, (size_t)16 << 20);
  CK(tt_create(job, rank, world, &t));
  for (i = 0; i < 2; i++) {
    double pp = timed(t, rank, pp_adapter, s, r, lat[i]);
    double ex = timed(t, rank, exchange_once, s, r, lat[i]);
    if (rank == 0)
      printf("%8zu B  ping-pong one-way %7.2f us   exchange %7.2f us\n", lat[i],
             pp / 2 * 1e6, ex * 1e6);
  }
  for (i = 0; i < 2; i++) {
    long count = (long)(g_stream_bytes / bw[i]);
    double sec = stream(t, rank, rank == 0 ? r : s, bw[i], count);
    double ex = timed(t, rank, exchange_once, s, r, bw[i]);
    if (rank == 0)
      printf(
          "%8zu B  stream %6.2f GB/s   exchange %6.2f GB/s each way "
          "(%.0f us)\n",
          bw[i], (double)bw[i] * (double)count / sec / 1e9,
          (double)bw[i] / ex / 1e9, ex * 1e6);
  }
  fflush(stdout);
  coll_transport_destroy(t);
  free(s);
  free(r);
  return 0;
}

int main(int argc, char **argv) {
  tt_job_t job;
  const char *ip = "127.0.0.1";
  char msg[256];
  int i, rc;
  coll_tcp_xopts_t x;
  coll__tcp_xopts_default(&x);
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ip") == 0)
      ip = argv[i + 1];
    else if (strcmp(argv[i], "--spin-ns") == 0)
      x.spin_ns = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--sock-buf") == 0)
      x.sock_buf = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seconds") == 0)
      g_seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--stream-mib") == 0)
      g_stream_bytes = (size_t)atol(argv[i + 1]) << 20;
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (tt_job_init(&job, ip, NULL) != 0) return 1;
  job.x = x;
  printf("tcp transport, 2 processes on %s, spin %lld ns, socket buffers %d\n",
         ip, (long long)x.spin_ns, x.sock_buf);
  rc = tt_run(&job, 2, bench, NULL, 600000, msg, sizeof msg);
  if (rc != 0) fprintf(stderr, "bench failed: %s\n", msg);
  tt_job_fini(&job);
  return rc == 0 ? 0 : 1;
}
