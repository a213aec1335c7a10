/* SPDX-License-Identifier: Apache-2.0 */
/* review_world1.c: one-process checks on a world-1 NCCL comm that can fail
 * on one GPU. In place, world 1 launches nothing (NCCL skips the copy when
 * send == recv), so every collective here is out of place into a buffer
 * filled with 0xA5 first, and results are read back on a second stream
 * that does not synchronise with the first: a call that returned before its
 * work finished shows as a wrong result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

enum { W1_COUNT = (1 << 20) + 3 }; /* odd: kernels' tails too */

static const coll_dtype_t all_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                          COLL_F64, COLL_I8,   COLL_U8,
                                          COLL_I32, COLL_I64};
static const coll_dtype_t float_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                            COLL_F64};
#define NDT (sizeof all_dtypes / sizeof all_dtypes[0])

/* NCCL comms refuse AVG of 8-bit integers (NCCL would average the wrapped
 * sum, truncated). */
static int avg_refused(coll_dtype_t dt, coll_op_t op) {
  return op == COLL_AVG && (dt == COLL_I8 || dt == COLL_U8);
}

typedef struct w1 {
  const char *name;
  coll_comm_t *c;
  cudaStream_t s1, s2; /* s1 runs the collectives, s2 reads back */
  void *dsend, *drecv;
  unsigned char *host, *want, *back; /* back is pinned */
} w1_t;

static int w1_open(w1_t *w, const char *name, size_t bytes) {
  coll_status_t s;
  memset(w, 0, sizeof *w);
  w->name = name;
  if (!rv_device_ready(name)) return 0;
  w->host = malloc(bytes);
  w->want = malloc(bytes);
  if (w->host == NULL || w->want == NULL)
    return rv_check(0, name, "out of host memory");
  if (!rv_cuda(name, "cudaMallocHost",
               cudaMallocHost((void **)&w->back, bytes)))
    return 0;
  w->dsend = rv_dev_alloc(name, bytes);
  w->drecv = rv_dev_alloc(name, bytes);
  w->s1 = rv_stream_new(name);
  w->s2 = rv_stream_new(name);
  if (!w->dsend || !w->drecv || !w->s1 || !w->s2) return 0;
  s = rv_comm_world1(NULL, &w->c);
  if (s != COLL_OK) return rv_check(0, name, "world-1 comm: %s", rv_status(s));
  return 1;
}

static void w1_close(w1_t *w) {
  coll_comm_destroy(w->c);
  cudaFree(w->dsend);
  cudaFree(w->drecv);
  if (w->back != NULL) cudaFreeHost(w->back);
  if (w->s1 != NULL) cudaStreamDestroy(w->s1);
  if (w->s2 != NULL) cudaStreamDestroy(w->s2);
  free(w->host);
  free(w->want);
}

/* Fills drecv with 0xA5 on s1 (ahead of the collective on the same stream). */
static int w1_poison(w1_t *w, size_t bytes) {
  return rv_cuda(w->name, "cudaMemsetAsync",
                 cudaMemsetAsync(w->drecv, 0xA5, bytes, w->s1));
}

/* Reads dev back on s2 and compares it bitwise with want: 1 if equal, else
 * 0 with the first difference in why. */
static int w1_same(w1_t *w, const void *dev, const void *want, size_t n,
                   coll_dtype_t dt, char *why, size_t cap) {
  size_t es = coll_dtype_size(dt), i;
  if (!rv_download(w->name, w->back, dev, n * es, w->s2)) {
    snprintf(why, cap, "read-back failed");
    return 0;
  }
  i = rv_first_diff(w->back, want, n, es);
  if (i == n) return 1;
  snprintf(why, cap, "element %zu of %zu is %.9g, want %.9g", i, n,
           rv_get(dt, w->back, i), rv_get(dt, want, i));
  return 0;
}

