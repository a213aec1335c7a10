/* SPDX-License-Identifier: Apache-2.0 */
/* test_env_shm.c: coll_comm_init_env between forked rank processes on
 * this host: COLL_TRANSPORT=shm and auto build the shared-memory transport
 * and the collectives match a serial reference at 2, 3 and 4 ranks; a rank
 * killed mid-collective is PEER_LOST naming it on every survivor; shm
 * across "hosts" (a test hook gives one rank another host identity) is
 * refused, auto then takes TCP; a rank's abort is ABORTED naming it on
 * every rank; a bad COLL_TRANSPORT is refused at once;
 * nothing new is left in /dev/shm. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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
#include "bootstrap/rendezvous/host_id.h"
#include "coll.h"
#include "cpu/cpu.h"
#include "test_util.h"

#define MAX_RANKS 4
#define CHILD_MS 60000

typedef struct rank_out {
  int status; /* coll_status_t of the step that failed, 0 when all passed */
  char msg[300];
  char transport[32];
} rank_out_t;

typedef struct job {
  int world, port;
  const char *mode;    /* COLL_TRANSPORT, NULL: unset */
  int other_host_rank; /* this rank claims another host; -1: none */
  int kill_rank;       /* dies by SIGKILL mid-collective; -1: none */
  int abort_rank;      /* aborts its comm mid-collective; -1: none */
  int run_collectives; /* 1: check the collectives */
  rank_out_t *out;     /* shared with the children */
  int rank;
} job_t;

/* The rank's first failure (boot_test.h). */
#define fail_out(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

static int32_t value(int rank, size_t i) {
  return (int32_t)((uint32_t)(rank + 1) * 2654435761u + (uint32_t)i * 40503u);
}

/* allreduce (i32 sum, wrapping: bit-exact), broadcast, allgather over sizes
 * that take one cell, many, and more than a ring; checked against a serial
 * computation of the same. */
static void collectives(coll_comm_t *c, int rank, int world, rank_out_t *o) {
  static const size_t counts[] = {1, 7, 1000, 4099, 65537, 300001};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0] && !o->status; k++) {
    size_t n = counts[k];
    int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t *g = malloc(n * (size_t)world * sizeof *g);
    coll_status_t s;
    if (a == NULL || b == NULL || g == NULL) {
      fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
      goto next;
    }
    for (size_t i = 0; i < n; i++) a[i] = value(rank, i);
    s = coll_allreduce(c, a, b, n, COLL_I32, COLL_SUM, NULL);
    if (s != COLL_OK) {
      fail_out(o, s, "allreduce %zu: %s", n, coll_last_error());
      goto next;
    }
    for (size_t i = 0; i < n; i++) {
      uint32_t want = 0;
      for (int r = 0; r < world; r++) want += (uint32_t)value(r, i);
      if ((uint32_t)b[i] != want) {
        fail_out(o, COLL_OK, "allreduce %zu: element %zu is %d, expected %d", n,
                 i, b[i], (int32_t)want);
        goto next;
      }
    }
    for (size_t i = 0; i < n; i++) b[i] = rank == world - 1 ? value(99, i) : 0;
    s = coll_broadcast(c, b, n, COLL_I32, world - 1, NULL);
    for (size_t i = 0; s == COLL_OK && i < n; i++)
      if (b[i] != value(99, i)) {
        fail_out(o, COLL_OK, "broadcast %zu: element %zu differs", n, i);
        goto next;
      }
    if (s == COLL_OK) s = coll_allgather(c, a, g, n, COLL_I32, NULL);
    if (s != COLL_OK) {
      fail_out(o, s, "broadcast/allgather %zu: %s", n, coll_last_error());
      goto next;
    }
    for (int r = 0; r < world; r++)
      for (size_t i = 0; i < n; i++)
        if (g[(size_t)r * n + i] != value(r, i)) {
          fail_out(o, COLL_OK, "allgather %zu: rank %d element %zu differs", n,
                   r, i);
          goto next;
        }
  next:
    free(a);
    free(b);
    free(g);
  }
}

/* Allreduces until one fails; the killed rank dies during the third. */
static void until_killed(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  size_t n = 1 << 20;
  float *a = calloc(n, sizeof *a);
  coll_status_t s = COLL_OK;
  char want[32];
  if (a == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  for (int it = 0; it < 100000 && s == COLL_OK; it++) {
    if (it == 3 && j->rank == j->kill_rank) raise(SIGKILL);
    s = coll_allreduce(c, a, a, n, COLL_F32, COLL_SUM, NULL);
  }
  free(a);
  snprintf(want, sizeof want, "rank %d", j->kill_rank);
  if (s != COLL_ERR_PEER_LOST || strstr(coll_last_error(), want) == NULL)
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "expected PEER_LOST naming %s: %s: %s", want, coll_status_name(s),
             coll_last_error());
}

