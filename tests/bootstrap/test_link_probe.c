/* SPDX-License-Identifier: Apache-2.0 */
/* test_link_probe.c: the ring threshold a comm takes from its links. The
 * model's crossover is checked against both algorithms' times written out
 * here; then ranks as threads, over TCP on 127.0.0.1 with faked hosts
 * (two ranks on each of two), create comms: every rank must hold the same
 * measured threshold, COLL_RING_THRESHOLD and COLL_LINK_PROBE=0 must keep
 * the probe from running, a bad COLL_LINK_PROBE is refused, and a rank that
 * leaves during the probe fails the others' creation instead of hanging
 * it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/link_probe.h"
#include "boot_test.h"
#include "bootstrap/rendezvous/host_id.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "test_util.h"

/* ---- the model ----------------------------------------------------------- */

/* Steps of recursive doubling for n ranks: log2 of the largest power of
 * two <= n, and two more (fold in, result out) when n is not one. */
static int rd_steps(int n) {
  int k = (int)floor(log2((double)n));
  return (n & (n - 1)) != 0 ? k + 2 : k;
}

static double t_rd(int n, double a, double c, double s) {
  return rd_steps(n) * (a + s * c);
}

static double t_ring(int n, double a, double c, double s) {
  return 2.0 * (n - 1) * (a + s * c / n);
}

static void test_threshold_is_the_crossover(void **state) {
  static const int ns[] = {3, 4, 5, 6, 7, 8, 12, 16, 64};
  coll_link_est_t e = {20e-6, 1e-9}; /* 20 us a step, 1 GB/s */
  size_t i;
  (void)state;
  /* 4 ranks: 8 alpha / c exactly. */
  assert_int_equal(coll__link_ring_threshold(4, &e), 160000);
  for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    size_t s = coll__link_ring_threshold(n, &e);
    double x = (double)s;
    if (s == COLL_LINK_RING_MIN || s == COLL_LINK_RING_MAX) continue;
    /* The last whole byte count where doubling is not slower. */
    if (t_rd(n, e.alpha_s, e.s_per_byte, x) >
            t_ring(n, e.alpha_s, e.s_per_byte, x) ||
        t_rd(n, e.alpha_s, e.s_per_byte, x + 1) <
            t_ring(n, e.alpha_s, e.s_per_byte, x + 1))
      fail_msg("n %d: threshold %zu is not where the times meet", n, s);
    if (t_rd(n, e.alpha_s, e.s_per_byte, x / 2) >=
            t_ring(n, e.alpha_s, e.s_per_byte, x / 2) ||
        t_rd(n, e.alpha_s, e.s_per_byte, x * 2) <=
            t_ring(n, e.alpha_s, e.s_per_byte, x * 2))
      fail_msg("n %d: doubling is not faster below %zu and slower above", n, s);
  }
  /* Two ranks: doubling never sends more; it stays doubling. */
  assert_true(coll__link_ring_threshold(2, &e) == SIZE_MAX);
  /* Clamped: a link with no step cost, one with no byte cost. */
  e.alpha_s = 1e-12;
  assert_int_equal(coll__link_ring_threshold(4, &e), COLL_LINK_RING_MIN);
  e.alpha_s = 1.0;
  assert_int_equal(coll__link_ring_threshold(4, &e), COLL_LINK_RING_MAX);
  e.s_per_byte = 0;
  assert_int_equal(coll__link_ring_threshold(4, &e), COLL_LINK_RING_MAX);
}

/* Halving-doubling over n = 2^k ranks: 2k steps, the ring's bytes. */
static double t_rh(int n, double a, double c, double s) {
  int k = rd_steps(n);
  return 2.0 * k * a + 2.0 * (n - 1) * s * c / n;
}

static void test_rh_threshold_is_the_crossover(void **state) {
  static const int ns[] = {4, 8, 16, 64};
  coll_link_est_t e = {20e-6, 1e-9};
  (void)state;
  /* 4 ranks: 4 alpha / c, half the ring's. */
  assert_int_equal(coll__link_rh_threshold(4, &e), 80000);
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    size_t s = coll__link_rh_threshold(n, &e);
    double x = (double)s;
    if (s == COLL_LINK_RING_MIN || s == COLL_LINK_RING_MAX) continue;
    if (t_rd(n, e.alpha_s, e.s_per_byte, x) >
            t_rh(n, e.alpha_s, e.s_per_byte, x) ||
        t_rd(n, e.alpha_s, e.s_per_byte, x + 1) <
            t_rh(n, e.alpha_s, e.s_per_byte, x + 1))
      fail_msg("n %d: threshold %zu is not where the times meet", n, s);
    if (s > coll__link_ring_threshold(n, &e))
      fail_msg("n %d: halving-doubling from %zu, the ring from %zu", n, s,
               coll__link_ring_threshold(n, &e));
  }
  /* Not a power of two, or two ranks: never. */
  assert_true(coll__link_rh_threshold(6, &e) == SIZE_MAX);
  assert_true(coll__link_rh_threshold(3, &e) == SIZE_MAX);
  assert_true(coll__link_rh_threshold(2, &e) == SIZE_MAX);
}

