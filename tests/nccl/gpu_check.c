/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check.c: checks on a real GPU, run by tests/gpu/run.sh (CI has none).
 *   coll_gpu_check world1    a world-1 NCCL comm: allreduce, broadcast,
 *                            premul-sum scaling by its factor
 *   coll_gpu_check group     a group over every visible device, then split
 *   coll_gpu_check tcp-rank  one rank of a coll-run job (COLL_BACKEND=cpu):
 *                            device buffers over the TCP ring
 *   coll_gpu_check abort     a collective blocked on a rank that never joins,
 *                            released by coll_abort from another thread
 *   coll_gpu_check shrink    a world-1 comm shrunk while healthy, and one
 *                            kept by COLL_NCCL_SHRINKABLE shrunk after
 *                            coll_abort (NCCL_SHRINK_ABORT); an NCCL before
 *                            2.27.3 must say it has no ncclCommShrink
 * Each prints "PASS <check>" or "FAIL <check>: <why>"; the exit code is the
 * number of failures. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "coll.h"

static int failures;

static void report(const char *check, int ok, const char *why) {
  if (ok) {
    printf("PASS %s\n", check);
  } else {
    printf("FAIL %s: %s\n", check, why);
    failures++;
  }
  fflush(stdout);
}

#define CK(check, call)                                                       \
  do {                                                                        \
    coll_status_t s_ = (call);                                                \
    if (s_ != COLL_OK) {                                                      \
      char why_[640];                                                         \
      snprintf(why_, sizeof why_, "%s: %s (%s)", #call, coll_status_name(s_), \
               coll_last_error());                                            \
      report(check, 0, why_);                                                 \
      goto out;                                                               \
    }                                                                         \
  } while (0)

static int64_t now_ms(void) { return (int64_t)(uv_hrtime() / 1000000u); }

static float *dev_floats(size_t n, float v) {
  float *h = malloc(n * sizeof *h), *d = NULL;
  size_t i;
  for (i = 0; i < n; i++) h[i] = v + (float)(i % 97);
  if (cudaMalloc((void **)&d, n * sizeof *d) != cudaSuccess) d = NULL;
  if (d != NULL) cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice);
  free(h);
  return d;
}

/* 1 if every element of d equals scale * (v + i % 97). */
static int dev_check(const float *d, size_t n, float v, float scale) {
  float *h = malloc(n * sizeof *h);
  size_t i;
  int ok =
      cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost) == cudaSuccess;
  for (i = 0; ok && i < n; i++) ok = h[i] == scale * (v + (float)(i % 97));
  free(h);
  return ok;
}

static void check_world1(void) {
  const char *check = "nccl world-1 comm";
  enum { N = 1 << 20 };
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  float *a = dev_floats(N, 1.0f);
  coll_buffer_t b = {a, N, COLL_F32};
  CK(check, coll_unique_id_create(&id));
  CK(check, coll_comm_init_rank(0, 1, &id, NULL, &c));
  CK(check, coll_allreduce(c, a, a, N, COLL_F32, COLL_SUM, NULL));
  report("nccl allreduce (world 1)", dev_check(a, N, 1.0f, 1.0f), "wrong sum");
  CK(check, coll_broadcast(c, a, N, COLL_F32, 0, NULL));
  report("nccl broadcast (world 1)", dev_check(a, N, 1.0f, 1.0f), "changed");
  CK(check, coll_allreduce_premul_sum(c, &b, 1, 0.25f, NULL));
  report("nccl premul-sum scales by the factor", dev_check(a, N, 1.0f, 0.25f),
         "not scaled by 0.25");
out:
  coll_comm_destroy(c);
  cudaFree(a);
}

/* Allreduce on c of a fresh buffer: the sum of one rank is the input. */
static int shrunk_works(coll_comm_t *c) {
  enum { N = 1 << 16 };
  float *a = dev_floats(N, 2.0f);
  int ok = a != NULL &&
           coll_allreduce(c, a, a, N, COLL_F32, COLL_SUM, NULL) == COLL_OK &&
           dev_check(a, N, 2.0f, 1.0f);
  cudaFree(a);
  return ok;
}

