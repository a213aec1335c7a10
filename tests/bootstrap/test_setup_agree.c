/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_agree.c: coll_tcp_create is all or nothing, and ranks of
 * incompatible builds fail at once. One link that cannot connect, a rank
 * that claims another version (test hooks, rendezvous.h), and a rank
 * process that exits during setup, before and after its mesh connected:
 * every surviving rank returns the same status and the same text, naming
 * the ranks or links that failed; and rank 0, the store's host, exiting:
 * no rank returns OK. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "test_util.h"

#define WORLD 4
#define COUNT 1000

typedef struct job {
  int port;
  int64_t timeout_ms;
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  int wrong[WORLD];
} job_t;

/* One rank: create, and when that worked, one allreduce checked against
 * the serial sum. Records the status and text for the test thread. */
static void run_rank(job_t *j, int rank) {
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL;
  int32_t x[COUNT];
  int i;
  cfg.rank = rank;
  cfg.world = WORLD;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = j->port;
  cfg.timeout_ms = j->timeout_ms;
  cfg.auth_token = "agree-token";
  j->s[rank] = coll_tcp_create(&cfg, &t);
  if (j->s[rank] == COLL_OK) j->s[rank] = coll_comm_create(t, NULL, &c);
  if (j->s[rank] == COLL_OK) {
    for (i = 0; i < COUNT; i++) x[i] = rank * 7 + i;
    j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_I32, COLL_SUM, NULL);
    for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
      if (x[i] != 7 * (0 + 1 + 2 + 3) + WORLD * i) j->wrong[rank]++;
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static void rank_thread(int rank, int world, void *arg) {
  (void)world;
  run_rank(arg, rank);
}

static void reset_hooks(void) {
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
}

/* Every rank in `ranks` failed with status s and the very same text. */
/* Every rank in ranks: status s and one text (bt_expect_same_failure). */
static void assert_same_failure(const job_t *j, const int *ranks, int n,
                                coll_status_t s) {
  bt_expect_same_failure(j->s, j->why, ranks, n, s);
}

/* Rank 2 publishes a port nobody listens on: only the link 2-3 (rank 3
 * dials rank 2) cannot connect. Before, ranks 0 and 1 returned OK. */
static void test_one_link_down(void **state) {
  static const int all[WORLD] = {0, 1, 2, 3};
  char bogus[64];
  int dead_fd;
  job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  j.port = bt_free_port("127.0.0.1");
  j.timeout_ms = 3000;
  assert_true(j.port > 0);
  /* Held shut for the whole run: a port found free and closed again may be
   * taken by another test's listener meanwhile. */
  snprintf(bogus, sizeof bogus, "127.0.0.1:%d",
           bt_dead_port("127.0.0.1", &dead_fd));
  assert_true(dead_fd >= 0);
  reset_hooks();
  coll__rdv_test_hooks.publish_rank = 2;
  coll__rdv_test_hooks.publish_addr = bogus;
  test_run_ranks(WORLD, rank_thread, &j, 60000, "one link down");
  reset_hooks();
  assert_same_failure(&j, all, WORLD, COLL_ERR_TIMEOUT);
  bt_must_contain(j.why[0], "setup failed on 2 of 4 ranks (ranks 2, 3)");
  /* Each end names the other, and the dialler says why. */
  bt_must_contain(j.why[0], "no connection from rank 3 (rank 3: ");
  bt_must_contain(j.why[0], "no connection to rank 2 (rank 2 at ");
  /* A side with nothing missing is left out, not called "none". */
  bt_must_not_contain(j.why[0], "none");
  bt_must_contain(j.why[0], "onnection refused");
  close(dead_fd);
}

/* Rank 2 claims libcoll 0.2.0 and wire 2: every rank fails at the
 * rendezvous, long before its 120 s timeout (the run is bounded by 30 s:
 * waiting for the timeout would be a HANG). */
static void test_version_mismatch(void **state) {
  static const int all[WORLD] = {0, 1, 2, 3};
  job_t j;
  (void)state;
  memset(&j, 0, sizeof j);
  j.port = bt_free_port("127.0.0.1");
  j.timeout_ms = 120000;
  assert_true(j.port > 0);
  reset_hooks();
  coll__rdv_test_hooks.claim_rank = 2;
  coll__rdv_test_hooks.claim_version = 200;
  coll__rdv_test_hooks.claim_wire = 2;
  test_run_ranks(WORLD, rank_thread, &j, 30000, "version mismatch");
  reset_hooks();
  assert_same_failure(&j, all, WORLD, COLL_ERR_PROTOCOL);
  bt_must_contain(j.why[0], "rank 2 runs libcoll 0.2.0 wire 2");
  bt_must_contain(j.why[0], "ranks 0, 1, 3 run libcoll ");
}

/* ---- a rank process that exits during setup ------------------------------
 */

typedef struct proc_job {
  job_t j;             /* in shared memory: the children write into it */
  int exit_rank;       /* the rank that exits */
  const char *exit_at; /* at this phase */
} proc_job_t;

/* A child's own copy (private memory): which rank it is. */
typedef struct proc_arg {
  proc_job_t *p;
  int rank;
} proc_arg_t;

static const proc_job_t *exit_plan; /* the child's copy of the plan */

static void exit_at_phase(int rank, const char *phase) {
  if (rank == exit_plan->exit_rank && strcmp(phase, exit_plan->exit_at) == 0)
    _exit(3);
}

static int child(void *arg) {
  proc_arg_t *a = arg;
  exit_plan = a->p;
  coll__rdv_test_hooks.phase = exit_at_phase;
  run_rank(&a->p->j, a->rank);
  return a->p->j.s[a->rank] == COLL_OK ? 0 : 1;
}

/* Runs the 4 rank processes with rank `who` exiting at `phase`; the
 * others' results stay in *p (unmapped by the caller). */
static proc_job_t *run_exit(int who, const char *phase) {
  proc_job_t *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  pid_t pids[WORLD];
  proc_arg_t args[WORLD];
  int r, code[WORLD];
  assert_true(p != MAP_FAILED);
  memset(p, 0, sizeof *p);
  p->j.port = bt_free_port("127.0.0.1");
  p->j.timeout_ms = 3000;
  p->exit_rank = who;
  p->exit_at = phase;
  for (r = 0; r < WORLD; r++) {
    args[r] = (proc_arg_t){p, r};
    pids[r] = bt_fork(child, &args[r]);
    assert_true(pids[r] > 0);
  }
  for (r = 0; r < WORLD; r++) code[r] = bt_wait_child(pids[r], 30000);
  for (r = 0; r < WORLD; r++)
    if (code[r] < 0) fail_msg("rank %d did not finish within 30 s", r);
  for (r = 0; r < WORLD; r++)
    if (code[r] != (r == who ? 3 : 1))
      fail_msg("rank %d exited with %d: %s", r, code[r], p->j.why[r]);
  return p;
}

static void exits_at(const char *phase) {
  static const int others[3] = {0, 1, 3};
  proc_job_t *p = run_exit(2, phase);
  assert_same_failure(&p->j, others, 3, COLL_ERR_TIMEOUT);
  bt_must_contain(p->j.why[0],
                  "rank 2: it did not report its setup outcome (it died or "
                  "hangs)");
  munmap(p, sizeof *p);
}

/* Rank 2 exits right after the rendezvous: its listener is gone and it
 * never reports. */
static void test_rank_exits_before_mesh(void **state) {
  (void)state;
  exits_at("joined");
}

/* Rank 2 exits with its mesh connected, before it reports: the others'
 * meshes are fine, and still none of them returns OK. */
static void test_rank_exits_after_mesh(void **state) {
  (void)state;
  exits_at("meshed");
}

/* Rank 0, which serves the store, exits with its mesh connected: nobody
 * is left to agree through, and no other rank returns OK. */
static void test_store_dies_after_mesh(void **state) {
  proc_job_t *p;
  int r;
  (void)state;
  p = run_exit(0, "meshed");
  for (r = 1; r < WORLD; r++) {
    if (p->j.s[r] == COLL_OK) fail_msg("rank %d returned OK", r);
    printf("rank %d: %s\n", r, p->j.why[r]);
    bt_must_contain(p->j.why[r], "lost the rendezvous store on rank 0");
  }
  munmap(p, sizeof *p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_exits_before_mesh),
      cmocka_unit_test(test_rank_exits_after_mesh),
      cmocka_unit_test(test_store_dies_after_mesh),
      cmocka_unit_test(test_one_link_down),
      cmocka_unit_test(test_version_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
