/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_shrink.c: coll_comm_shrink over TCP, with rank processes: after
 * kill -9 of each rank in turn, after an abort, on a healthy comm, with a
 * rank that joins too late, and with a rank that dies during the
 * agreement; then collectives on the new comm against a serial reference.
 * Every survivor must hold the same member list. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcp_test_util.h"
#include "transport/common/shrink_agree.h"

#define WORLD 4
#define ITERS 40
#define JOB_MS 60000

typedef struct scen {
  int victim;  /* kill -9 of itself before iteration `at` (-1: none) */
  int aborter; /* coll_abort of its own comm before iteration `at` */
  int late;    /* sleeps late_ms before it shrinks */
  int64_t late_ms;
  int hook_rank; /* dies in the agreement at (hook_step, hook_peer) */
  int hook_step, hook_peer;
  int at;
  int64_t shrink_ms; /* the shrink's timeout */
} scen_t;

static const scen_t NONE = {-1, -1, -1, 0, -1, 0, 0, 5, 20000};

static int g_hook_step, g_hook_peer;
static void die_hook(int rank, int step, int peer) {
  (void)rank;
  if (step == g_hook_step && peer == g_hook_peer) raise(SIGKILL);
}

/* Trains until the comm fails (or ITERS pass): an allreduce of
 * (rank+1)*(it+1), checked. Returns the iterations that completed, -1 on
 * a wrong sum. */
static int train(coll_comm_t *c, int rank, int world, const scen_t *sc) {
  int it;
  for (it = 0; it < ITERS; it++) {
    int64_t v = (int64_t)(rank + 1) * (it + 1), want;
    coll_abort_handle_t *h;
    if (rank == sc->victim && it == sc->at) raise(SIGKILL);
    if (rank == sc->aborter && it == sc->at &&
        coll_comm_abort_handle(c, &h) == COLL_OK) {
      coll_abort(h);
      coll_abort_handle_release(h);
    }
    if (coll_allreduce(c, &v, &v, 1, COLL_I64, COLL_SUM, NULL) != COLL_OK)
      return it;
    want = (int64_t)world * (world + 1) / 2 * (it + 1);
    if (v != want) return -1;
  }
  return it;
}

/* On the new comm: every member's old rank, gathered, as "0,1,3", and an
 * allreduce checked against the sum over those. */
static int check_new(tt_job_t *job, int rank, coll_comm_t *nc) {
  int n = coll_comm_size(nc), i, off = 0;
  int32_t mine = rank, olds[WORLD];
  int64_t v = rank + 1, want = 0;
  TRY(coll_allgather(nc, &mine, olds, 1, COLL_I32, NULL), "allgather");
  TRY(coll_allreduce(nc, &v, &v, 1, COLL_I64, COLL_SUM, NULL), "allreduce");
  for (i = 0; i < n; i++) {
    want += olds[i] + 1;
    off += snprintf(job->sh->addr[rank] + off, 96 - (size_t)off, "%s%d",
                    i ? "," : "", (int)olds[i]);
    if (i > 0 && olds[i] <= olds[i - 1]) return 20; /* not renumbered */
    if (olds[i] == rank && i != coll_comm_rank(nc)) return 21;
  }
  return v == want ? 0 : 22;
}

static int rank_main(tt_job_t *job, int rank, int world, void *arg) {
  const scen_t *sc = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_transport_t *t;
  coll_comm_t *c, *nc = NULL;
  coll_status_t s;
  int done, rc;
  setenv("COLL_ELASTIC", "1", 1);
  TRY(tt_create(job, rank, world, &t), "create");
  TRY(coll_comm_create(t, NULL, &c), "comm_create");
  done = train(c, rank, world, sc);
  if (done < 0) return 10;
  if (rank == sc->late) tt_sleep_ms(sc->late_ms);
  if (rank == sc->hook_rank) {
    g_hook_step = sc->hook_step;
    g_hook_peer = sc->hook_peer;
    coll__shrink_test_hook = die_hook;
  }
  cfg.timeout_ms = sc->shrink_ms;
  s = coll_comm_shrink(c, &cfg, &nc);
  tt_note(job, rank, s, s == COLL_OK ? "" : coll_last_error());
  rc = s == COLL_OK ? check_new(job, rank, nc) : 0;
  /* The old comm only fails now; destroying it is all that is left. */
  if (s == COLL_OK && coll_barrier(c) == COLL_OK) rc = 23;
  coll_comm_destroy(nc);
  coll_comm_destroy(c);
  return rc;
}