static void check_shrink(void) {
  const char *check = "nccl shrink";
  coll_unique_id_t id;
  coll_comm_t *c = NULL, *n = NULL;
  coll_abort_handle_t *h = NULL;
  coll_status_t s;
  CK(check, coll_unique_id_create(&id));
  CK(check, coll_comm_init_rank(0, 1, &id, NULL, &c));
  s = coll_comm_shrink(c, NULL, &n);
  if (s == COLL_ERR_NOT_AVAILABLE) {
    report("nccl shrink: an older NCCL says so",
           strstr(coll_last_error(), "has no ncclComm") != NULL,
           coll_last_error());
    goto out;
  }
  CK(check, s);
  report("nccl shrink of a healthy comm", shrunk_works(n), "wrong sum");
  coll_comm_destroy(n);
  n = NULL;
  coll_comm_destroy(c);
  c = NULL;
  setenv("COLL_NCCL_SHRINKABLE", "1", 1);
  CK(check, coll_unique_id_create(&id));
  s = coll_comm_init_rank(0, 1, &id, NULL, &c);
  unsetenv("COLL_NCCL_SHRINKABLE");
  CK(check, s);
  CK(check, coll_comm_abort_handle(c, &h));
  CK(check, coll_abort(h));
  CK(check, coll_comm_shrink_exclude(c, NULL, 0, NULL, &n));
  report(
      "nccl shrink after coll_abort (revoked, then split; 2.27: "
      "NCCL_SHRINK_ABORT)",
      shrunk_works(n), "wrong sum");
out:
  coll_abort_handle_release(h);
  coll_comm_destroy(n);
  coll_comm_destroy(c);
}

struct group_arg {
  coll_comm_t *c;
  float *buf;
  coll_status_t s;
};

static void group_worker(void *p) {
  struct group_arg *a = p;
  a->s = coll_allreduce(a->c, a->buf, a->buf, 1024, COLL_F32, COLL_MAX, NULL);
}

static void check_group(void) {
  const char *check = "group over all devices";
  int ndev = 0, i, before = -1, after = -2, ok = 1;
  int *devs = NULL;
  float **bufs = NULL;
  coll_comm_t **comms = NULL;
  struct group_arg *args = NULL;
  uv_thread_t *th = NULL;
  coll_group_t *g = NULL;
  cudaGetDeviceCount(&ndev);
  devs = calloc((size_t)ndev, sizeof *devs);
  bufs = calloc((size_t)ndev, sizeof *bufs);
  comms = calloc((size_t)ndev, sizeof *comms);
  args = calloc((size_t)ndev, sizeof *args);
  th = calloc((size_t)ndev, sizeof *th);
  for (i = 0; i < ndev; i++) {
    devs[i] = i;
    cudaSetDevice(i);
    bufs[i] = dev_floats(1024, (float)i);
  }
  cudaSetDevice(ndev - 1);
  cudaGetDevice(&before);
  CK(check, coll_group_create(devs, ndev, &g));
  CK(check, coll_group_allreduce(g, (void *const *)bufs, ndev, 1024, COLL_F32,
                                 COLL_SUM, NULL, 0));
  for (i = 0; i < ndev; i++) {
    cudaSetDevice(i);
    /* sum over d of (d + k % 97) = ndev(ndev-1)/2 + ndev * (k % 97) */
    ok &= dev_check(bufs[i], 1024, (float)(ndev - 1) / 2, (float)ndev);
  }
  cudaSetDevice(before);
  CK(check, coll_group_broadcast(g, (void *const *)bufs, ndev, 1024, COLL_F32,
                                 0, NULL, 0));
  cudaGetDevice(&after);
  report("group allreduce", ok, "wrong sum");
  report("group keeps the current device", before == after, "device changed");
  CK(check, coll_group_split(g, comms));
  for (i = 0; i < ndev; i++) {
    args[i].c = comms[i];
    args[i].buf = bufs[i];
    uv_thread_create(&th[i], group_worker, &args[i]);
  }
  for (i = 0, ok = 1; i < ndev; i++) {
    uv_thread_join(&th[i]);
    ok &= args[i].s == COLL_OK;
  }
  report("split comms on worker threads", ok, "a worker's allreduce failed");
out:
  for (i = 0; comms != NULL && i < ndev; i++) coll_comm_destroy(comms[i]);
  coll_group_destroy(g);
  for (i = 0; bufs != NULL && i < ndev; i++) cudaFree(bufs[i]);
  free(devs), free(bufs), free(comms), free(args), free(th);
}