/* Every dtype x op: AVG, PROD, MAX... of one rank is the input itself. */
static void w1_allreduce_matrix(w1_t *w) {
  rv_acc_t acc;
  char why[256];
  size_t d, n = W1_COUNT;
  int op, refused = 0;
  coll_status_t s;
  rv_acc_init(&acc, "world1-allreduce");
  for (d = 0; d < NDT; d++) {
    coll_dtype_t dt = all_dtypes[d];
    size_t bytes = n * coll_dtype_size(dt);
    rv_fill_random(dt, w->host, n, 1000 + d);
    if (!rv_upload(w->name, w->dsend, w->host, bytes)) return;
    for (op = 0; op < COLL_OP_COUNT; op++) {
      if (!w1_poison(w, bytes)) return;
      s = coll_allreduce(w->c, w->dsend, w->drecv, n, dt, (coll_op_t)op, w->s1);
      if (avg_refused(dt, (coll_op_t)op)) {
        refused += s == COLL_ERR_UNSUPPORTED;
        rv_acc_case(&acc, s == COLL_ERR_UNSUPPORTED,
                    "%s %s: want ERR_UNSUPPORTED, got %s", coll_dtype_name(dt),
                    coll_op_name((coll_op_t)op), rv_status(s));
        continue;
      }
      if (s != COLL_OK) {
        rv_acc_case(&acc, 0, "%s %s: %s", coll_dtype_name(dt),
                    coll_op_name((coll_op_t)op), rv_status(s));
        continue;
      }
      rv_acc_case(&acc, w1_same(w, w->drecv, w->host, n, dt, why, sizeof why),
                  "%s %s: %s", coll_dtype_name(dt), coll_op_name((coll_op_t)op),
                  why);
    }
  }
  rv_acc_end(&acc,
             "%d dtype x op pairs out of place, count %zu: every result "
             "bitwise equal to the input, i8/u8 avg refused (%d of 2)",
             acc.cases - 2, n, refused);
}

/* allgather, reduce_scatter and reduce of one rank copy the input. */
static void w1_copies(w1_t *w) {
  rv_acc_t acc;
  char why[256];
  size_t d, n = W1_COUNT;
  int k;
  coll_status_t s = COLL_OK;
  static const char *const names[] = {"allgather", "reduce_scatter sum",
                                      "reduce max root 0"};
  rv_acc_init(&acc, "world1-copies");
  for (d = 0; d < NDT; d++) {
    coll_dtype_t dt = all_dtypes[d];
    size_t bytes = n * coll_dtype_size(dt);
    rv_fill_random(dt, w->host, n, 2000 + d);
    if (!rv_upload(w->name, w->dsend, w->host, bytes)) return;
    for (k = 0; k < 3; k++) {
      if (!w1_poison(w, bytes)) return;
      if (k == 0)
        s = coll_allgather(w->c, w->dsend, w->drecv, n, dt, w->s1);
      else if (k == 1)
        s = coll_reduce_scatter(w->c, w->dsend, w->drecv, n, dt, COLL_SUM,
                                w->s1);
      else
        s = coll_reduce(w->c, w->dsend, w->drecv, n, dt, COLL_MAX, 0, w->s1);
      if (s != COLL_OK) {
        rv_acc_case(&acc, 0, "%s %s: %s", names[k], coll_dtype_name(dt),
                    rv_status(s));
        continue;
      }
      rv_acc_case(&acc, w1_same(w, w->drecv, w->host, n, dt, why, sizeof why),
                  "%s %s: %s", names[k], coll_dtype_name(dt), why);
    }
  }
  s = coll_barrier(w->c);
  rv_acc_case(&acc, s == COLL_OK, "barrier: %s", rv_status(s));
  rv_acc_end(&acc,
             "allgather, reduce_scatter and reduce (root 0) out of place on "
             "all 8 dtypes bitwise equal to the input; barrier OK");
}

/* premul-sum by 0.25 is x * 0.25 exactly for the values filled (their
 * quarters are normal), on every floating-point dtype, one buffer each and
 * as a 3-buffer batch; then 2000 calls in a row (the op is created and
 * destroyed per call). */
