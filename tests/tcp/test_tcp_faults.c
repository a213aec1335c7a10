/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_faults.c: TCP comms whose ranks are threads of this process
 * (coll_comm_init_store over 127.0.0.1), with a fault-injecting proxy
 * (tests/common/tcp_proxy.c) on the connection between ranks 0 and 1:
 * delayed bytes still give right results; a stall, a reset, a corrupted
 * frame header and half a header held end every rank's collective with an
 * error within its timeout; a corrupted payload byte arrives as it was
 * corrupted (the wire does not checksum payloads, see the README); abort
 * ends a collective stuck on a stalled connection. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/error.h"
#include "tcp_proxy.h"
#include "tcp_proxy_store.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 3
/* The proxy sits on the pair (0, 1): rank 1 dials rank 0, so rank 1's
 * store is wrapped. In the ring rank 0 sends to rank 1: TCP_PROXY_DOWN. */
#define LO 0
#define HI 1
#define COUNT 4099 /* not a multiple of the world: uneven chunks */
/* Every job ends well within this, or the test fails as a hang. */
#define JOB_BOUND_MS 20000
/* The controller's bound on waiting for the proxy to see traffic. */
#define SEE_MS 5000

typedef struct job job_t;
/* What one rank runs on its comm; counts wrong elements in *wrong. */
typedef coll_status_t (*work_fn)(job_t *j, int rank, coll_comm_t *c,
                                 int *wrong);
/* What the controller does to the proxy; returns 0, or -1 with ctl_why. */
typedef int (*ctl_fn)(job_t *j);

struct job {
  test_kv_t *kv;
  test_kv_view_t views[WORLD];
  coll_store_ops_t inner; /* rank HI's own store, under the wrapper */
  tcp_proxy_store_t wrap;
  tcp_proxy_t *proxy;
  int64_t timeout_ms;
  pthread_barrier_t bar; /* WORLD ranks and the controller */
  work_fn work;
  ctl_fn before; /* comms are up, no collective started yet */
  ctl_fn during; /* the collective was started */
  coll_abort_handle_t *handles[WORLD];
  coll_status_t init_s[WORLD], s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  int wrong[WORLD];
  int64_t took_ms[WORLD];
  char ctl_why[256];
  int ctl_rc;
};

static const char *const env_vars[] = {"COLL_SOCKET_IFNAME", "MASTER_ADDR",
                                       "COLL_TIMEOUT_MS",    "COLL_BACKEND",
                                       "COLL_AUTH_TOKEN",    "COLL_ALGO"};

static int setup(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
    unsetenv(env_vars[i]);
  setenv("COLL_BACKEND", "cpu", 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  /* The ring, so that rank 0's data reaches rank 1 over the proxy. */
  setenv("COLL_ALGO", "ring", 1);
  return 0;
}

static int teardown(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
    unsetenv(env_vars[i]);
  return 0;
}

/* ---- the job: ranks, a controller, barriers between the phases ---------- */

static void bar(job_t *j) { pthread_barrier_wait(&j->bar); }

static void rank_main(job_t *j, int rank) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  coll_status_t s;
  int64_t t0;
  if (rank == HI)
    tcp_proxy_store_ops(&j->wrap, &ops);
  else
    test_kv_ops(&j->views[rank], &ops);
  cfg.timeout_ms = j->timeout_ms;
  s = coll_comm_init_store(&ops, rank, WORLD, &cfg, &c);
  if (s == COLL_OK) s = coll_comm_abort_handle(c, &j->handles[rank]);
  j->init_s[rank] = s;
  if (s != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "init: %s", coll_last_error());
  bar(j); /* 1: comms are up */
  bar(j); /* 2: the fault is armed */
  t0 = test_now_ms();
  if (s == COLL_OK) {
    s = j->work(j, rank, c, &j->wrong[rank]);
    if (s != COLL_OK)
      snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  }
  j->took_ms[rank] = test_now_ms() - t0;
  j->s[rank] = s;
  bar(j); /* 3: every rank has its answer */
  bar(j); /* 4: the proxy passes again, for the goodbyes */
  coll_comm_destroy(c);
  if (j->handles[rank] != NULL) coll_abort_handle_release(j->handles[rank]);
}