/* The two-level allreduce over H hosts of L ranks: within a host 2 (L - 1)
 * steps of 1/L of the buffer, across 2 (H - 1) steps of 1/(L H), every
 * step at the link's price. */
static double t_two_level(int hosts, int local, double a, double c, double s) {
  return 2.0 * (local - 1) * (a + s * c / local) +
         2.0 * (hosts - 1) * (a + s * c / (local * hosts));
}

static void test_two_level_threshold_is_the_crossover(void **state) {
  static const int layouts[][2] = {{2, 2}, {2, 4}, {4, 2}, {3, 2},
                                   {2, 3}, {8, 4}, {4, 8}};
  coll_link_est_t e = {20e-6, 1e-9};
  (void)state;
  /* 2 hosts x 2 ranks: 4 alpha / c, half the flat ring's. */
  assert_int_equal(coll__link_two_level_threshold(2, 2, &e), 80000);
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    int h = layouts[i][0], l = layouts[i][1], n = h * l;
    size_t s = coll__link_two_level_threshold(h, l, &e);
    double x = (double)s;
    if (s == COLL_LINK_RING_MIN || s == COLL_LINK_RING_MAX) continue;
    if (t_rd(n, e.alpha_s, e.s_per_byte, x) >
            t_two_level(h, l, e.alpha_s, e.s_per_byte, x) ||
        t_rd(n, e.alpha_s, e.s_per_byte, x + 1) <
            t_two_level(h, l, e.alpha_s, e.s_per_byte, x + 1))
      fail_msg("%dx%d: threshold %zu is not where the times meet", h, l, s);
    /* It pays from a smaller size than the flat ring. */
    if (s > coll__link_ring_threshold(n, &e))
      fail_msg("%dx%d: two-level from %zu, the ring from %zu", h, l, s,
               coll__link_ring_threshold(n, &e));
  }
  e.alpha_s = 1e-12;
  assert_int_equal(coll__link_two_level_threshold(2, 2, &e),
                   COLL_LINK_RING_MIN);
  e.alpha_s = 1.0;
  assert_int_equal(coll__link_two_level_threshold(2, 2, &e),
                   COLL_LINK_RING_MAX);
}

/* ---- comms over TCP with two faked hosts ----------------------------------
 */

#define WORLD 4
#define COUNT 40000 /* f32: an allreduce on either side of any threshold */

static const char *const k_hosts[WORLD] = {"A/net:1/ipc:1", "B/net:2/ipc:2",
                                           "A/net:1/ipc:1", "B/net:2/ipc:2"};

