/* SPDX-License-Identifier: Apache-2.0 */
/* review_faults.c: the GPU steps for what the second NCCL review found
 * (NCCL 2.28 on a real device), two ranks of a coll-run job on one GPU
 * (NCCL_HOSTID makes them two hosts to NCCL):
 *   rank2-order             the work is on the stream when the call returns
 *                           (N1): 200 rounds of an out-of-place iallreduce
 *                           read back right away on the same stream
 *   rank2-abort-held-stream coll_abort while a host function holds the
 *                           stream for 3 s returns within 500 ms (N4)
 *   rank2-queued-timeout    a request queued behind a stuck one times out
 *                           with it (N5)
 *   rank2-shrink            a healthy split, then an abort and a shrink
 *                           that excludes the other rank (N2, N3)
 * and, in one process:
 *   init-blocking           NCCL_COMM_BLOCKING=1 is refused at once (N7) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

/* Element i of round r's sum over two ranks. */
static double sum2(size_t first, size_t i) {
  return rk_val(0, first + i) + rk_val(1, first + i);
}

/* The first element of dev (n floats, read back on the comm's stream) that
 * is not the sum of round `first`; n if none, n + 1 if the read failed. */
static size_t first_wrong(rk_t *k, const void *dev, size_t n, size_t first,
                          double *got) {
  size_t i;
  if (!rv_download(k->label, k->back, dev, n * sizeof(float), k->s))
    return n + 1;
  for (i = 0; i < n; i++) {
    *got = rv_get(COLL_F32, k->back, i);
    if (*got != sum2(first, i)) return i;
  }
  return n;
}

int rv_rank2_order(void) {
  enum { N = 1 << 16, ROUNDS = 200 };
  coll_request_t *req = NULL;
  coll_status_t s = COLL_OK, w = COLL_OK;
  size_t bad = N;
  double got = 0;
  int round = 0;
  rk_t k;
  int rc = rk_open(&k, "rank2-order", "nccl", 15000, N * sizeof(float), 1);
  if (rc != 1) {
    rk_close(&k);
    return rc == RV_EXIT_SKIP ? RV_EXIT_SKIP : 1;
  }
  for (round = 0; round < ROUNDS && bad == N; round++) {
    if (!rk_put(&k, k.dsend, COLL_F32, N, k.rank, (size_t)round) ||
        !rk_poison(&k))
      break;
    s = coll_iallreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s,
                        &req);
    if (s != COLL_OK) break;
    /* No coll_wait: a copy queued now must come after the collective. */
    bad = first_wrong(&k, k.drecv, N, (size_t)round, &got);
    w = coll_wait(req);
    if (w != COLL_OK) break;
  }
  if (bad < N) round--;
  rv_check(s == COLL_OK && w == COLL_OK && bad == N && round == ROUNDS, k.label,
           "%d of %d rounds, round 0 the first use: the copy queued on the "
           "stream right after coll_iallreduce returned %s; iallreduce %s, "
           "wait %s",
           round, ROUNDS,
           bad == N       ? "read the sum every time"
           : bad == N + 1 ? "could not be read"
                          : "read stale data (the work was not on the "
                            "stream when the call returned)",
           rv_status(s), rv_status(w));
  if (bad < N)
    printf("note: round %d element %zu is %.9g, want %.9g\n", round, bad, got,
           sum2((size_t)round, bad));
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

int rv_rank2_abort_held(void) {
  enum { N = 1 << 20 };
  coll_abort_handle_t *h = NULL;
  coll_request_t *req = NULL;
  coll_status_t s;
  rv_aborter_t ab;
  double returned;
  rk_t k;
  int rc = rk_open(&k, "rank2-abort-held-stream", "nccl", 20000, N * 4, 1);
  if (rc != 1) {
    rk_close(&k);
    return rc == RV_EXIT_SKIP ? RV_EXIT_SKIP : 1;
  }
  coll_comm_abort_handle(k.c, &h);
  s = coll_allreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s);
  if (s != COLL_OK) {
    rv_check(0, k.label, "warm-up allreduce: %s", rv_status(s));
    goto out;
  }
  if (!rv_stream_sleep(k.label, k.s, 3000)) goto out;
  s = coll_iallreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s, &req);
  if (s != COLL_OK) {
    rv_check(0, k.label, "iallreduce behind the hold: %s", rv_status(s));
    goto out;
  }
  rv_aborter_start(&ab, h, 100);
  s = coll_wait(req);
  returned = rv_now_ms();
  if (!rv_aborter_join(&ab, 5000)) {
    rv_check(0, k.label,
             "coll_abort, called at 100 ms with the stream held for 3 s, has "
             "not returned after %.1f s",
             (rv_now_ms() - ab.abort_ms) / 1e3);
    _Exit(1);
  }
  rv_check(s == COLL_ERR_ABORTED && ab.return_ms - ab.abort_ms < 500.0 &&
               returned - ab.abort_ms < 500.0,
           k.label,
           "stream held 3 s by a host function: coll_abort returned after "
           "%.1f ms (want < 500; the contract is 100), coll_wait returned %s "
           "%.1f ms after the abort was called",
           ab.return_ms - ab.abort_ms, rv_status(s), returned - ab.abort_ms);
out:
  coll_abort_handle_release(h);
  rk_close(&k); /* after the hold: NCCL's teardown waits for the stream */
  return rv_failures() ? 1 : 0;
}

