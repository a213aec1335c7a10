/* SPDX-License-Identifier: Apache-2.0 */
/* cost.c: --cost, what one collective call costs the caller: for each size
 * an f32 sum allreduce, its i-form timed until it returns ("issue": on an
 * NCCL comm, until the work is on the stream) and until coll_wait returned
 * ("done"); beside it, where the device has a raw path, the same allreduce
 * straight through NCCL, and the difference (what libcoll adds). The two
 * alternate call by call, so a busy machine slows both alike, and each
 * figure is the slowest rank's median. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "perf.h"

typedef struct cost_bufs {
  size_t count;
  float *send, *recv; /* device memory with --nccl, else host */
  float *host;        /* the result read back */
  void *raw;          /* the device's raw NCCL comm, if any */
} cost_bufs_t;

/* The slowest rank's means, in us: libcoll's issue and done, NCCL's. */
typedef struct cost_row {
  double issue, done, raw_issue, raw_done;
} cost_row_t;

static void *buf_alloc(const perf_rank_t *pr, const perf_device_t *dev,
                       size_t bytes) {
  return dev != NULL ? dev->alloc(pr->rank, bytes) : calloc(1, bytes);
}

static void buf_free(const perf_device_t *dev, void *p) {
  if (dev != NULL)
    dev->free(p);
  else
    free(p);
}

/* send := r + i % 7 on rank r; the sum over ranks is checked after one
 * call. */
static int fill_and_check(const perf_rank_t *pr, const perf_device_t *dev,
                          cost_bufs_t *b) {
  size_t i, bytes = b->count * sizeof(float);
  int w = pr->world;
  coll_status_t s;
  for (i = 0; i < b->count; i++) b->host[i] = (float)(pr->rank + (int)(i % 7));
  if (dev != NULL)
    dev->upload(b->send, b->host, bytes);
  else
    memcpy(b->send, b->host, bytes);
  s = coll_allreduce(pr->comm, b->send, b->recv, b->count, COLL_F32, COLL_SUM,
                     NULL);
  if (s != COLL_OK) {
    fprintf(stderr, "coll-perf: rank %d: allreduce: %s: %s\n", pr->rank,
            coll_status_name(s), coll_last_error());
    return -1;
  }
  if (dev != NULL)
    dev->download(b->host, b->recv, bytes);
  else
    memcpy(b->host, b->recv, bytes);
  for (i = 0; i < b->count; i++) {
    float want = (float)(w * (w - 1) / 2 + w * (int)(i % 7));
    if (b->host[i] != want) {
      fprintf(stderr, "coll-perf: rank %d: element %zu is %g, want %g\n",
              pr->rank, i, b->host[i], want);
      return -1;
    }
  }
  return 0;
}