typedef struct job {
  int port;
  int leaver; /* this rank destroys its transport instead (-1: none) */
  coll_status_t s[WORLD];
  size_t threshold[WORLD], two_level[WORLD], rh[WORLD];
  coll_link_est_t link[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
} job_t;

static coll_status_t check_allreduce(coll_comm_t *c, int rank) {
  float *x = malloc(COUNT * sizeof *x);
  coll_status_t s;
  int i;
  if (x == NULL) return COLL_ERR_NO_MEMORY;
  for (i = 0; i < COUNT; i++) x[i] = (float)(rank + 1 + i % 7);
  s = coll_allreduce(c, x, x, COUNT, COLL_F32, COLL_SUM, NULL);
  for (i = 0; s == COLL_OK && i < COUNT; i++)
    if (x[i] != (float)(WORLD * (WORLD + 1) / 2 + WORLD * (i % 7)))
      s = coll__err(COLL_ERR_INTERNAL, "element %d is %g", i, (double)x[i]);
  free(x);
  return s;
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL;
  cfg.rank = rank;
  cfg.world = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = j->port;
  cfg.timeout_ms = 30000;
  cfg.ifname = "lo";
  j->s[rank] = coll_tcp_create(&cfg, &t);
  if (j->s[rank] == COLL_OK && rank == j->leaver) {
    coll_transport_destroy(t);
    return;
  }
  if (j->s[rank] == COLL_OK) j->s[rank] = coll_comm_create(t, NULL, &c);
  if (j->s[rank] == COLL_OK) {
    j->threshold[rank] = ((coll_cpu_t *)c->be)->tune.ring_threshold;
    j->two_level[rank] = ((coll_cpu_t *)c->be)->tune.two_level_threshold;
    j->rh[rank] = ((coll_cpu_t *)c->be)->tune.rh_threshold;
    j->link[rank] = ((coll_cpu_t *)c->be)->tune.link;
    j->s[rank] = check_allreduce(c, rank);
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static job_t *run(int leaver) {
  job_t *j = calloc(1, sizeof *j);
  assert_non_null(j);
  j->leaver = leaver;
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, k_hosts, WORLD};
  test_run_ranks(WORLD, rank_main, j, 60000, "link probe ranks");
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  return j;
}

/* Every rank ends with the same threshold; `want` 0: a measured one. */
static void expect_threshold(job_t *j, size_t want) {
  int r;
  for (r = 0; r < WORLD; r++)
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
  for (r = 0; r < WORLD; r++) {
    if (j->threshold[r] != j->threshold[0])
      fail_msg("rank %d picked %zu, rank 0 %zu", r, j->threshold[r],
               j->threshold[0]);
    if (want != 0 && (j->threshold[r] != want || j->two_level[r] != want ||
                      j->rh[r] != SIZE_MAX))
      fail_msg("rank %d: thresholds %zu and %zu (two-level), want %zu", r,
               j->threshold[r], j->two_level[r], want);
    /* Measured: the same figures on every rank, and the threshold is the
     * model's for them; else no probe ran. */
    if (want == 0 &&
        (j->link[r].alpha_s <= 0 || j->link[r].s_per_byte < 0 ||
         memcmp(&j->link[r], &j->link[0], sizeof j->link[r]) != 0 ||
         j->threshold[r] != coll__link_ring_threshold(WORLD, &j->link[r]) ||
         j->two_level[r] != coll__link_two_level_threshold(2, 2, &j->link[r]) ||
         j->rh[r] != coll__link_rh_threshold(WORLD, &j->link[r])))
      fail_msg(
          "rank %d: step %g s, %g s/byte, threshold %zu: not one probe "
          "every rank agreed on",
          r, j->link[r].alpha_s, j->link[r].s_per_byte, j->threshold[r]);
    if (want != 0 && j->link[r].alpha_s != 0)
      fail_msg("rank %d: the probe ran although it was overridden", r);
  }
}

static void test_ranks_agree_on_a_measured_threshold(void **state) {
  job_t *j;
  (void)state;
  j = run(-1);
  expect_threshold(j, 0);
  free(j);
}

static void test_overrides_skip_the_probe(void **state) {
  job_t *j;
  (void)state;
  setenv("COLL_RING_THRESHOLD", "12345", 1);
  j = run(-1);
  unsetenv("COLL_RING_THRESHOLD");
  expect_threshold(j, 12345);
  free(j);
  setenv("COLL_LINK_PROBE", "0", 1);
  j = run(-1);
  unsetenv("COLL_LINK_PROBE");
  expect_threshold(j, 256u * 1024u); /* the library's constant */
  free(j);
}

static void test_bad_value_refused(void **state) {
  job_t *j;
  int r;
  (void)state;
  setenv("COLL_LINK_PROBE", "sometimes", 1);
  j = run(-1);
  unsetenv("COLL_LINK_PROBE");
  for (r = 0; r < WORLD; r++) {
    assert_int_equal(j->s[r], COLL_ERR_INVALID_ARG);
    assert_non_null(strstr(j->why[r], "COLL_LINK_PROBE='sometimes'"));
  }
  free(j);
}

/* Rank 3 leaves instead of creating its comm: the probe's shifts around
 * the ring need it, so the others' creation fails naming it. */
static void test_leaver_fails_creation(void **state) {
  job_t *j;
  int r;
  (void)state;
  j = run(3);
  for (r = 0; r < 3; r++) {
    if (j->s[r] == COLL_OK) fail_msg("rank %d: created a comm", r);
    if (strstr(j->why[r], "rank 3") == NULL)
      fail_msg("rank %d: '%s' does not name rank 3", r, j->why[r]);
  }
  free(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threshold_is_the_crossover),
      cmocka_unit_test(test_two_level_threshold_is_the_crossover),
      cmocka_unit_test(test_rh_threshold_is_the_crossover),
      cmocka_unit_test(test_ranks_agree_on_a_measured_threshold),
      cmocka_unit_test(test_overrides_skip_the_probe),
      cmocka_unit_test(test_bad_value_refused),
      cmocka_unit_test(test_leaver_fails_creation),
  };
  unsetenv("COLL_ALGO");
  unsetenv("COLL_RING_THRESHOLD");
  unsetenv("COLL_LINK_PROBE");
  setenv("COLL_BACKEND", "cpu", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
