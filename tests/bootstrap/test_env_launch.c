/* SPDX-License-Identifier: Apache-2.0 */
/* test_env_launch.c: rank, world size and local rank from the launchers'
 * variables (torchrun, Open MPI's mpirun, PMI, Slurm's srun): each alone,
 * their precedence, half-set pairs, malformed values, the local counts
 * (Slurm's tasks-per-node list included), and coll_comm_init_env jobs of
 * two processes launched with each launcher's variables, their allreduce
 * checked against the serial sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "core/error.h"
#include "core/launch.h"
#include "test_util.h"

#define WORLD_MAX (1 << 20)

static const char *const all_vars[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "COLL_SOCKET_IFNAME",
    "COLL_AUTH_TOKEN",
    "COLL_BACKEND",
};

static void clear_env(void) {
  size_t i;
  for (i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
    unsetenv(all_vars[i]);
}

static int setup(void **state) {
  (void)state;
  clear_env();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  clear_env();
  return 0;
}

/* The four sources' rank and world variables, in precedence order. */
static const struct {
  const char *rank, *world, *source;
} pairs[] = {
    {"RANK", "WORLD_SIZE", "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"},
    {"PMI_RANK", "PMI_SIZE", "a PMI launcher"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm's srun"},
};
#define NPAIRS (int)(sizeof pairs / sizeof pairs[0])

static void expect_read(int rank, int world, const char *source) {
  coll_launch_t l;
  coll_status_t s = coll__launch_read(WORLD_MAX, &l);
  if (s != COLL_OK) fail_msg("launch_read: %s", coll_last_error());
  assert_int_equal(l.rank, rank);
  assert_int_equal(l.world, world);
  assert_string_equal(l.source, source);
}

static void expect_refused(const char *text) {
  coll_launch_t l;
  coll_status_t s = coll__launch_read(WORLD_MAX, &l);
  if (s != COLL_ERR_INVALID_ARG || strstr(coll_last_error(), text) == NULL)
    fail_msg("want INVALID_ARG with '%s', got %s: %s", text,
             coll_status_name(s), coll_last_error());
}

static void test_none_set(void **state) {
  (void)state;
  expect_refused(
      "no rank in the environment: RANK and WORLD_SIZE are not set "
      "(torchrun), nor OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open "
      "MPI's mpirun), PMI_RANK and PMI_SIZE (a PMI launcher: MPICH, Intel "
      "MPI), SLURM_PROCID and SLURM_NTASKS (Slurm's srun)");
  /* Empty counts as unset, as for every variable libcoll reads. */
  setenv("RANK", "", 1);
  setenv("PMI_SIZE", "", 1);
  expect_refused("no rank in the environment");
}

static void test_each_source_alone(void **state) {
  coll_launch_t l;
  int i;
  (void)state;
  for (i = 0; i < NPAIRS; i++) {
    clear_env();
    setenv(pairs[i].rank, "2", 1);
    setenv(pairs[i].world, "5", 1);
    expect_read(2, 5, pairs[i].source);
    assert_int_equal(coll__launch_read(WORLD_MAX, &l), COLL_OK);
    assert_string_equal(l.rank_var, pairs[i].rank);
    assert_string_equal(l.world_var, pairs[i].world);
  }
}

/* Every source set, each saying something else: the first in the order
 * torchrun, mpirun, PMI, srun wins, and the others do not matter (torchrun
 * under srun, mpirun inside an sbatch job). */
static void test_precedence(void **state) {
  char v[8];
  int i;
  (void)state;
  for (i = 0; i < NPAIRS; i++) {
    snprintf(v, sizeof v, "%d", i);
    setenv(pairs[i].rank, v, 1);
    snprintf(v, sizeof v, "%d", 10 + i);
    setenv(pairs[i].world, v, 1);
  }
  for (i = 0; i < NPAIRS; i++) {
    expect_read(i, 10 + i, pairs[i].source);
    unsetenv(pairs[i].rank);
    unsetenv(pairs[i].world);
  }
  /* A later source's garbage is never read. */
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("SLURM_PROCID", "zero", 1);
  expect_read(1, 2, "Open MPI's mpirun");
}

/* Half of a pair is an error naming both, also when a later source is
 * complete: the half-set one is the one that was meant. */
static void test_half_set(void **state) {
  char want[160];
  int i;
  (void)state;
  for (i = 0; i < NPAIRS; i++) {
    clear_env();
    if (i < NPAIRS - 1) { /* a complete later source changes nothing */
      setenv(pairs[NPAIRS - 1].rank, "0", 1);
      setenv(pairs[NPAIRS - 1].world, "1", 1);
    }
    setenv(pairs[i].rank, "1", 1);
    snprintf(want, sizeof want, "%s is not set but %s=1 is (%s sets both)",
             pairs[i].world, pairs[i].rank, pairs[i].source);
    expect_refused(want);
    unsetenv(pairs[i].rank);
    setenv(pairs[i].world, "4", 1);
    snprintf(want, sizeof want, "%s is not set but %s=4 is (%s sets both)",
             pairs[i].rank, pairs[i].world, pairs[i].source);
    expect_refused(want);
  }
}

static void test_malformed(void **state) {
  (void)state;
  setenv("PMI_RANK", "x", 1);
  setenv("PMI_SIZE", "4", 1);
  expect_refused("PMI_RANK='x' is not a number");
  setenv("PMI_RANK", "1 ", 1);
  expect_refused("PMI_RANK='1 ' is not a number");
  setenv("PMI_RANK", "4", 1);
  expect_refused("PMI_RANK=4 is out of range (0..3 for PMI_SIZE=4)");
  setenv("PMI_RANK", "-1", 1);
  expect_refused("PMI_RANK=-1 is out of range");
  clear_env();
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "0", 1);
  expect_refused("SLURM_NTASKS=0 is out of range (1..1048576)");
  setenv("SLURM_NTASKS", "99999999999999999999", 1);
  expect_refused("SLURM_NTASKS=99999999999999999999 is out of range");
  setenv("SLURM_NTASKS", "2M", 1);
  expect_refused("SLURM_NTASKS='2M' is not a number");
  clear_env();
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  expect_refused(
      "OMPI_COMM_WORLD_RANK=3 is out of range (0..2 for "
      "OMPI_COMM_WORLD_SIZE=3)");
}

