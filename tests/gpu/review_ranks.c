/* SPDX-License-Identifier: Apache-2.0 */
/* review_ranks.c: the steps that run as ranks of a coll-run job on one GPU:
 *   cpu-rank        COLL_BACKEND=cpu, 4 ranks: device buffers staged
 *                   through the TCP ring
 *   rank2-colls     COLL_BACKEND=nccl, 2 ranks made different "hosts" with
 *   rank2-exchange  NCCL_HOSTID, so NCCL takes two ranks on one GPU (over
 *   rank2-abort     the socket transport on lo)
 * Element values are small even integers, so sums, averages and the
 * pre-multiplied sums below are exact in every dtype, f16 and bf16 too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

/* Rank r's element i: a multiple of 4 in [-44, 44], so sums over up to 4
 * ranks divide by the world exactly, and everything below fits in the 8
 * significant bits of bf16. */
double rk_val(int r, size_t i) {
  return 4.0 * (double)((long)((i * 7 + (size_t)r * 3) % 23) - 11);
}

/* Makes the comm from coll-run's environment and the buffers. Returns 1,
 * or 0 after a FAIL line, or RV_EXIT_SKIP when `skip_init` and the init
 * failed (a SKIP line from rank 0, a note from the others). */
int rk_open(rk_t *k, const char *name, const char *backend, int64_t timeout_ms,
            size_t cap, int skip_init) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_status_t s;
  memset(k, 0, sizeof *k);
  k->name = name;
  k->rank = rv_env_rank();
  k->cap = cap;
  snprintf(k->label, sizeof k->label, "%s (rank %d)", name, k->rank);
  if (!rv_device_ready(k->label)) return 0;
  cfg.timeout_ms = timeout_ms;
  cfg.name = name;
  s = coll_comm_init_env(&cfg, &k->c);
  if (s != COLL_OK && skip_init) {
    if (k->rank == 0)
      rv_skip(name,
              "NCCL did not take two ranks on one GPU through NCCL_HOSTID: "
              "%s",
              rv_status(s));
    else
      printf("note: rank %d init: %s\n", k->rank, rv_status(s));
    fflush(stdout);
    return RV_EXIT_SKIP;
  }
  if (s != COLL_OK)
    return rv_check(0, k->label, "coll_comm_init_env: %s", rv_status(s));
  k->world = coll_comm_size(k->c);
  if (strcmp(coll_comm_backend(k->c), backend) != 0)
    return rv_check(0, k->label, "the comm's backend is %s, want %s",
                    coll_comm_backend(k->c), backend);
  k->s = rv_stream_new(k->label);
  k->dsend = rv_dev_alloc(k->label, cap);
  k->drecv = rv_dev_alloc(k->label, cap);
  k->host = malloc(cap);
  if (!rv_cuda(k->label, "cudaMallocHost",
               cudaMallocHost((void **)&k->back, cap)))
    return 0;
  return k->s != NULL && k->dsend != NULL && k->drecv != NULL &&
         k->host != NULL;
}

void rk_close(rk_t *k) {
  coll_status_t s = coll_comm_destroy(k->c);
  if (s != COLL_OK) rv_check(0, k->label, "destroy: %s", rv_status(s));
  if (k->s != NULL) cudaStreamSynchronize(k->s);
  cudaFree(k->dsend);
  cudaFree(k->drecv);
  if (k->back != NULL) cudaFreeHost(k->back);
  if (k->s != NULL) cudaStreamDestroy(k->s);
  free(k->host);
}

/* dev[0..n) := rk_val(r, first + i) in dt. */
int rk_put(rk_t *k, void *dev, coll_dtype_t dt, size_t n, int r, size_t first) {
  size_t i;
  for (i = 0; i < n; i++) rv_put(dt, k->host, i, rk_val(r, first + i));
  return rv_upload(k->label, dev, k->host, n * coll_dtype_size(dt));
}

/* 0xA5 into drecv, ordered before what follows on the comm's stream. */
int rk_poison(rk_t *k) {
  return rv_cuda(k->label, "cudaMemsetAsync",
                 cudaMemsetAsync(k->drecv, 0xA5, k->cap, k->s));
}