static void w1_premul(w1_t *w) {
  rv_acc_t acc;
  char why[256];
  size_t d, i, k, n = W1_COUNT;
  static const size_t batch_counts[3] = {1000, 1 << 16, 7};
  void *bdev[3] = {NULL, NULL, NULL};
  coll_buffer_t b[3];
  coll_status_t s;
  float v = 1.5f;
  int calls;
  rv_acc_init(&acc, "world1-premul");
  for (d = 0; d < sizeof float_dtypes / sizeof float_dtypes[0]; d++) {
    coll_dtype_t dt = float_dtypes[d];
    rv_fill_random(dt, w->host, n, 3000 + d);
    for (i = 0; i < n; i++)
      rv_put(dt, w->want, i, rv_get(dt, w->host, i) * 0.25);
    if (!rv_upload(w->name, w->drecv, w->host, n * coll_dtype_size(dt))) return;
    b[0] = (coll_buffer_t){w->drecv, n, dt};
    s = coll_allreduce_premul_sum(w->c, b, 1, 0.25f, w->s1);
    if (s != COLL_OK) {
      rv_acc_case(&acc, 0, "%s: %s", coll_dtype_name(dt), rv_status(s));
      continue;
    }
    rv_acc_case(&acc, w1_same(w, w->drecv, w->want, n, dt, why, sizeof why),
                "%s: %s", coll_dtype_name(dt), why);
  }
  /* A batch of three f32 buffers of different lengths. */
  for (k = 0; k < 3; k++) {
    size_t m = batch_counts[k];
    bdev[k] = rv_dev_alloc(w->name, m * sizeof(float));
    if (bdev[k] == NULL) goto out;
    rv_fill_random(COLL_F32, w->host, m, 3100 + k);
    if (!rv_upload(w->name, bdev[k], w->host, m * sizeof(float))) goto out;
    b[k] = (coll_buffer_t){bdev[k], m, COLL_F32};
  }
  s = coll_allreduce_premul_sum(w->c, b, 3, 0.25f, w->s1);
  rv_acc_case(&acc, s == COLL_OK, "3-buffer f32 batch: %s", rv_status(s));
  for (k = 0; s == COLL_OK && k < 3; k++) {
    size_t m = batch_counts[k];
    rv_fill_random(COLL_F32, w->host, m, 3100 + k);
    for (i = 0; i < m; i++)
      rv_put(COLL_F32, w->want, i, rv_get(COLL_F32, w->host, i) * 0.25);
    rv_acc_case(&acc,
                w1_same(w, bdev[k], w->want, m, COLL_F32, why, sizeof why),
                "batch buffer %zu: %s", k, why);
  }
  /* 2000 calls with factor 1: every one OK and the value unchanged. */
  if (!rv_upload(w->name, bdev[0], &v, sizeof v)) goto out;
  b[0] = (coll_buffer_t){bdev[0], 1, COLL_F32};
  for (calls = 0, s = COLL_OK; calls < 2000 && s == COLL_OK; calls++)
    s = coll_allreduce_premul_sum(w->c, b, 1, 1.0f, w->s1);
  if (s == COLL_OK && rv_download(w->name, w->back, bdev[0], sizeof v, w->s2))
    rv_acc_case(&acc, memcmp(w->back, &v, sizeof v) == 0,
                "2000 calls of factor 1 changed 1.5 into %.9g",
                (double)rv_get(COLL_F32, w->back, 0));
  else
    rv_acc_case(&acc, 0, "premul call %d of 2000: %s", calls, rv_status(s));
  rv_acc_end(&acc,
             "factor 0.25 gives exactly x*0.25 on f16, bf16, f32, f64 "
             "(count %zu) and in a 3-buffer f32 batch; 2000 calls in a row "
             "OK",
             n);
out:
  for (k = 0; k < 3; k++) cudaFree(bdev[k]);
}

int rv_world1(void) {
  w1_t w;
  if (w1_open(&w, "world1", W1_COUNT * sizeof(double))) {
    w1_allreduce_matrix(&w);
    w1_copies(&w);
    w1_premul(&w);
  }
  w1_close(&w);
  return rv_failures() ? 1 : 0;
}