static void controller(job_t *j) {
  int r, up = 1;
  bar(j); /* 1 */
  for (r = 0; r < WORLD; r++) up &= j->init_s[r] == COLL_OK;
  if (up && j->before != NULL) j->ctl_rc = j->before(j);
  bar(j); /* 2 */
  if (up && j->ctl_rc == 0 && j->during != NULL) j->ctl_rc = j->during(j);
  bar(j); /* 3 */
  (void)tcp_proxy_pass(j->proxy, TCP_PROXY_UP);
  (void)tcp_proxy_pass(j->proxy, TCP_PROXY_DOWN);
  bar(j); /* 4 */
}

static void thread_main(int id, int n, void *arg) {
  (void)n;
  if (id == WORLD)
    controller(arg);
  else
    rank_main(arg, id);
}

static job_t *new_job(int64_t timeout_ms, work_fn work) {
  job_t *j = calloc(1, sizeof *j);
  int r;
  assert_non_null(j);
  j->kv = test_kv_new();
  assert_non_null(j->kv);
  for (r = 0; r < WORLD; r++) j->views[r].kv = j->kv;
  test_kv_ops(&j->views[HI], &j->inner);
  assert_int_equal(tcp_proxy_start(&j->proxy), 0);
  j->wrap.inner = &j->inner;
  j->wrap.peer = LO;
  j->wrap.proxy = j->proxy;
  j->timeout_ms = timeout_ms;
  j->work = work;
  assert_int_equal(pthread_barrier_init(&j->bar, NULL, WORLD + 1), 0);
  return j;
}