static int local_rank(const char **var) {
  int64_t v = -1;
  return coll__launch_local_rank(&v, var) == 1 ? (int)v : -1;
}

static int local_world(const char **var) {
  int64_t v = -1;
  return coll__launch_local_world(&v, var) == 1 ? (int)v : -1;
}

/* LOCAL_RANK / LOCAL_WORLD_SIZE when set; else the chosen launcher's own
 * (mpirun's, srun's), never another launcher's; malformed values are
 * unknown. */
static void test_local(void **state) {
  const char *var = NULL;
  (void)state;
  assert_int_equal(local_rank(NULL), -1);
  assert_int_equal(local_world(NULL), -1);
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  setenv("SLURM_LOCALID", "0", 1); /* the sbatch step's, not ours */
  assert_int_equal(local_rank(&var), 1);
  assert_string_equal(var, "OMPI_COMM_WORLD_LOCAL_RANK");
  assert_int_equal(local_world(&var), 4);
  assert_string_equal(var, "OMPI_COMM_WORLD_LOCAL_SIZE");
  setenv("LOCAL_RANK", "3", 1);
  setenv("LOCAL_WORLD_SIZE", "6", 1);
  assert_int_equal(local_rank(&var), 3);
  assert_string_equal(var, "LOCAL_RANK");
  assert_int_equal(local_world(&var), 6);
  assert_string_equal(var, "LOCAL_WORLD_SIZE");
  setenv("LOCAL_RANK", "three", 1); /* warned about, then unknown */
  assert_int_equal(local_rank(NULL), -1);
  setenv("LOCAL_RANK", "-2", 1);
  assert_int_equal(local_rank(NULL), -1);
  clear_env();
  /* PMI has no local variables: srun's are not borrowed. */
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "2", 1);
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NODEID", "0", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "2", 1);
  assert_int_equal(local_rank(NULL), -1);
  assert_int_equal(local_world(NULL), -1);
  unsetenv("PMI_RANK");
  unsetenv("PMI_SIZE");
  assert_int_equal(local_rank(&var), 1);
  assert_string_equal(var, "SLURM_LOCALID");
  assert_int_equal(local_world(&var), 2);
  assert_string_equal(var, "SLURM_STEP_TASKS_PER_NODE");
  /* Node 3 of "2(x3),1" runs one task; there is no node 4. */
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3),1", 1);
  setenv("SLURM_NODEID", "3", 1);
  assert_int_equal(local_world(NULL), 1);
  setenv("SLURM_NODEID", "4", 1);
  assert_int_equal(local_world(NULL), -1);
  unsetenv("SLURM_NODEID");
  assert_int_equal(local_world(NULL), -1);
}

static int64_t tasks(const char *list, int64_t node) {
  int64_t v = -1;
  return coll__slurm_tasks_on_node(list, node, &v) ? v : -1;
}

/* Slurm's compressed tasks-per-node list, against counts written out. */
static void test_slurm_tasks_per_node(void **state) {
  static const int64_t expanded[] = {2, 2, 2, 1, 4, 4, 3};
  int64_t n;
  (void)state;
  for (n = 0; n < 7; n++)
    assert_int_equal(tasks("2(x3),1,4(x2),3", n), expanded[n]);
  assert_int_equal(tasks("2(x3),1,4(x2),3", 7), -1);
  assert_int_equal(tasks("8", 0), 8);
  assert_int_equal(tasks("8", 1), -1);
  assert_int_equal(tasks("1,2,3", 2), 3);
  assert_int_equal(tasks("8", -1), -1);
  assert_int_equal(tasks("", 0), -1);
  assert_int_equal(tasks("x", 0), -1);
  assert_int_equal(tasks("2(x0)", 0), -1);
  assert_int_equal(tasks("2(3)", 0), -1);
  assert_int_equal(tasks("2(x3", 0), -1);
  assert_int_equal(tasks("2(x3)1", 3), -1);
  assert_int_equal(tasks("2,", 1), -1);
  assert_int_equal(tasks("-2", 0), -1);
  assert_int_equal(tasks(NULL, 0), -1);
}