static void *abort_soon(void *p) {
  coll_abort_handle_t *h = p;
  test_sleep_ms(200);
  coll_abort(h);
  return NULL;
}

/* Allreduces until one fails; the aborting rank's other thread aborts its
 * comm meanwhile. Every rank must report ABORTED naming that rank. */
static void until_aborted(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  size_t n = 1 << 18;
  float *a = calloc(n, sizeof *a);
  coll_abort_handle_t *h = NULL;
  pthread_t th;
  int started = 0;
  coll_status_t s = COLL_OK;
  char want[32];
  if (a == NULL || coll_comm_abort_handle(c, &h) != COLL_OK) {
    fail_out(o, COLL_ERR_NO_MEMORY, "setup: %s", coll_last_error());
    free(a);
    return;
  }
  if (j->rank == j->abort_rank)
    started = pthread_create(&th, NULL, abort_soon, h) == 0;
  for (int it = 0; it < 1000000 && s == COLL_OK; it++)
    s = coll_allreduce(c, a, a, n, COLL_F32, COLL_SUM, NULL);
  if (started) pthread_join(th, NULL);
  coll_abort_handle_release(h);
  free(a);
  snprintf(want, sizeof want, "rank %d aborted", j->abort_rank);
  if (s != COLL_ERR_ABORTED ||
      (j->rank != j->abort_rank && strstr(coll_last_error(), want) == NULL))
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "expected ABORTED naming %s: %s: %s", want, coll_status_name(s),
             coll_last_error());
}

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  if (j->mode != NULL)
    setenv("COLL_TRANSPORT", j->mode, 1);
  else
    unsetenv("COLL_TRANSPORT");
  if (j->rank == j->other_host_rank)
    coll__host_id_test_hook =
        (coll_host_id_test_hook_t){j->rank, "elsewhere/net:1/ipc:1", NULL, 0};
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "%s", coll_last_error());
    return 0;
  }
  snprintf(o->transport, sizeof o->transport, "%s",
           coll__t_name(((coll_cpu_t *)c->be)->t));
  if (j->run_collectives) collectives(c, j->rank, j->world, o);
  if (j->kill_rank >= 0) until_killed(c, j, o);
  if (j->abort_rank >= 0) until_aborted(c, j, o);
  coll_comm_destroy(c);
  return 0;
}