/* One rank of `coll-run -n 4` with COLL_BACKEND=cpu: device buffers over
 * the TCP ring (three staging segments), every rank checks its result. */
static void check_tcp_rank(void) {
  const char *check = "tcp ring with device buffers";
  enum { N = 3 << 20 };
  coll_comm_t *c = NULL;
  float *a = NULL;
  int rank, world;
  char name[64];
  CK(check, coll_comm_init_env(NULL, &c));
  rank = coll_comm_rank(c);
  world = coll_comm_size(c);
  a = dev_floats(N, 1.0f);
  CK(check, coll_allreduce(c, a, a, N, COLL_F32, COLL_SUM, NULL));
  snprintf(name, sizeof name, "%s (rank %d of %d, %s)", check, rank, world,
           coll_comm_backend(c));
  report(name, dev_check(a, N, 1.0f, (float)world), "wrong sum");
out:
  coll_comm_destroy(c);
  cudaFree(a);
}

struct abort_arg {
  coll_comm_t *c;
  float *buf;
  coll_status_t s;
  int64_t took_ms;
};

static void stuck_worker(void *p) {
  struct abort_arg *a = p;
  int64_t t0 = now_ms();
  a->s =
      coll_allreduce(a->c, a->buf, a->buf, 1 << 20, COLL_F32, COLL_SUM, NULL);
  a->took_ms = now_ms() - t0;
}

/* comms[0] waits for comms[1], which never joins; abort must free it. */
static void abort_stuck(const char *check, coll_comm_t **comms) {
  struct abort_arg a = {comms[0], dev_floats(1 << 20, 0), COLL_OK, 0};
  coll_abort_handle_t *h = NULL;
  uv_thread_t th;
  int64_t t_abort;
  char why[128];
  coll_comm_abort_handle(comms[0], &h);
  uv_thread_create(&th, stuck_worker, &a);
  uv_sleep(500);
  t_abort = now_ms();
  coll_abort(h);
  uv_thread_join(&th);
  snprintf(why, sizeof why, "status %s after %lld ms", coll_status_name(a.s),
           (long long)(now_ms() - t_abort));
  report(check, a.s == COLL_ERR_ABORTED && now_ms() - t_abort < 2000, why);
  coll_abort_handle_release(h);
  /* The idle rank is aborted too: a plain destroy may wait on its peer. */
  coll_comm_abort_handle(comms[1], &h);
  coll_abort(h);
  coll_abort_handle_release(h);
  coll_comm_destroy(comms[0]);
  coll_comm_destroy(comms[1]);
  cudaFree(a.buf);
}

static void check_abort(void) {
  coll_transport_t *ts[2];
  coll_comm_t *comms[2] = {0};
  int ndev = 0, devs[2] = {0, 1};
  coll_group_t *g = NULL;
  const char *check = "abort (cpu comm, device buffers)";
  CK(check, coll_inproc_create(2, ts));
  CK(check, coll_comm_create(ts[0], NULL, &comms[0]));
  CK(check, coll_comm_create(ts[1], NULL, &comms[1]));
  abort_stuck(check, comms);
  /* Two ranks of one NCCL comm need two GPUs (NCCL refuses two on one). */
  cudaGetDeviceCount(&ndev);
  if (ndev < 2) {
    printf("SKIP abort (nccl comm): one GPU\n");
    return;
  }
  check = "abort (nccl comm)";
  CK(check, coll_group_create(devs, 2, &g));
  CK(check, coll_group_split(g, comms));
  coll_group_destroy(g);
  abort_stuck(check, comms);
out:
  return;
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("FAIL %s: no CUDA device\n", what);
    return 1;
  }
  if (strcmp(what, "world1") == 0)
    check_world1();
  else if (strcmp(what, "group") == 0)
    check_group();
  else if (strcmp(what, "tcp-rank") == 0)
    check_tcp_rank();
  else if (strcmp(what, "abort") == 0)
    check_abort();
  else if (strcmp(what, "shrink") == 0)
    check_shrink();
  else {
    fprintf(stderr,
            "usage: coll_gpu_check world1|group|tcp-rank|abort|shrink\n");
    return 2;
  }
  return failures;
}