/* Through coll_comm_init_env: the launchers are named when nothing is
 * set, and MASTER_ADDR / MASTER_PORT stay required under every launcher. */
static void test_init_env_messages(void **state) {
  coll_comm_t *c = (coll_comm_t *)(uintptr_t)1;
  (void)state;
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_INVALID_ARG);
  assert_null(c);
  assert_non_null(
      strstr(coll_last_error(), "comm_init_env: no rank in the environment"));
  assert_non_null(strstr(coll_last_error(), "SLURM_PROCID"));
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(),
                         "MASTER_ADDR is not set (the host of rank 0, as "
                         "torchrun sets it; under mpirun or srun export it"));
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "MASTER_PORT is not set"));
  setenv("MASTER_PORT", "123456789012345678901234", 1);
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(),
                         "MASTER_PORT=123456789012345678901234 is out of "
                         "range (1..65535)"));
}

/* ---- jobs of two processes, one per rank ---- */

#define COUNT 1001

typedef struct child_arg {
  int launcher; /* index into pairs[] */
  int rank;
  const char *port;
  int fd; /* pipe to the parent */
} child_arg_t;

typedef struct child_result {
  coll_status_t s;
  int rank, world, wrong;
  char msg[COLL_ERRMSG_MAX];
} child_result_t;

static int child_main(void *p) {
  child_arg_t *a = p;
  child_result_t r;
  coll_comm_t *c = NULL;
  double x[COUNT];
  char v[16];
  int i;
  clear_env();
  snprintf(v, sizeof v, "%d", a->rank);
  setenv(pairs[a->launcher].rank, v, 1);
  setenv(pairs[a->launcher].world, "2", 1);
  /* mpirun inside an sbatch job: the batch step's Slurm variables are
   * there too, and disagree. */
  if (a->launcher == 1) {
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "1", 1);
  }
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", a->port, 1);
  setenv("COLL_TIMEOUT_MS", "20000", 1);
  setenv("COLL_BACKEND", "cpu", 1);
  memset(&r, 0, sizeof r);
  r.s = coll_comm_init_env(NULL, &c);
  if (r.s == COLL_OK) {
    r.rank = coll_comm_rank(c);
    r.world = coll_comm_size(c);
    for (i = 0; i < COUNT; i++) x[i] = a->rank * 1000.0 + i;
    r.s = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
    for (i = 0; r.s == COLL_OK && i < COUNT; i++)
      r.wrong += x[i] != 1000.0 + 2.0 * i;
  }
  snprintf(r.msg, sizeof r.msg, "%s", coll_last_error());
  coll_comm_destroy(c);
  if (write(a->fd, &r, sizeof r) != (ssize_t)sizeof r) return 3;
  return 0;
}

static void run_job(int launcher) {
  char port[16];
  child_arg_t args[2];
  child_result_t res[2];
  pid_t pids[2];
  int fds[2][2], i;
  snprintf(port, sizeof port, "%d", bt_free_port("127.0.0.1"));
  for (i = 0; i < 2; i++) {
    assert_int_equal(pipe(fds[i]), 0);
    args[i] = (child_arg_t){launcher, i, port, fds[i][1]};
    pids[i] = bt_fork(child_main, &args[i]);
    assert_true(pids[i] > 0);
    close(fds[i][1]);
  }
  for (i = 0; i < 2; i++) {
    assert_int_equal(bt_wait_child(pids[i], 40000), 0);
    assert_int_equal(read(fds[i][0], &res[i], sizeof res[i]),
                     (ssize_t)sizeof res[i]);
    close(fds[i][0]);
    if (res[i].s != COLL_OK)
      fail_msg("%s, rank %d: %s", pairs[launcher].source, i, res[i].msg);
    assert_int_equal(res[i].rank, i);
    assert_int_equal(res[i].world, 2);
    assert_int_equal(res[i].wrong, 0);
  }
}

static void test_job_ompi(void **state) {
  (void)state;
  run_job(1);
}

static void test_job_pmi(void **state) {
  (void)state;
  run_job(2);
}

static void test_job_slurm(void **state) {
  (void)state;
  run_job(3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_none_set, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_source_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_set, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_local, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slurm_tasks_per_node, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_init_env_messages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_job_ompi, setup, teardown),
      cmocka_unit_test_setup_teardown(test_job_pmi, setup, teardown),
      cmocka_unit_test_setup_teardown(test_job_slurm, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