static void run(job_t *j, const char *what) {
  int r;
  test_run_ranks(WORLD + 1, thread_main, j, JOB_BOUND_MS, what);
  for (r = 0; r < WORLD; r++) {
    if (j->init_s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    printf("  %s: rank %d: %s after %lld ms%s%s\n", what, r,
           coll_status_name(j->s[r]), (long long)j->took_ms[r],
           j->s[r] == COLL_OK ? "" : ": ", j->why[r]);
  }
  if (j->ctl_rc != 0) fail_msg("%s: controller: %s", what, j->ctl_why);
  /* The connection between 0 and 1 went through the proxy. */
  assert_int_equal(j->wrap.rewrites, 1);
}

static void free_job(job_t *j) {
  tcp_proxy_stop(j->proxy);
  pthread_barrier_destroy(&j->bar);
  test_kv_free(j->kv);
  free(j);
}

static tcp_proxy_stats_t stats_of(job_t *j) {
  tcp_proxy_stats_t st;
  assert_int_equal(tcp_proxy_stats(j->proxy, &st), 0);
  return st;
}

static void expect_status(const job_t *j, int rank, coll_status_t want) {
  if (j->s[rank] != want)
    fail_msg("rank %d: want %s, got %s: %s", rank, coll_status_name(want),
             coll_status_name(j->s[rank]), j->why[rank]);
}

/* A failed collective, never OK: status one of want (up to two). */
static void expect_failed(const job_t *j, int rank, coll_status_t a,
                          coll_status_t b) {
  if (j->s[rank] != a && j->s[rank] != b)
    fail_msg("rank %d: want %s or %s, got %s: %s", rank, coll_status_name(a),
             coll_status_name(b), coll_status_name(j->s[rank]), j->why[rank]);
}

static void expect_says(const job_t *j, int rank, const char *text) {
  if (strstr(j->why[rank], text) == NULL)
    fail_msg("rank %d: the error does not say \"%s\": %s", rank, text,
             j->why[rank]);
}

static void expect_names(const job_t *j, int rank, int other) {
  char needle[32];
  snprintf(needle, sizeof needle, "rank %d", other);
  if (strstr(j->why[rank], needle) == NULL)
    fail_msg("rank %d: the error does not name rank %d: %s", rank, other,
             j->why[rank]);
}

/* A stuck job: the first rank to give up times out and leaves, telling
 * the others where the failure started (itself, timed out), so they time
 * out too or report that origin; none returns a result. Which rank's wait
 * runs out first is a race, so the text is checked only for saying so. */
static void expect_timed_out(const job_t *j) {
  int r, timeouts = 0;
  for (r = 0; r < WORLD; r++) {
    expect_failed(j, r, COLL_ERR_TIMEOUT, COLL_ERR_PEER_LOST);
    timeouts += j->s[r] == COLL_ERR_TIMEOUT;
    if (j->s[r] == COLL_ERR_TIMEOUT && strstr(j->why[r], "timed out") == NULL &&
        strstr(j->why[r], "not done within") == NULL)
      fail_msg("rank %d: a timeout that does not say so: %s", r, j->why[r]);
  }
  assert_true(timeouts > 0);
}

/* ---- work -------------------------------------------------------------- */

/* An f64 sum allreduce against the serial sum (exact: halves), then a
 * broadcast from rank 2 and an allgather against what each rank sent. */
static coll_status_t work_collectives(job_t *j, int rank, coll_comm_t *c,
                                      int *wrong) {
  double *x = malloc(COUNT * sizeof *x);
  int32_t *all = malloc(WORLD * COUNT * sizeof *all);
  int32_t *mine = malloc(COUNT * sizeof *mine);
  coll_status_t s = COLL_ERR_NO_MEMORY;
  int i, r;
  (void)j;
  if (x == NULL || all == NULL || mine == NULL) goto out;
  for (i = 0; i < COUNT; i++) x[i] = rank + i * 0.5;
  s = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
  for (i = 0; s == COLL_OK && i < COUNT; i++)
    *wrong += x[i] != WORLD * (WORLD - 1) / 2.0 + WORLD * i * 0.5;
  for (i = 0; i < COUNT; i++) mine[i] = rank == 2 ? 7 * i - 3 : -1;
  if (s == COLL_OK) s = coll_broadcast(c, mine, COUNT, COLL_I32, 2, NULL);
  for (i = 0; s == COLL_OK && i < COUNT; i++) *wrong += mine[i] != 7 * i - 3;
  for (i = 0; i < COUNT; i++) mine[i] = rank * 100000 + i;
  if (s == COLL_OK) s = coll_allgather(c, mine, all, COUNT, COLL_I32, NULL);
  for (r = 0; s == COLL_OK && r < WORLD; r++)
    for (i = 0; i < COUNT; i++) *wrong += all[r * COUNT + i] != r * 100000 + i;
out:
  free(x);
  free(all);
  free(mine);
  return s;
}

static coll_status_t work_allreduce(job_t *j, int rank, coll_comm_t *c,
                                    int *wrong) {
  double *x = malloc(COUNT * sizeof *x);
  coll_status_t s = COLL_ERR_NO_MEMORY;
  int i;
  (void)j;
  if (x == NULL) return s;
  for (i = 0; i < COUNT; i++) x[i] = rank + i * 0.5;
  s = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
  for (i = 0; s == COLL_OK && i < COUNT; i++)
    *wrong += x[i] != WORLD * (WORLD - 1) / 2.0 + WORLD * i * 0.5;
  free(x);
  return s;
}

#define P2P_BYTES 4096
#define P2P_FLIP 100 /* the payload byte the proxy corrupts */

static uint8_t pattern(int i) { return (uint8_t)(i * 31 + 7); }

/* Rank LO sends a pattern to rank HI; HI counts the bytes that differ, and
 * marks the one it expects flipped with 1000 when it is so. */
static coll_status_t work_p2p(job_t *j, int rank, coll_comm_t *c, int *wrong) {
  uint8_t buf[P2P_BYTES];
  size_t got = 0;
  coll_status_t s = COLL_OK;
  int i;
  (void)j;
  for (i = 0; i < P2P_BYTES; i++) buf[i] = rank == LO ? pattern(i) : 0;
  if (rank == LO) s = coll_send(c, buf, P2P_BYTES, COLL_U8, HI, 5);
  if (rank != HI) return s;
  s = coll_recv(c, buf, P2P_BYTES, COLL_U8, LO, 5, &got);
  if (s != COLL_OK) return s;
  if (got != P2P_BYTES) return COLL_ERR_LENGTH_MISMATCH;
  for (i = 0; i < P2P_BYTES; i++) *wrong += buf[i] != pattern(i);
  if ((buf[P2P_FLIP] ^ pattern(P2P_FLIP)) == 0xff) *wrong += 1000;
  return COLL_OK;
}

/* ---- controllers --------------------------------------------------------- */

static int ctl_fail(job_t *j, const char *what) {
  snprintf(j->ctl_why, sizeof j->ctl_why, "%s", what);
  return -1;
}

static int stall_both(job_t *j) {
  if (tcp_proxy_stall(j->proxy, TCP_PROXY_UP) != 0 ||
      tcp_proxy_stall(j->proxy, TCP_PROXY_DOWN) != 0)
    return ctl_fail(j, "stall refused");
  return 0;
}

/* The collective is in flight: rank 0's first frame to rank 1 is stuck in
 * the proxy. */
static int see_stuck(job_t *j) {
  if (tcp_proxy_wait_queued(j->proxy, TCP_PROXY_DOWN, 1, SEE_MS) != 0)
    return ctl_fail(j, "no bytes from rank 0 reached the stalled proxy");
  return 0;
}

static int reset_both(job_t *j) {
  if (see_stuck(j) != 0) return -1;
  if (tcp_proxy_reset(j->proxy, TCP_PROXY_DOWN) != 0 ||
      tcp_proxy_reset(j->proxy, TCP_PROXY_UP) != 0)
    return ctl_fail(j, "reset refused");
  return 0;
}

/* Aborts rank 1, stuck on the stalled connection. (Aborting a second rank
 * too would race: the first one's leaving reaches it through rank 2.) */
static int abort_hi(job_t *j) {
  if (see_stuck(j) != 0) return -1;
  if (coll_abort(j->handles[HI]) != COLL_OK) return ctl_fail(j, "abort");
  return 0;
}

static int corrupt_header(job_t *j) {
  /* The first byte of the magic of rank 0's next frame to rank 1. */
  if (tcp_proxy_corrupt(j->proxy, TCP_PROXY_DOWN, TCP_PROXY_AT_HEADER, 0, 1) !=
      0)
    return ctl_fail(j, "corrupt refused");
  return 0;
}

static int corrupt_payload(job_t *j) {
  if (tcp_proxy_corrupt(j->proxy, TCP_PROXY_DOWN, TCP_PROXY_AT_PAYLOAD,
                        P2P_FLIP, 1) != 0)
    return ctl_fail(j, "corrupt refused");
  return 0;
}

static int hold_half(job_t *j) {
  if (tcp_proxy_hold_half_header(j->proxy, TCP_PROXY_DOWN) != 0)
    return ctl_fail(j, "hold refused");
  return 0;
}

/* Half of rank 0's next header reached rank 1 and the rest waits. */
static int see_held(job_t *j) {
  int64_t end = test_now_ms() + SEE_MS;
  tcp_proxy_stats_t st;
  do {
    if (tcp_proxy_stats(j->proxy, &st) != 0) return ctl_fail(j, "stats");
    if (st.held[TCP_PROXY_DOWN]) return 0;
    test_sleep_ms(5);
  } while (test_now_ms() < end);
  return ctl_fail(j, "the proxy never held half a header");
}

/* ---- tests --------------------------------------------------------------- */

/* Every byte between ranks 0 and 1 waits 5 ms in each direction, the
 * handshakes included: the results are still right on every rank. */
static void test_delay(void **state) {
  job_t *j = new_job(10000, work_collectives);
  tcp_proxy_stats_t st;
  int r;
  (void)state;
  assert_int_equal(tcp_proxy_delay(j->proxy, TCP_PROXY_UP, 5), 0);
  assert_int_equal(tcp_proxy_delay(j->proxy, TCP_PROXY_DOWN, 5), 0);
  run(j, "delay");
  for (r = 0; r < WORLD; r++) {
    expect_status(j, r, COLL_OK);
    assert_int_equal(j->wrong[r], 0);
  }
  st = stats_of(j);
  assert_int_equal(st.links, 1);
  assert_true(st.frames[TCP_PROXY_UP] > 0);
  assert_true(st.frames[TCP_PROXY_DOWN] > 0);
  free_job(j);
}

/* Both directions stall before an allreduce with a 300 ms timeout: every
 * rank fails within it, by its own timeout or by a peer's leaving. */
static void test_stall(void **state) {
  job_t *j = new_job(300, work_allreduce);
  (void)state;
  j->before = stall_both;
  j->during = see_stuck;
  run(j, "stall");
  expect_timed_out(j);
  free_job(j);
}

/* The connection is reset (both ways) while the allreduce waits on it:
 * ranks 0 and 1 lose each other, each naming the other; rank 2 fails too
 * (it waits on them, timeout 1 s). */
static void test_reset(void **state) {
  job_t *j = new_job(1000, work_allreduce);
  (void)state;
  j->before = stall_both;
  j->during = reset_both;
  run(j, "reset");
  expect_status(j, LO, COLL_ERR_PEER_LOST);
  expect_names(j, LO, HI);
  expect_status(j, HI, COLL_ERR_PEER_LOST);
  expect_names(j, HI, LO);
  expect_failed(j, 2, COLL_ERR_TIMEOUT, COLL_ERR_PEER_LOST);
  free_job(j);
}

/* The magic of rank 0's next frame to rank 1 arrives flipped: rank 1 says
 * PROTOCOL naming rank 0 and tells every rank before it cuts rank 0 off,
 * so every rank reports PROTOCOL naming rank 0 (README, "What each rank
 * reports when something fails"); no rank returns a result. */
static void test_corrupt_header(void **state) {
  job_t *j = new_job(1000, work_allreduce);
  (void)state;
  j->before = corrupt_header;
  run(j, "corrupt header");
  assert_int_equal(stats_of(j).flipped[TCP_PROXY_DOWN], 1);
  for (int r = 0; r < WORLD; r++) {
    expect_status(j, r, COLL_ERR_PROTOCOL);
    expect_says(j, r, "rank 0 broke the wire protocol");
  }
  free_job(j);
}

/* Frames after the handshake carry no checksum of their own (README,
 * "Wire protocol and security model"): a payload byte changed on the way,
 * past TCP's checksum, arrives changed and the receive says COLL_OK. This
 * pins the documented limit; a payload check would make it fail. */
static void test_corrupt_payload(void **state) {
  job_t *j = new_job(5000, work_p2p);
  (void)state;
  j->before = corrupt_payload;
  run(j, "corrupt payload");
  assert_int_equal(stats_of(j).flipped[TCP_PROXY_DOWN], 1);
  expect_status(j, LO, COLL_OK);
  expect_status(j, HI, COLL_OK);
  assert_int_equal(j->wrong[HI], 1 + 1000); /* that one byte, flipped */
  free_job(j);
}

/* Rank 1 gets the first half of rank 0's next frame header and no more:
 * the job fails within the 300 ms timeout instead of waiting for the rest. */
static void test_half_header(void **state) {
  job_t *j = new_job(300, work_allreduce);
  (void)state;
  j->before = hold_half;
  j->during = see_held;
  run(j, "half header");
  expect_timed_out(j);
  free_job(j);
}

/* While the allreduce is stuck on the stalled connection (timeout 10 s),
 * another thread aborts rank 1: it returns ABORTED, and the others, which
 * hear of it (rank 0 through rank 2), ABORTED naming rank 1: neither a
 * TIMEOUT nor the loss of a rank that is alive. */
static void test_abort_while_stalled(void **state) {
  job_t *j = new_job(10000, work_allreduce);
  (void)state;
  j->before = stall_both;
  j->during = abort_hi;
  run(j, "abort");
  expect_status(j, HI, COLL_ERR_ABORTED);
  expect_status(j, LO, COLL_ERR_ABORTED);
  expect_says(j, LO, "rank 1 aborted");
  expect_status(j, 2, COLL_ERR_ABORTED);
  expect_says(j, 2, "rank 1 aborted");
  free_job(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stall, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_payload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_abort_while_stalled, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