/* A host function holds s1 for 300 ms; the allreduce queued behind it must
 * not return (blocking form) or complete (coll_wait) before that, and its
 * result must be there for a reader on s2 right after. The nonblocking
 * issue itself must not wait for the stream. */
int rv_stream_order(void) {
  enum { N = 1 << 20 };
  const char *name = "stream-order";
  size_t bytes = N * sizeof(float);
  double t0, took, issued;
  char why[256];
  int same;
  coll_request_t *req = NULL;
  coll_status_t s;
  w1_t w;
  if (!w1_open(&w, name, bytes)) goto out;
  rv_fill_random(COLL_F32, w.host, N, 42);
  if (!rv_upload(name, w.dsend, w.host, bytes) || !w1_poison(&w, bytes) ||
      !rv_cuda(name, "cudaStreamSynchronize", cudaStreamSynchronize(w.s1)))
    goto out;
  t0 = rv_now_ms();
  if (!rv_stream_sleep(name, w.s1, 300)) goto out;
  s = coll_allreduce(w.c, w.dsend, w.drecv, N, COLL_F32, COLL_SUM, w.s1);
  took = rv_now_ms() - t0;
  if (s != COLL_OK) {
    rv_check(0, name, "allreduce: %s", rv_status(s));
    goto out;
  }
  same = w1_same(&w, w.drecv, w.host, N, COLL_F32, why, sizeof why);
  rv_check(took >= 299.0 && same, name,
           "blocking allreduce queued behind a 300 ms host function returned "
           "after %.1f ms (want >= 300); read at once on a second stream: %s",
           took, same ? "correct" : why);

  name = "stream-order-nonblocking";
  if (!w1_poison(&w, bytes) ||
      !rv_cuda(name, "cudaStreamSynchronize", cudaStreamSynchronize(w.s1)))
    goto out;
  t0 = rv_now_ms();
  if (!rv_stream_sleep(name, w.s1, 300)) goto out;
  s = coll_iallreduce(w.c, w.dsend, w.drecv, N, COLL_F32, COLL_MAX, w.s1, &req);
  issued = rv_now_ms() - t0;
  if (s == COLL_OK) s = coll_wait(req);
  took = rv_now_ms() - t0;
  if (s != COLL_OK) {
    rv_check(0, name, "iallreduce/wait: %s", rv_status(s));
    goto out;
  }
  same = w1_same(&w, w.drecv, w.host, N, COLL_F32, why, sizeof why);
  rv_check(issued < 150.0 && took >= 299.0 && same, name,
           "iallreduce issued in %.1f ms (want < 150: ordered on the stream, "
           "not waiting for it), coll_wait returned after %.1f ms (want >= "
           "300); read at once on a second stream: %s",
           issued, took, same ? "correct" : why);
out:
  w1_close(&w);
  return rv_failures() ? 1 : 0;
}

/* Which memory an NCCL comm takes: device memory of its device, managed
 * memory and stream-ordered allocations; not host memory, pinned or not. */