/* Runs a scenario; every rank not in the mask `gone` must exit 0. */
static void run(const scen_t *sc, int world, unsigned gone, tt_job_t *job) {
  pid_t pids[WORLD];
  int codes[WORLD], r;
  char msg[256];
  assert_int_equal(tt_job_init(job, "127.0.0.1", NULL), 0);
  job->timeout_ms = 20000;
  tt_spawn(job, world, rank_main, (void *)sc, pids);
  if (tt_wait(pids, world, JOB_MS, codes, msg, sizeof msg) < 0)
    fail_msg("shrink: %s", msg);
  for (r = 0; r < world; r++)
    if (!(gone & (1u << r)) && codes[r] != 0)
      fail_msg("rank %d exited %d (%s: %s)", r, codes[r],
               coll_status_name((coll_status_t)job->sh->status[r]),
               job->sh->text[r]);
}

/* Every rank in `want` ("0,1,3") got a comm of exactly those ranks. */
static void expect_members(tt_job_t *job, const char *want) {
  char copy[64], *tok, *save = NULL;
  snprintf(copy, sizeof copy, "%s", want);
  for (tok = strtok_r(copy, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    int r = atoi(tok);
    if (job->sh->status[r] != COLL_OK)
      fail_msg("rank %d: shrink returned %s: %s", r,
               coll_status_name((coll_status_t)job->sh->status[r]),
               job->sh->text[r]);
    if (strcmp(job->sh->addr[r], want) != 0)
      fail_msg("rank %d: members '%s', want '%s'", r, job->sh->addr[r], want);
  }
}

static void test_kill9_each_rank(void **state) {
  static const char *want[WORLD] = {"1,2,3", "0,2,3", "0,1,3", "0,1,2"};
  int v;
  (void)state;
  for (v = 0; v < WORLD; v++) {
    tt_job_t job;
    scen_t sc = NONE;
    sc.victim = v;
    sc.at = 3 + v;
    run(&sc, WORLD, 1u << v, &job);
    expect_members(&job, want[v]);
    tt_job_fini(&job);
  }
}

static void test_healthy(void **state) {
  tt_job_t job;
  scen_t sc = NONE;
  (void)state;
  run(&sc, 3, 0, &job);
  expect_members(&job, "0,1,2");
  tt_job_fini(&job);
}

static void test_after_abort(void **state) {
  tt_job_t job;
  scen_t sc = NONE;
  (void)state;
  sc.aborter = 2;
  run(&sc, WORLD, 0, &job);
  expect_members(&job, "0,1,3");
  assert_int_equal(job.sh->status[2], COLL_ERR_ABORTED);
  assert_non_null(strstr(job.sh->text[2], "aborted"));
  tt_job_fini(&job);
}

/* Rank 2 comes after the others stopped waiting for hellos (half the
 * timeout) but before the timeout: it is left out, and told so. */
static void test_late_rank_refused(void **state) {
  tt_job_t job;
  scen_t sc = NONE;
  (void)state;
  sc.late = 2;
  sc.late_ms = 5000;
  sc.shrink_ms = 8000;
  run(&sc, 3, 0, &job);
  expect_members(&job, "0,1");
  assert_int_equal(job.sh->status[2], COLL_ERR_PEER_LOST);
  assert_non_null(strstr(job.sh->text[2], "left rank 2 out"));
  tt_job_fini(&job);
}

/* A rank dies in the agreement before it sends anything: it is lost to
 * all, and the others go on without it. */
static void test_death_before_hello(void **state) {
  tt_job_t job;
  scen_t sc = NONE;
  (void)state;
  sc.victim = 3; /* the first failure */
  sc.hook_rank = 1;
  sc.hook_step = COLL_SHRINK_K_HELLO;
  sc.hook_peer = -1;
  run(&sc, WORLD, 1u << 1 | 1u << 3, &job);
  expect_members(&job, "0,2");
  tt_job_fini(&job);
}

/* The first coordinator dies half-way through its round (its estimate
 * reached rank 1 only), or another rank after its hello: the survivors
 * never disagree. Either every one of them got a comm, of the same
 * members, or none did. */
static void check_same_outcome(tt_job_t *job, int dead) {
  int r, first = -1, oks = 0, n = 0;
  for (r = 0; r < WORLD; r++) {
    if (r == dead) continue;
    n++;
    if (job->sh->status[r] != COLL_OK) continue;
    oks++;
    if (first < 0) {
      first = r;
      continue;
    }
    if (strcmp(job->sh->addr[r], job->sh->addr[first]) != 0)
      fail_msg("rank %d got members '%s' but rank %d '%s'", r, job->sh->addr[r],
               first, job->sh->addr[first]);
  }
  if (oks != 0 && oks != n)
    fail_msg("%d of %d survivors got a comm (rank %d: members '%s')", oks, n,
             first, job->sh->addr[first]);
}

static void test_death_during_rounds(void **state) {
  static const int who[2] = {0, 2};
  static const int step[2] = {COLL_SHRINK_K_EST, COLL_SHRINK_K_HELLO};
  static const int peer[2] = {1, 3};
  static const char *want[2] = {"1,2,3", "0,1,3"};
  int k;
  (void)state;
  for (k = 0; k < 2; k++) {
    tt_job_t job;
    scen_t sc = NONE;
    sc.hook_rank = who[k];
    sc.hook_step = step[k];
    sc.hook_peer = peer[k];
    sc.shrink_ms = 8000;
    run(&sc, WORLD, 1u << who[k], &job);
    check_same_outcome(&job, who[k]);
    /* The dead rank was a member: the survivors' mesh failed, and a
     * second agreement, without it, let them go on. */
    expect_members(&job, want[k]);
    tt_job_fini(&job);
  }
}

/* Without COLL_ELASTIC=1 a TCP comm keeps no control connections: shrink
 * is refused and says what to set; a value other than 0 or 1 is refused
 * when the transport is made. */
static void test_not_elastic(void **state) {
  tt_job_t job;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL, *nc = NULL;
  coll_status_t s;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  unsetenv("COLL_ELASTIC");
  assert_int_equal(tt_create(&job, 0, 1, &t), COLL_OK);
  assert_int_equal(coll_comm_create(t, NULL, &c), COLL_OK);
  s = coll_comm_shrink(c, NULL, &nc);
  assert_int_equal(s, COLL_ERR_NOT_AVAILABLE);
  assert_non_null(strstr(coll_last_error(), "COLL_ELASTIC=1"));
  assert_null(nc);
  coll_comm_destroy(c);
  setenv("COLL_ELASTIC", "2", 1);
  assert_int_equal(tt_create(&job, 0, 1, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "COLL_ELASTIC"));
  unsetenv("COLL_ELASTIC");
  tt_job_fini(&job);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill9_each_rank),
      cmocka_unit_test(test_healthy),
      cmocka_unit_test(test_after_abort),
      cmocka_unit_test(test_late_rank_refused),
      cmocka_unit_test(test_death_before_hello),
      cmocka_unit_test(test_death_during_rounds),
      cmocka_unit_test(test_not_elastic),
  };
  (void)argc;
  (void)argv;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