int rv_rank2_queued_timeout(void) {
  enum { N = 1 << 10 };
  coll_abort_handle_t *h = NULL;
  coll_request_t *r1 = NULL, *r2 = NULL;
  coll_status_t s, s1 = COLL_OK;
  rv_aborter_t ab;
  double t0, took;
  rk_t k;
  int rc = rk_open(&k, "rank2-queued-timeout", "nccl", 1000, N * 4, 1);
  if (rc != 1) {
    rk_close(&k);
    return rc == RV_EXIT_SKIP ? RV_EXIT_SKIP : 1;
  }
  s = coll_allreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s);
  if (s != COLL_OK) {
    rv_check(0, k.label, "warm-up allreduce: %s", rv_status(s));
    goto out;
  }
  if (k.rank == 1) {
    printf("note: rank 1 makes no call for 4 s\n");
    rv_sleep_ms(4000);
    goto out;
  }
  coll_comm_abort_handle(k.c, &h);
  s = coll_iallreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s, &r1);
  if (s == COLL_OK)
    s = coll_iallreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s, &r2);
  if (s != COLL_OK) {
    rv_check(0, k.label, "iallreduce: %s", rv_status(s));
    goto out;
  }
  rv_aborter_start(&ab, h, 6000); /* ends it should the timeout not */
  t0 = rv_now_ms();
  s = coll_wait(r2);
  took = rv_now_ms() - t0;
  s1 = coll_wait(r1);
  if (!rv_aborter_join(&ab, 8000)) _Exit(1);
  rv_check(s == COLL_ERR_TIMEOUT && took < 2500.0, k.label,
           "peer silent, comm timeout 1 s: the second iallreduce, waited "
           "first, returned %s after %.1f ms (want ERR_TIMEOUT within 2.5 s); "
           "the first: %s",
           rv_status(s), took, coll_status_name(s1));
out:
  coll_abort_handle_release(h);
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

/* The new comm's allreduce of rank values, checked against the ranks that
 * are in it (`world` of them, from rank 0). */
static int shrunk_allreduce(rk_t *k, coll_comm_t *n, int world,
                            const char *what) {
  enum { N = 4096 };
  char why[160] = "exact";
  coll_status_t s;
  size_t i;
  int r, ok;
  if (!rk_put(k, k->dsend, COLL_F32, N, k->rank, 0)) return 0;
  s = coll_allreduce(n, k->dsend, k->drecv, N, COLL_F32, COLL_SUM, k->s);
  ok = s == COLL_OK &&
       rv_download(k->label, k->back, k->drecv, N * sizeof(float), k->s);
  for (i = 0; ok && i < N; i++) {
    double want = 0;
    for (r = 0; r < world; r++) want += rk_val(r, i);
    if (rv_get(COLL_F32, k->back, i) != want) {
      snprintf(why, sizeof why, "element %zu is %.9g, want %.9g", i,
               rv_get(COLL_F32, k->back, i), want);
      ok = 0;
    }
  }
  return rv_check(ok, k->label, "%s: allreduce on the new comm of %d: %s", what,
                  coll_comm_size(n), s == COLL_OK ? why : rv_status(s));
}

int rv_rank2_shrink(void) {
  enum { N = 4096 };
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  coll_request_t *req = NULL;
  coll_comm_t *n = NULL;
  coll_status_t s;
  int other;
  rk_t k;
  int rc = rk_open(&k, "rank2-shrink", "nccl", 15000, N * 4, 1);
  if (rc != 1) {
    rk_close(&k);
    return rc == RV_EXIT_SKIP ? RV_EXIT_SKIP : 1;
  }
  cfg.timeout_ms = 15000;
  /* A healthy comm, nobody excluded: ncclCommSplit. */
  s = coll_comm_shrink(k.c, &cfg, &n);
  if (!rv_check(s == COLL_OK, k.label, "coll_comm_shrink of a healthy comm: %s",
                rv_status(s)))
    goto out;
  shrunk_allreduce(&k, n, 2, "healthy shrink");
  coll_comm_destroy(n);
  n = NULL;
  /* Rank 1 leaves; rank 0 aborts its comm (a watchdog would) with an
   * allreduce stuck waiting for rank 1, then shrinks without it. */
  if (k.rank == 1) {
    printf("note: rank 1 leaves the comm\n");
    goto out;
  }
  coll_comm_abort_handle(k.c, &h);
  s = coll_iallreduce(k.c, k.dsend, k.drecv, N, COLL_F32, COLL_SUM, k.s, &req);
  if (s == COLL_OK) {
    rv_sleep_ms(300);
    coll_abort(h);
    s = coll_wait(req);
  }
  other = 1;
  s = coll_comm_shrink_exclude(k.c, &other, 1, &cfg, &n);
  if (rv_check(
          s == COLL_OK && n != NULL, k.label,
          "after an abort (ncclCommRevoke), coll_comm_shrink_exclude({1}): "
          "%s",
          rv_status(s)))
    shrunk_allreduce(&k, n, 1, "shrink after an abort");
out:
  coll_comm_destroy(n);
  coll_abort_handle_release(h);
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

int rv_init_blocking(void) {
  const char *name = "init-blocking";
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  coll_status_t s;
  double t0, took;
  if (!rv_device_ready(name)) return 1;
  s = coll_unique_id_create(&id);
  if (s != COLL_OK) {
    rv_check(0, name, "unique id: %s", rv_status(s));
    return 1;
  }
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  cfg.timeout_ms = 2000;
  t0 = rv_now_ms();
  s = coll_comm_init_rank(0, 2, &id, &cfg, &c);
  took = rv_now_ms() - t0;
  rv_check(s == COLL_ERR_INVALID_ARG && took < 1000.0 &&
               strstr(coll_last_error(), "NCCL_COMM_BLOCKING") != NULL,
           name,
           "NCCL_COMM_BLOCKING=1, world 2, rank 1 never calls, timeout_ms "
           "2000: %s after %.1f ms (want ERR_INVALID_ARG naming the variable, "
           "at once)",
           rv_status(s), took);
  coll_comm_destroy(c);
  return rv_failures() ? 1 : 0;
}
