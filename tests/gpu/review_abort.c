/* SPDX-License-Identifier: Apache-2.0 */
/* review_abort.c: ending NCCL work that cannot finish, on one GPU: the
 * comm's timeout (watchdog) and coll_abort from another thread while a
 * host function holds the stream, coll_abort racing coll_comm_destroy, and
 * NCCL inits that wait for a rank that never comes (bounded by timeout_ms,
 * ended by coll_abort). Latencies are printed in the result lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

enum { AB_COUNT = 1 << 20 };

typedef struct ab {
  const char *name;
  cudaStream_t s1;
  void *dsend, *drecv;
} ab_t;

static int ab_open(ab_t *a, const char *name) {
  memset(a, 0, sizeof *a);
  a->name = name;
  if (!rv_device_ready(name)) return 0;
  a->s1 = rv_stream_new(name);
  a->dsend = rv_dev_alloc(name, AB_COUNT * sizeof(float));
  a->drecv = rv_dev_alloc(name, AB_COUNT * sizeof(float));
  return a->s1 != NULL && a->dsend != NULL && a->drecv != NULL;
}

static void ab_close(ab_t *a) {
  if (a->s1 != NULL) cudaStreamSynchronize(a->s1);
  cudaFree(a->dsend);
  cudaFree(a->drecv);
  if (a->s1 != NULL) cudaStreamDestroy(a->s1);
}

/* One try of the watchdog with comm timeout `limit` ms behind a host
 * function of `hold` ms. Returns 0 when the comm could not even be made
 * within `limit` (its init is bounded by the same timeout). */
static int watchdog_try(ab_t *a, int64_t limit, int hold, const char *note) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  coll_comm_t *c = NULL;
  coll_status_t s, s2;
  /* The allreduce never starts before the hold ends (hold > 2 * limit), so
   * it times out at twice the timeout from the call (N5 of the second
   * review; before that it waited for the hold, then completed: FAIL).
   * libcoll's deadlines are whole milliseconds: 2 ms of rounding. */
  double t0, took, lo = 2.0 * (double)limit - 2.0,
                   hi = 2.0 * (double)limit + 700.0;
  int aborted;
  cfg.timeout_ms = limit;
  cfg.name = "review-watchdog";
  t0 = rv_now_ms();
  s = rv_comm_world1(&cfg, &c);
  if (s == COLL_ERR_TIMEOUT) {
    printf(
        "note: watchdog: init with timeout_ms %lld timed out after %.1f ms\n",
        (long long)limit, rv_now_ms() - t0);
    return 0;
  }
  if (s != COLL_OK) {
    rv_check(0, a->name, "init: %s", rv_status(s));
    return 1;
  }
  coll_comm_abort_handle(c, &h);
  if (!rv_stream_sleep(a->name, a->s1, hold)) goto out;
  t0 = rv_now_ms();
  s = coll_allreduce(c, a->dsend, a->drecv, AB_COUNT, COLL_F32, COLL_SUM,
                     a->s1);
  took = rv_now_ms() - t0;
  aborted = coll_is_aborted(h);
  rv_check(
      s == COLL_ERR_TIMEOUT && took >= lo && took <= hi && aborted, a->name,
      "comm timeout_ms %lld, host function holding the stream %d ms: "
      "blocking allreduce returned %s after %.1f ms (want ERR_TIMEOUT "
      "in [%.0f, %.0f]: twice the timeout, as it never started; 2 ms of "
      "rounding allowed); coll_is_aborted %d%s",
      (long long)limit, hold, rv_status(s), took, lo + 2.0, hi, aborted, note);
  s2 = coll_allreduce(c, a->dsend, a->drecv, AB_COUNT, COLL_F32, COLL_SUM,
                      a->s1);
  /* The stream drains once the host function returns; then destroy. */
  cudaStreamSynchronize(a->s1);
  s = coll_comm_destroy(c);
  c = NULL;
  rv_check(s2 == COLL_ERR_TIMEOUT && s == COLL_OK, "watchdog-after",
           "the next allreduce: %s (want ERR_TIMEOUT, sticky); destroy after "
           "the stream drained: %s",
           rv_status(s2), rv_status(s));
out:
  coll_abort_handle_release(h);
  coll_comm_destroy(c);
  return 1;
}