/* Runs a job's ranks; their records land in out[]; exit statuses in st[]. */
static void run_job(job_t *j, rank_out_t *out, int *st) {
  pid_t pids[MAX_RANKS];
  j->port = bt_free_port("127.0.0.1");
  j->out = out;
  memset(out, 0, sizeof *out * MAX_RANKS);
  for (int r = 0; r < j->world; r++) {
    j->rank = r;
    pids[r] = bt_fork(rank_main, j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < j->world; r++) st[r] = bt_wait_child(pids[r], CHILD_MS);
}

static rank_out_t *shared_out(void) {
  rank_out_t *o = mmap(NULL, sizeof *o * MAX_RANKS, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(o != MAP_FAILED);
  return o;
}

/* Nothing new in /dev/shm but Open MPI's own segments (tests beside). */
static char *devshm(void) {
  char cmd[] =
      "ls /dev/shm 2>/dev/null | grep -v -e vader -e sm_segment "
      "-e ompi -e pmix";
  FILE *f = popen(cmd, "r");
  char *buf = calloc(1, 65536);
  size_t n = 0;
  assert_non_null(buf);
  if (f != NULL) {
    n = fread(buf, 1, 65535, f);
    pclose(f);
  }
  buf[n] = '\0';
  return buf;
}

static void expect_all_ok(const job_t *j, const rank_out_t *out, const int *st,
                          const char *transport) {
  for (int r = 0; r < j->world; r++) {
    if (out[r].status != 0)
      fail_msg("world %d rank %d: %s", j->world, r, out[r].msg);
    assert_int_equal(st[r], 0);
    assert_string_equal(out[r].transport, transport);
  }
}

static void collectives_case(int world, const char *mode) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {world, 0, mode, -1, -1, -1, 1, NULL, 0};
  char *before = devshm(), *after;
  run_job(&j, out, st);
  after = devshm();
  expect_all_ok(&j, out, st, "shm");
  assert_string_equal(before, after);
  free(before);
  free(after);
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_shm_2(void **state) {
  (void)state;
  collectives_case(2, "shm");
}

static void test_shm_3(void **state) {
  (void)state;
  collectives_case(3, "shm");
}

static void test_shm_4(void **state) {
  (void)state;
  collectives_case(4, "shm");
}

static void test_auto_3(void **state) {
  (void)state;
  collectives_case(3, "auto");
}

/* Unset is auto: ranks on one host get shared memory (README, "One host:
 * shared memory"); tcp still takes TCP. */
static void test_unset_is_shm(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {2, 0, NULL, -1, -1, -1, 1, NULL, 0};
  (void)state;
  run_job(&j, out, st);
  expect_all_ok(&j, out, st, "shm");
  j.mode = "tcp";
  run_job(&j, out, st);
  expect_all_ok(&j, out, st, "tcp");
  /* Unset with COLL_ELASTIC=1 is TCP: only TCP comms can shrink. */
  j.mode = NULL;
  setenv("COLL_ELASTIC", "1", 1);
  run_job(&j, out, st);
  unsetenv("COLL_ELASTIC");
  expect_all_ok(&j, out, st, "tcp");
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_killed_mid_collective(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {3, 0, "shm", -1, 2, -1, 0, NULL, 0};
  char *before = devshm(), *after;
  (void)state;
  run_job(&j, out, st);
  after = devshm();
  for (int r = 0; r < 2; r++) {
    if (out[r].status != 0) fail_msg("rank %d: %s", r, out[r].msg);
    assert_int_equal(st[r], 0);
  }
  assert_int_equal(st[2], 128 + SIGKILL);
  assert_string_equal(before, after);
  free(before);
  free(after);
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_aborted_mid_collective(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {3, 0, "shm", -1, -1, 1, 0, NULL, 0};
  (void)state;
  run_job(&j, out, st);
  for (int r = 0; r < 3; r++) {
    if (out[r].status != 0) fail_msg("rank %d: %s", r, out[r].msg);
    assert_int_equal(st[r], 0);
  }
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_shm_across_hosts_refused(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {2, 0, "shm", 1, -1, -1, 0, NULL, 0};
  (void)state;
  run_job(&j, out, st);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(st[r], 0);
    assert_int_equal(out[r].status, COLL_ERR_INVALID_ARG);
    if (strstr(out[r].msg, "rank 1 on host elsewhere") == NULL ||
        strstr(out[r].msg, "COLL_TRANSPORT=shm") == NULL)
      fail_msg("rank %d: %s", r, out[r].msg);
  }
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_auto_across_hosts_tcp(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {2, 0, "auto", 1, -1, -1, 1, NULL, 0};
  (void)state;
  run_job(&j, out, st);
  expect_all_ok(&j, out, st, "tcp");
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_ranks_disagree(void **state) {
  rank_out_t *out = shared_out();
  int st[MAX_RANKS];
  job_t j = {2, 0, "tcp", -1, -1, -1, 0, NULL, 0};
  pid_t pids[2];
  (void)state;
  /* Rank 1 asks for shm, rank 0 for tcp. */
  j.port = bt_free_port("127.0.0.1");
  j.out = out;
  memset(out, 0, sizeof *out * MAX_RANKS);
  j.rank = 0;
  pids[0] = bt_fork(rank_main, &j);
  j.rank = 1;
  j.mode = "shm";
  pids[1] = bt_fork(rank_main, &j);
  for (int r = 0; r < 2; r++) st[r] = bt_wait_child(pids[r], CHILD_MS);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(st[r], 0);
    assert_int_equal(out[r].status, COLL_ERR_INVALID_ARG);
    if (strstr(out[r].msg, "disagree on COLL_TRANSPORT") == NULL)
      fail_msg("rank %d: %s", r, out[r].msg);
  }
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_bad_value(void **state) {
  coll_comm_t *c = NULL;
  (void)state;
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "1", 1); /* never reached */
  setenv("COLL_BACKEND", "cpu", 1);
  setenv("COLL_TRANSPORT", "udp", 1);
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_INVALID_ARG);
  assert_null(c);
  assert_non_null(strstr(coll_last_error(), "COLL_TRANSPORT='udp'"));
  unsetenv("COLL_TRANSPORT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_2),
      cmocka_unit_test(test_shm_3),
      cmocka_unit_test(test_shm_4),
      cmocka_unit_test(test_auto_3),
      cmocka_unit_test(test_unset_is_shm),
      cmocka_unit_test(test_killed_mid_collective),
      cmocka_unit_test(test_aborted_mid_collective),
      cmocka_unit_test(test_shm_across_hosts_refused),
      cmocka_unit_test(test_auto_across_hosts_tcp),
      cmocka_unit_test(test_ranks_disagree),
      cmocka_unit_test(test_bad_value),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