/* One call through libcoll: its issue and done times (us). */
static int call_libcoll(const perf_rank_t *pr, cost_bufs_t *b, double *issue,
                        double *done) {
  coll_request_t *req = NULL;
  uint64_t t0 = uv_hrtime(), t1;
  coll_status_t s = coll_iallreduce(pr->comm, b->send, b->recv, b->count,
                                    COLL_F32, COLL_SUM, NULL, &req);
  t1 = uv_hrtime();
  if (s == COLL_OK) s = coll_wait(req);
  if (s != COLL_OK) {
    fprintf(stderr, "coll-perf: rank %d: iallreduce: %s: %s\n", pr->rank,
            coll_status_name(s), coll_last_error());
    return -1;
  }
  *issue = (double)(t1 - t0) / 1e3;
  *done = (double)(uv_hrtime() - t0) / 1e3;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The timed loop: libcoll's call and NCCL's (when the device has one)
 * alternate; t[0..3] := the medians of libcoll's issue and done, NCCL's
 * issue and done (-1 without NCCL's). */
static int time_calls(const perf_rank_t *pr, const perf_device_t *dev,
                      cost_bufs_t *b, double *t) {
  int n = pr->o->iters, i, k, rc = 0;
  double *v = malloc((size_t)n * 4 * sizeof *v);
  if (v == NULL) return -1;
  for (i = 0; i < n && rc == 0; i++) {
    rc = call_libcoll(pr, b, &v[i], &v[n + i]);
    if (rc == 0 && b->raw != NULL &&
        dev->raw_call(b->raw, b->send, b->recv, b->count, &v[2 * n + i],
                      &v[3 * n + i]) != 0) {
      fprintf(stderr, "coll-perf: rank %d: NCCL's own allreduce failed\n",
              pr->rank);
      rc = -1;
    }
  }
  for (k = 0; k < 4 && rc == 0; k++)
    t[k] = k >= 2 && b->raw == NULL ? -1 : median(v + (size_t)k * n, n);
  free(v);
  return rc;
}

/* One size: a checked call, warm-up, the timed loop after a barrier, the
 * slowest rank's medians. */
static int cost_size(const perf_rank_t *pr, const perf_device_t *dev,
                     cost_bufs_t *b, cost_row_t *row) {
  double t[4] = {0, 0, 0, 0}, x, y;
  coll_status_t s;
  int i;
  if (fill_and_check(pr, dev, b) != 0) return -1;
  for (i = 0; i < pr->o->warmup; i++) {
    if (call_libcoll(pr, b, &x, &y) != 0) return -1;
    if (b->raw != NULL &&
        dev->raw_call(b->raw, b->send, b->recv, b->count, &x, &y) != 0)
      return -1;
  }
  if (coll_barrier(pr->comm) != COLL_OK) return -1;
  if (time_calls(pr, dev, b, t) != 0) return -1;
  /* The slowest rank's figures; on NCCL comms the reduction runs on the
   * device like the timed calls. */
  if (dev != NULL) {
    double *dt = dev->alloc(pr->rank, sizeof t);
    if (dt == NULL) return -1;
    dev->upload(dt, t, sizeof t);
    s = coll_allreduce(pr->comm, dt, dt, 4, COLL_F64, COLL_MAX, NULL);
    dev->download(t, dt, sizeof t);
    dev->free(dt);
  } else {
    s = coll_allreduce(pr->comm, t, t, 4, COLL_F64, COLL_MAX, NULL);
  }
  if (s != COLL_OK) return -1;
  row->issue = t[0];
  row->done = t[1];
  row->raw_issue = t[2];
  row->raw_done = t[3];
  return 0;
}

static void print_head(const perf_rank_t *pr, const perf_device_t *dev) {
  printf(
      "# coll-perf --cost: f32 sum allreduce, %d ranks (%s), %s comm%s, "
      "%d iterations after %d of warm-up; us per call, the slowest "
      "rank's median\n",
      pr->world, pr->mode, coll_comm_backend(pr->comm),
      dev != NULL ? ", device buffers" : "", pr->o->iters, pr->o->warmup);
  printf(
      "# issue: until coll_iallreduce returned (NCCL: the work is on the "
      "stream); done: until coll_wait returned; raw: the same straight "
      "through NCCL (%s)\n",
      dev != NULL && dev->raw_open != NULL ? dev->name : "none here");
  printf("%12s %12s %10s %10s %10s %10s %10s %10s\n", "size", "count", "issue",
         "done", "raw-issue", "raw-done", "+issue", "+done");
}

static void print_row(size_t bytes, size_t count, const cost_row_t *r) {
  if (r->raw_issue < 0) {
    printf("%12zu %12zu %10.2f %10.2f %10s %10s %10s %10s\n", bytes, count,
           r->issue, r->done, "-", "-", "-", "-");
    return;
  }
  printf("%12zu %12zu %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", bytes,
         count, r->issue, r->done, r->raw_issue, r->raw_done,
         r->issue - r->raw_issue, r->done - r->raw_done);
}

int perf_cost_bench(const perf_rank_t *pr, const perf_device_t *dev) {
  const perf_opts_t *o = pr->o;
  size_t bytes = o->min_bytes;
  cost_bufs_t b;
  cost_row_t row;
  int rc = 0;
  memset(&b, 0, sizeof b);
  if (dev != NULL) dev->select(pr->rank);
  if (dev != NULL && dev->raw_open != NULL)
    b.raw = dev->raw_open(pr->rank, pr->world);
  if (pr->rank == 0) print_head(pr, dev);
  for (;;) {
    b.count = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
    b.send = buf_alloc(pr, dev, b.count * sizeof(float));
    b.recv = buf_alloc(pr, dev, b.count * sizeof(float));
    b.host = malloc(b.count * sizeof(float));
    if (b.send == NULL || b.recv == NULL || b.host == NULL) {
      fprintf(stderr, "coll-perf: rank %d: out of memory\n", pr->rank);
      rc = -1;
    }
    if (rc == 0) rc = cost_size(pr, dev, &b, &row);
    if (rc == 0 && pr->rank == 0)
      print_row(b.count * sizeof(float), b.count, &row);
    buf_free(dev, b.send);
    buf_free(dev, b.recv);
    free(b.host);
    if (rc != 0 || bytes > o->max_bytes / o->factor) break;
    bytes *= o->factor;
  }
  if (b.raw != NULL) dev->raw_close(b.raw);
  if (rc != 0 && pr->fail != NULL) pr->fail(pr->fail_ctx);
  return rc != 0 ? PERF_EXIT_FAILED : 0;
}