/* Reads n elements of dev (on the comm's stream) and compares element i
 * with want(i), where want is a function of the rank values. */
typedef double (*rk_want_fn)(const rk_t *k, size_t i, void *arg);

static int rk_same(rk_t *k, const void *dev, coll_dtype_t dt, size_t n,
                   rk_want_fn want, void *arg, char *why, size_t cap) {
  size_t i;
  if (!rv_download(k->label, k->back, dev, n * coll_dtype_size(dt), k->s)) {
    snprintf(why, cap, "read-back failed");
    return 0;
  }
  for (i = 0; i < n; i++) {
    double got = rv_get(dt, k->back, i), w = want(k, i, arg);
    if (got != w) {
      snprintf(why, cap, "element %zu of %zu is %.9g, want %.9g", i, n, got, w);
      return 0;
    }
  }
  return 1;
}

static double want_reduced(const rk_t *k, size_t i, void *arg) {
  coll_op_t op = *(const coll_op_t *)arg;
  double acc = rk_val(0, i), x;
  int r;
  for (r = 1; r < k->world; r++) {
    x = rk_val(r, i);
    if (op == COLL_MAX)
      acc = acc > x ? acc : x;
    else
      acc += x;
  }
  return op == COLL_AVG ? acc / k->world : acc;
}

static double want_gathered(const rk_t *k, size_t i, void *arg) {
  size_t n = *(const size_t *)arg;
  (void)k;
  return rk_val((int)(i / n), i % n);
}

/* Block `rank` of the sums of rk_val(r, j) over j in [0, world * n). */
static double want_scattered(const rk_t *k, size_t i, void *arg) {
  size_t n = *(const size_t *)arg, j = (size_t)k->rank * n + i;
  double acc = 0;
  int r;
  for (r = 0; r < k->world; r++) acc += rk_val(r, j);
  return acc;
}

static double want_root1(const rk_t *k, size_t i, void *arg) {
  (void)k;
  (void)arg;
  return rk_val(1, i);
}

/* Rank 0 scaled by 0.25, rank 1 by 0.75, summed (two ranks). */
static double want_premul(const rk_t *k, size_t i, void *arg) {
  size_t first = *(const size_t *)arg;
  (void)k;
  return 0.25 * rk_val(0, first + i) + 0.75 * rk_val(1, first + i);
}

/* allreduce of each dtype x op, out of place, read back on the stream. */
static void rk_allreduce(rk_t *k, const coll_dtype_t *dts, int ndt,
                         const coll_op_t *ops, int nops, size_t n) {
  char name[96], why[256];
  rv_acc_t acc;
  int d, o;
  coll_status_t s;
  snprintf(name, sizeof name, "%s allreduce (rank %d)", k->name, k->rank);
  rv_acc_init(&acc, name);
  for (d = 0; d < ndt; d++) {
    if (!rk_put(k, k->dsend, dts[d], n, k->rank, 0)) return;
    for (o = 0; o < nops; o++) {
      coll_op_t op = ops[o];
      if (!rk_poison(k)) return;
      s = coll_allreduce(k->c, k->dsend, k->drecv, n, dts[d], op, k->s);
      rv_acc_case(&acc,
                  s == COLL_OK && rk_same(k, k->drecv, dts[d], n, want_reduced,
                                          &op, why, sizeof why),
                  "%s %s: %s", coll_dtype_name(dts[d]), coll_op_name(op),
                  s == COLL_OK ? why : rv_status(s));
    }
  }
  rv_acc_end(&acc, "%d dtype x op pairs exact over %d ranks (count %zu)",
             acc.cases, k->world, n);
}

/* allgather, reduce_scatter, broadcast from root 1, reduce to root 1 and a
 * barrier, each one line. */