/* Comm timeout 200 ms behind a 1 s host function: TIMEOUT at 400 ms. The
 * config's timeout
 * bounds the init too; should a world-1 init on this machine need more than
 * 200 ms, the same check runs scaled up (1500 ms behind 4 s). */
int rv_watchdog(void) {
  ab_t a;
  coll_comm_t *warm = NULL;
  if (ab_open(&a, "watchdog")) {
    /* A first comm loads NCCL's and CUDA's lazily loaded parts. */
    if (rv_comm_world1(NULL, &warm) == COLL_OK) coll_comm_destroy(warm);
    if (!watchdog_try(&a, 200, 1000, "") && !watchdog_try(&a, 200, 1000, "") &&
        !watchdog_try(&a, 1500, 4000,
                      " (scaled up: a world-1 init here needs more than "
                      "200 ms)"))
      rv_check(0, "watchdog", "no comm could be made within its timeout");
  }
  ab_close(&a);
  return rv_failures() ? 1 : 0;
}

/* A host function holds the stream 1 s; an iallreduce waits behind it; a
 * thread calls coll_abort at 100 ms: coll_wait must return ERR_ABORTED
 * within 300 ms of that call. */
int rv_abort_thread(void) {
  coll_abort_handle_t *h = NULL;
  coll_request_t *req = NULL;
  coll_comm_t *c = NULL;
  coll_status_t s, again;
  rv_aborter_t ab;
  double returned, released;
  ab_t a;
  if (!ab_open(&a, "abort-thread")) goto out;
  s = rv_comm_world1(NULL, &c);
  if (s != COLL_OK) {
    rv_check(0, a.name, "init: %s", rv_status(s));
    goto out;
  }
  coll_comm_abort_handle(c, &h);
  if (!rv_stream_sleep(a.name, a.s1, 1000)) goto out;
  s = coll_iallreduce(c, a.dsend, a.drecv, AB_COUNT, COLL_F32, COLL_SUM, a.s1,
                      &req);
  if (s != COLL_OK) {
    rv_check(0, a.name, "iallreduce: %s", rv_status(s));
    goto out;
  }
  rv_aborter_start(&ab, h, 100);
  s = coll_wait(req);
  returned = rv_now_ms();
  if (!rv_aborter_join(&ab, 5000)) {
    rv_check(0, a.name, "coll_abort has not returned 5 s after it was called");
    _Exit(1); /* the thread is stuck inside libcoll: no clean-up */
  }
  released = returned - ab.abort_ms;
  rv_check(s == COLL_ERR_ABORTED && released >= 0 && released <= 300.0, a.name,
           "coll_wait returned %s %.1f ms after coll_abort was called (want "
           "ERR_ABORTED within 300 ms); coll_abort itself took %.1f ms",
           rv_status(s), released, ab.return_ms - ab.abort_ms);
  again = coll_abort(h);
  cudaStreamSynchronize(a.s1);
  s = coll_comm_destroy(c);
  c = NULL;
  rv_check(again == COLL_OK && s == COLL_OK, "abort-thread-after",
           "a second coll_abort: %s; destroy: %s (want both OK)",
           rv_status(again), rv_status(s));
out:
  coll_abort_handle_release(h);
  coll_comm_destroy(c);
  ab_close(&a);
  return rv_failures() ? 1 : 0;
}

/* coll_abort from a thread racing coll_comm_destroy, 20 rounds, the abort
 * moved from well before to well after the destroy. Nothing may crash or
 * hang, and destroy returns OK whichever wins. (run.sh also looks for
 * NCCL's warnings about a comm used after it was destroyed.) Rounds stop
 * after 20 s, should NCCL's inits be that slow here; the line says so. */