int rv_buffers(void) {
  enum { N = 1 << 18 };
  const char *name = "buffers";
  size_t bytes = N * sizeof(float), i;
  float *host = NULL, *pinned = NULL, *reg = NULL, *m1 = NULL, *m2 = NULL;
  float *a1 = NULL, *a2 = NULL, *want = NULL;
  int registered = 0;
  coll_status_t s;
  w1_t w;
  if (!w1_open(&w, name, bytes)) goto out;
  host = malloc(bytes);
  reg = malloc(bytes);
  want = malloc(bytes);
  if (host == NULL || reg == NULL || want == NULL) goto out;
  memset(host, 0, bytes);

  s = coll_allreduce(w.c, host, host, N, COLL_F32, COLL_SUM, NULL);
  rv_check(s == COLL_ERR_INVALID_ARG, "buffers-pageable",
           "malloc'd host buffer: %s (want ERR_INVALID_ARG)", rv_status(s));

  if (rv_cuda(name, "cudaMallocHost",
              cudaMallocHost((void **)&pinned, bytes))) {
    s = coll_allreduce(w.c, pinned, pinned, N, COLL_F32, COLL_SUM, NULL);
    rv_check(s == COLL_ERR_INVALID_ARG, "buffers-pinned",
             "cudaMallocHost buffer: %s (want ERR_INVALID_ARG)", rv_status(s));
  }
  if (rv_cuda(name, "cudaHostRegister",
              cudaHostRegister(reg, bytes, cudaHostRegisterDefault))) {
    registered = 1;
    s = coll_allreduce(w.c, reg, reg, N, COLL_F32, COLL_SUM, NULL);
    rv_check(s == COLL_ERR_INVALID_ARG, "buffers-registered",
             "cudaHostRegister'ed buffer: %s (want ERR_INVALID_ARG)",
             rv_status(s));
  }

  /* Managed: filled and read by the host directly, out of place, then a
   * premul in place (a kernel writing managed memory). */
  if (rv_cuda(name, "cudaMallocManaged",
              cudaMallocManaged((void **)&m1, bytes, cudaMemAttachGlobal)) &&
      rv_cuda(name, "cudaMallocManaged",
              cudaMallocManaged((void **)&m2, bytes, cudaMemAttachGlobal))) {
    coll_buffer_t b = {m2, N, COLL_F32};
    rv_fill_random(COLL_F32, m1, N, 77);
    memset(m2, 0xA5, bytes);
    s = coll_allreduce(w.c, m1, m2, N, COLL_F32, COLL_SUM, w.s1);
    if (s == COLL_OK && memcmp(m1, m2, bytes) == 0) {
      for (i = 0; i < N; i++) want[i] = m1[i] * 0.25f;
      s = coll_allreduce_premul_sum(w.c, &b, 1, 0.25f, w.s1);
      rv_check(s == COLL_OK && memcmp(m2, want, bytes) == 0, "buffers-managed",
               "cudaMallocManaged: allreduce out of place correct, premul "
               "in place %s",
               s != COLL_OK                   ? rv_status(s)
               : memcmp(m2, want, bytes) == 0 ? "correct (read by the host)"
                                              : "wrong");
    } else {
      rv_check(0, "buffers-managed", "cudaMallocManaged allreduce: %s",
               s != COLL_OK ? rv_status(s) : "result differs from the input");
    }
  }

  /* Stream-ordered allocations, used on the stream that made them. */
  if (rv_cuda(name, "cudaMallocAsync",
              cudaMallocAsync((void **)&a1, bytes, w.s1)) &&
      rv_cuda(name, "cudaMallocAsync",
              cudaMallocAsync((void **)&a2, bytes, w.s1))) {
    rv_fill_random(COLL_F32, host, N, 78);
    cudaMemcpyAsync(a1, host, bytes, cudaMemcpyHostToDevice, w.s1);
    cudaMemsetAsync(a2, 0xA5, bytes, w.s1);
    s = coll_allreduce(w.c, a1, a2, N, COLL_F32, COLL_SUM, w.s1);
    if (s == COLL_OK && rv_download(name, want, a2, bytes, w.s1))
      rv_check(memcmp(want, host, bytes) == 0, "buffers-mallocasync",
               "cudaMallocAsync buffers accepted, result %s",
               memcmp(want, host, bytes) == 0 ? "correct" : "wrong");
    else
      rv_check(0, "buffers-mallocasync", "cudaMallocAsync allreduce: %s",
               rv_status(s));
  }
out:
  if (a1 != NULL) cudaFreeAsync(a1, w.s1);
  if (a2 != NULL) cudaFreeAsync(a2, w.s1);
  if (w.s1 != NULL) cudaStreamSynchronize(w.s1);
  cudaFree(m1);
  cudaFree(m2);
  if (pinned != NULL) cudaFreeHost(pinned);
  if (registered) cudaHostUnregister(reg);
  free(reg);
  free(host);
  free(want);
  w1_close(&w);
  return rv_failures() ? 1 : 0;
}