static void rk_rooted_and_gathers(rk_t *k, size_t n) {
  char name[96], why[256];
  coll_op_t sum = COLL_SUM;
  coll_status_t s;
  int ok;
  if (!rk_put(k, k->dsend, COLL_F32, n, k->rank, 0) || !rk_poison(k)) return;
  s = coll_allgather(k->c, k->dsend, k->drecv, n, COLL_F32, k->s);
  ok = s == COLL_OK && rk_same(k, k->drecv, COLL_F32, n * (size_t)k->world,
                               want_gathered, &n, why, sizeof why);
  snprintf(name, sizeof name, "%s allgather (rank %d)", k->name, k->rank);
  rv_check(ok, name, "f32, %zu per rank: %s", n,
           s != COLL_OK ? rv_status(s)
           : ok         ? "exact"
                        : why);

  if (!rk_put(k, k->dsend, COLL_I32, n * (size_t)k->world, k->rank, 0) ||
      !rk_poison(k))
    return;
  s = coll_reduce_scatter(k->c, k->dsend, k->drecv, n, COLL_I32, COLL_SUM,
                          k->s);
  ok = s == COLL_OK &&
       rk_same(k, k->drecv, COLL_I32, n, want_scattered, &n, why, sizeof why);
  snprintf(name, sizeof name, "%s reduce_scatter (rank %d)", k->name, k->rank);
  rv_check(ok, name, "i32 sum, %zu per rank: %s", n,
           s != COLL_OK ? rv_status(s)
           : ok         ? "exact"
                        : why);

  /* rk_val(0, i) never equals rk_val(1, i): rank 0 starts with other values. */
  if (!rk_put(k, k->drecv, COLL_BF16, n, k->rank, 0)) return;
  s = coll_broadcast(k->c, k->drecv, n, COLL_BF16, 1, k->s);
  ok = s == COLL_OK &&
       rk_same(k, k->drecv, COLL_BF16, n, want_root1, NULL, why, sizeof why);
  snprintf(name, sizeof name, "%s broadcast (rank %d)", k->name, k->rank);
  rv_check(ok, name, "bf16 from root 1, in place: %s",
           s != COLL_OK ? rv_status(s)
           : ok         ? "exact"
                        : why);

  if (!rk_put(k, k->dsend, COLL_F32, n, k->rank, 0) || !rk_poison(k)) return;
  s = coll_reduce(k->c, k->dsend, k->rank == 1 ? k->drecv : NULL, n, COLL_F32,
                  COLL_SUM, 1, k->s);
  ok = s == COLL_OK &&
       (k->rank != 1 ||
        rk_same(k, k->drecv, COLL_F32, n, want_reduced, &sum, why, sizeof why));
  snprintf(name, sizeof name, "%s reduce (rank %d)", k->name, k->rank);
  rv_check(ok, name, "f32 sum to root 1, out of place: %s",
           s != COLL_OK   ? rv_status(s)
           : !ok          ? why
           : k->rank == 1 ? "exact on the root"
                          : "OK (recv NULL off the root)");

  s = coll_barrier(k->c);
  snprintf(name, sizeof name, "%s barrier (rank %d)", k->name, k->rank);
  rv_check(s == COLL_OK, name, "%s", rv_status(s));
}

/* One rank of `coll-run -n 4` with COLL_BACKEND=cpu, all on one GPU: every
 * buffer is device memory, staged through pinned host memory. */