int rv_abort_race(void) {
  enum { ROUNDS = 20 };
  rv_acc_t acc;
  int round, first = 0;
  float one = 1.0f;
  double t0 = rv_now_ms();
  ab_t a;
  rv_acc_init(&acc, "abort-race");
  if (!ab_open(&a, "abort-race")) goto out;
  rv_upload(a.name, a.dsend, &one, sizeof one);
  for (round = 0; round < ROUNDS && rv_now_ms() - t0 < 20000.0; round++) {
    coll_abort_handle_t *h = NULL;
    coll_comm_t *c = NULL;
    coll_status_t s;
    rv_aborter_t ab;
    double lead = (double)round * 0.25, destroy_ms; /* abort at 0..4.75 ms */
    s = rv_comm_world1(NULL, &c);
    if (s == COLL_OK)
      s = coll_allreduce(c, a.dsend, a.drecv, 1, COLL_F32, COLL_SUM, a.s1);
    if (s != COLL_OK) {
      rv_acc_case(&acc, 0, "round %d: init/allreduce: %s", round, rv_status(s));
      coll_comm_destroy(c);
      continue;
    }
    coll_comm_abort_handle(c, &h);
    rv_aborter_start(&ab, h, lead);
    rv_sleep_ms(2.5);
    destroy_ms = rv_now_ms();
    s = coll_comm_destroy(c);
    if (!rv_aborter_join(&ab, 5000)) {
      rv_check(0, a.name, "round %d: coll_abort has not returned after 5 s",
               round);
      _Exit(1);
    }
    first += ab.abort_ms < destroy_ms;
    rv_acc_case(&acc, s == COLL_OK && ab.status == COLL_OK,
                "round %d: destroy %s, coll_abort %s", round, rv_status(s),
                coll_status_name(ab.status));
    coll_abort_handle_release(h);
  }
  rv_acc_end(&acc,
             "%d of %d rounds of coll_abort from a thread racing "
             "coll_comm_destroy in %.1f s (abort called first in %d): no "
             "crash or hang, destroy and abort OK",
             round, ROUNDS, (rv_now_ms() - t0) / 1e3, first);
out:
  ab_close(&a);
  return rv_failures() ? 1 : 0;
}

/* World 2, only rank 0 calls: timeout_ms 2000 bounds the init. */
int rv_init_timeout(void) {
  const char *name = "init-timeout";
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
  cfg.timeout_ms = 2000;
  cfg.name = "review-init-timeout";
  t0 = rv_now_ms();
  s = coll_comm_init_rank(0, 2, &id, &cfg, &c);
  took = rv_now_ms() - t0;
  /* libcoll's deadlines are whole milliseconds: allow 2 ms of rounding. */
  rv_check(s == COLL_ERR_TIMEOUT && took >= 1998.0 && took <= 3000.0, name,
           "world 2, rank 1 never calls, timeout_ms 2000: %s after %.1f ms "
           "(want ERR_TIMEOUT in [2000, 3000], 2 ms of rounding allowed)",
           rv_status(s), took);
  coll_comm_destroy(c);
  return rv_failures() ? 1 : 0;
}

/* World 2, only rank 0 calls, timeout 20 s; a thread aborts the config's
 * handle at 500 ms: the init must end with ERR_ABORTED within 1 s. */
int rv_init_abort(void) {
  const char *name = "init-abort";
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  coll_status_t s;
  rv_aborter_t ab;
  double returned, released;
  if (!rv_device_ready(name)) return 1;
  s = coll_unique_id_create(&id);
  if (s == COLL_OK) s = coll_abort_handle_create(&h);
  if (s != COLL_OK) {
    rv_check(0, name, "unique id / abort handle: %s", rv_status(s));
    return 1;
  }
  cfg.timeout_ms = 20000;
  cfg.name = "review-init-abort";
  cfg.abort_handle = h;
  rv_aborter_start(&ab, h, 500);
  s = coll_comm_init_rank(0, 2, &id, &cfg, &c);
  returned = rv_now_ms();
  if (!rv_aborter_join(&ab, 5000)) {
    rv_check(0, name, "coll_abort has not returned 5 s after it was called");
    _Exit(1);
  }
  released = returned - ab.abort_ms;
  rv_check(s == COLL_ERR_ABORTED && released >= 0 && released < 1000.0, name,
           "world 2, rank 1 never calls: init returned %s %.1f ms after "
           "coll_abort was called (want ERR_ABORTED within 1000 ms); "
           "coll_abort itself took %.1f ms",
           rv_status(s), released, ab.return_ms - ab.abort_ms);
  coll_comm_destroy(c);
  coll_abort_handle_release(h);
  return rv_failures() ? 1 : 0;
}