int rv_cpu_rank(void) {
  static const coll_dtype_t dts[] = {COLL_F32, COLL_BF16, COLL_F16, COLL_I32};
  static const coll_op_t ops[] = {COLL_SUM, COLL_MAX, COLL_AVG};
  enum { N = 3 << 20 }; /* f32: 12 MiB, three staging segments and more */
  rk_t k;
  if (rk_open(&k, "cpu-rank", "cpu", 60000, (size_t)N * sizeof(float), 0) ==
      1) {
    rk_allreduce(&k, dts, 4, ops, 3, N);
    rk_rooted_and_gathers(&k, (size_t)1 << 18);
  }
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

/* Two NCCL ranks on one GPU: allreduce of f32/bf16/f16/i32 x sum/max/avg,
 * a 3-buffer premul batch with per-rank factors plus one bf16 and one f16
 * premul, allgather, reduce_scatter, broadcast, reduce to root 1, barrier. */
int rv_rank2_colls(void) {
  static const coll_dtype_t dts[] = {COLL_F32, COLL_BF16, COLL_F16, COLL_I32};
  static const coll_op_t ops[] = {COLL_SUM, COLL_MAX, COLL_AVG};
  static const size_t counts[3] = {1000, 1 << 16, 7};
  static const coll_dtype_t half[2] = {COLL_BF16, COLL_F16};
  enum { N = (1 << 16) + 5 };
  char name[96], why[256];
  void *bdev[3] = {NULL, NULL, NULL};
  coll_buffer_t b[3];
  size_t j, first[3] = {0, 10, 20};
  float factor;
  coll_status_t s;
  rv_acc_t acc;
  rk_t k;
  int rc = rk_open(&k, "rank2-colls", "nccl", 15000,
                   (size_t)N * 2 * sizeof(double), 1);
  if (rc != 1) {
    if (rc == RV_EXIT_SKIP) return RV_EXIT_SKIP;
    goto out;
  }
  rk_allreduce(&k, dts, 4, ops, 3, N);

  snprintf(name, sizeof name, "rank2-colls premul (rank %d)", k.rank);
  rv_acc_init(&acc, name);
  factor = k.rank == 0 ? 0.25f : 0.75f;
  for (j = 0; j < 3; j++) {
    bdev[j] = rv_dev_alloc(k.label, counts[j] * sizeof(float));
    if (bdev[j] == NULL ||
        !rk_put(&k, bdev[j], COLL_F32, counts[j], k.rank, first[j]))
      goto out;
    b[j] = (coll_buffer_t){bdev[j], counts[j], COLL_F32};
  }
  s = coll_allreduce_premul_sum(k.c, b, 3, factor, k.s);
  for (j = 0; j < 3; j++)
    rv_acc_case(
        &acc,
        s == COLL_OK && rk_same(&k, bdev[j], COLL_F32, counts[j], want_premul,
                                &first[j], why, sizeof why),
        "f32 batch buffer %zu: %s", j, s == COLL_OK ? why : rv_status(s));
  for (j = 0; j < 2; j++) {
    size_t zero = 0;
    if (!rk_put(&k, k.dsend, half[j], N, k.rank, 0)) goto out;
    b[0] = (coll_buffer_t){k.dsend, N, half[j]};
    s = coll_allreduce_premul_sum(k.c, b, 1, factor, k.s);
    rv_acc_case(&acc,
                s == COLL_OK && rk_same(&k, k.dsend, half[j], N, want_premul,
                                        &zero, why, sizeof why),
                "%s: %s", coll_dtype_name(half[j]),
                s == COLL_OK ? why : rv_status(s));
  }
  rv_acc_end(&acc,
             "factors 0.25 (rank 0) and 0.75 (rank 1): a 3-buffer f32 batch "
             "(%zu, %zu, %zu) and bf16, f16 buffers of %d exact",
             counts[0], counts[1], counts[2], N);

  rk_rooted_and_gathers(&k, N);
out:
  for (j = 0; j < 3; j++) cudaFree(bdev[j]);
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

/* Both ranks isend 64 MiB to the other, then irecv 64 MiB, then wait for
 * the send first: fused into one NCCL group at the first wait, this must
 * not deadlock. The comm's 10 s timeout turns a deadlock into a FAIL. */
int rv_rank2_exchange(void) {
  enum { N = 16 << 20 }; /* f32: 64 MiB */
  coll_request_t *rs = NULL, *rr = NULL;
  coll_status_t s;
  char send_st[384] = "not posted", recv_st[384] = "not posted", why[256];
  size_t received = 0, i;
  double t0, took;
  int peer, ok = 0;
  rk_t k;
  int rc = rk_open(&k, "rank2-exchange", "nccl", 10000, (size_t)N * 4, 1);
  if (rc != 1) {
    if (rc == RV_EXIT_SKIP) return RV_EXIT_SKIP;
    goto out;
  }
  peer = 1 - k.rank;
  if (!rk_put(&k, k.dsend, COLL_F32, N, k.rank, 0)) goto out;
  t0 = rv_now_ms();
  s = coll_isend(k.c, k.dsend, N, COLL_F32, peer, 0, &rs);
  if (s != COLL_OK) snprintf(send_st, sizeof send_st, "isend %s", rv_status(s));
  s = coll_irecv(k.c, k.drecv, N, COLL_F32, peer, 0, &received, &rr);
  if (s != COLL_OK) snprintf(recv_st, sizeof recv_st, "irecv %s", rv_status(s));
  if (rs != NULL) { /* the send first: NCCL must have both in one group */
    s = coll_wait(rs);
    snprintf(send_st, sizeof send_st, "%s", rv_status(s));
    ok = s == COLL_OK;
  }
  if (rr != NULL) {
    s = coll_wait(rr);
    snprintf(recv_st, sizeof recv_st, "%s", rv_status(s));
    ok = ok && s == COLL_OK;
  } else {
    ok = 0;
  }
  took = rv_now_ms() - t0;
  snprintf(why, sizeof why, "%s", ok ? "data not read" : "data not checked");
  if (ok && received == N &&
      rv_download(k.label, k.back, k.drecv, (size_t)N * 4, k.s)) {
    for (i = 0; i < N; i++) rv_put(COLL_F32, k.host, i, rk_val(peer, i));
    i = rv_first_diff(k.back, k.host, N, 4);
    if (i == N)
      snprintf(why, sizeof why, "data exact");
    else
      snprintf(why, sizeof why, "element %zu is %.9g, want %.9g", i,
               rv_get(COLL_F32, k.back, i), rk_val(peer, i));
    ok = i == N;
  } else {
    ok = 0;
  }
  rv_check(ok, k.label,
           "isend + irecv of 64 MiB each way, the send waited first, tag 0: "
           "send %s, recv %s, %zu elements received, %.1f ms; %s",
           send_st, recv_st, received, took, why);
out:
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

/* Rank 1 never calls: it sleeps 10 s, then aborts its comm. Rank 0 starts
 * an allreduce that waits for it, and a thread calls coll_abort at 1 s: the
 * abort must return within 2 s and the allreduce with ERR_ABORTED. Rank 0's
 * comm timeout (8 s) ends the allreduce first if the abort cannot. */
int rv_rank2_abort(void) {
  enum { N = 1 << 20 };
  coll_abort_handle_t *h = NULL;
  coll_status_t s;
  rv_aborter_t ab;
  double returned, t0;
  rk_t k;
  int rc = rk_open(&k, "rank2-abort", "nccl", 8000, N * sizeof(float), 1);
  if (rc != 1) {
    if (rc == RV_EXIT_SKIP) return RV_EXIT_SKIP;
    goto out;
  }
  coll_comm_abort_handle(k.c, &h);
  if (k.rank == 1) {
    printf("note: rank 1 makes no call for 10 s, then aborts its comm\n");
    fflush(stdout);
    rv_sleep_ms(10000);
    coll_abort(h);
    goto out;
  }
  t0 = rv_now_ms();
  rv_aborter_start(&ab, h, 1000);
  s = coll_allreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s);
  returned = rv_now_ms();
  if (!rv_aborter_join(&ab, 5000)) {
    rv_check(0, k.name,
             "coll_abort, called at 1 s, has not returned after %.1f s; the "
             "allreduce returned %s after %.1f ms",
             (rv_now_ms() - ab.abort_ms) / 1e3, rv_status(s), returned - t0);
    _Exit(1);
  }
  rv_check(s == COLL_ERR_ABORTED && ab.return_ms - ab.abort_ms < 2000.0 &&
               returned - ab.abort_ms < 2000.0,
           k.name,
           "peer never calls; coll_abort at 1 s returned after %.1f ms (want "
           "< 2000); the allreduce returned %s %.1f ms after the abort was "
           "called (want ERR_ABORTED)",
           ab.return_ms - ab.abort_ms, rv_status(s), returned - ab.abort_ms);
out:
  coll_abort_handle_release(h);
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}
