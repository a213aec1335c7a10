/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_allreduce.c: the allreduce designed for shared memory
 * (algo/allreduce_shm.c, COLL_ALGO=shm) between forked rank processes over
 * the shared-memory transport. Every dtype and op at 2, 3 and 4 ranks, at
 * sizes around each boundary of the algorithm (one element, cache lines
 * split over the ranks, the "whole"/"slices" switch, one slot per round,
 * several rounds), in place and out of place, bit-exact against a serial
 * reference that combines the ranks' values in rank order with the scalar
 * kernels. Then its failures: an abort from another thread releases a rank
 * waiting on a peer's flag (and the peer hears who aborted), a rank killed
 * while the others wait on its flags is PEER_LOST naming it, a stopped one
 * is named unresponsive within the heartbeat timeout, a peer that never
 * comes is a TIMEOUT; nothing is left in /dev/shm. */
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
#include "coll.h"
#include "cpu/cpu.h"
#include "reduce/half.h"
#include "reduce/reduce.h"
#include "test_util.h"

#define MAX_RANKS 4
#define CHILD_MS 90000
/* The algorithm's boundaries (allreduce_shm.c, shm_int.h). */
#define WHOLE_MAX (64u * 1024u)
#define SLOT (256u * 1024u)

enum { CASE_NUMERICS, CASE_ABORT, CASE_KILL, CASE_STOP, CASE_TIMEOUT };

typedef struct rank_out {
  int status; /* coll_status_t of the step that failed; -1 a wrong result */
  char msg[400];
  int checked;  /* allreduces checked against the reference */
  int used_shm; /* the comm's transport maps shared memory */
} rank_out_t;

typedef struct job {
  int world, port, rank, kase;
  rank_out_t *out;
  volatile pid_t *victim_pid; /* CASE_STOP: the stopped rank's pid */
} job_t;

/* The rank's first failure (boot_test.h). */
#define fail_out(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

/* ---- values and the serial reference -------------------------------- */

/* ---- the ranks --------------------------------------------------------- */

/* TEST_QUICK=1 (CI's sanitizer stages): sizes of a slot and more run
 * SUM and MIN only; the smaller ones every op. */
static int quick(void) {
  const char *q = getenv("TEST_QUICK");
  return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

static int op_wanted(size_t bytes, coll_op_t op) {
  return !quick() || bytes < SLOT || op == COLL_SUM || op == COLL_MIN;
}

static void numerics(coll_comm_t *c, int rank, int world, rank_out_t *o) {
  static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};
  for (int d = 0; d < COLL_DTYPE_COUNT && !o->status; d++) {
    coll_dtype_t dt = (coll_dtype_t)d;
    size_t es = coll_dtype_size(dt);
    /* Bytes: one element; a few cache lines (some ranks' slices empty);
     * around the whole/slices switch; around one slot; several rounds. */
    const size_t bytes[] = {es,        5 * 64 + es,      WHOLE_MAX - es,
                            WHOLE_MAX, WHOLE_MAX + es,   SLOT - 64,
                            SLOT + es, 2 * SLOT + 3 * es};
    for (size_t b = 0; b < sizeof bytes / sizeof bytes[0] && !o->status; b++)
      for (size_t k = 0; k < sizeof ops / sizeof ops[0] && !o->status; k++) {
        if (!op_wanted(bytes[b], ops[k])) continue;
        size_t n = bytes[b] / es;
        coll_op_t op = ops[k];
        char *mine = malloc(n * es), *got = malloc(n * es);
        char *want = malloc(n * es);
        int in_place = (int)((b + k) & 1);
        coll_status_t s;
        if (mine == NULL || got == NULL || want == NULL ||
            bt_reference(want, dt, op, world, 0, n) != 0) {
          fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
          goto next;
        }
        bt_fill_values(mine, dt, op, rank, n);
        if (in_place) memcpy(got, mine, n * es);
        s = coll_allreduce(c, in_place ? got : mine, got, n, dt, op, NULL);
        if (s != COLL_OK) {
          fail_out(o, s, "%s %s %zu elements: %s", coll_dtype_name(dt),
                   coll_op_name(op), n, coll_last_error());
          goto next;
        }
        if (!in_place) {
          char *again = malloc(n * es);
          if (again != NULL) {
            bt_fill_values(again, dt, op, rank, n);
            if (memcmp(again, mine, n * es) != 0)
              fail_out(o, COLL_OK, "%s %s %zu: the send buffer changed",
                       coll_dtype_name(dt), coll_op_name(op), n);
          }
          free(again);
        }
        for (size_t i = 0; i < n && !o->status; i++)
          if (memcmp(got + i * es, want + i * es, es) != 0)
            fail_out(o, COLL_OK,
                     "%s %s %zu elements (%s): element %zu differs from the "
                     "serial reference in rank order",
                     coll_dtype_name(dt), coll_op_name(op), n,
                     in_place ? "in place" : "out of place", i);
        o->checked++;
      next:
        free(mine);
        free(got);
        free(want);
      }
  }
}

static void *abort_soon(void *p) {
  coll_abort_handle_t *h = p;
  test_sleep_ms(300);
  coll_abort(h);
  return NULL;
}

/* Rank 0 enters an allreduce that rank 1 joins only later, and aborts it
 * from another thread meanwhile: it returns ABORTED; rank 1's allreduce
 * then fails naming rank 0. */
static void abort_case(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  float a[64] = {0};
  coll_status_t s;
  if (j->rank == 0) {
    coll_abort_handle_t *h = NULL;
    pthread_t th;
    if (coll_comm_abort_handle(c, &h) != COLL_OK ||
        pthread_create(&th, NULL, abort_soon, h) != 0) {
      fail_out(o, COLL_ERR_INTERNAL, "setup: %s", coll_last_error());
      return;
    }
    s = coll_allreduce(c, a, a, 64, COLL_F32, COLL_SUM, NULL);
    pthread_join(th, NULL);
    coll_abort_handle_release(h);
    if (s != COLL_ERR_ABORTED)
      fail_out(o, s, "expected ABORTED: %s: %s", coll_status_name(s),
               coll_last_error());
    return;
  }
  test_sleep_ms(1500);
  s = coll_allreduce(c, a, a, 64, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_ERR_ABORTED || strstr(coll_last_error(), "rank 0") == NULL)
    fail_out(o, s, "expected ABORTED naming rank 0: %s: %s",
             coll_status_name(s), coll_last_error());
}

/* The last rank dies (or stops) before its third allreduce, while the
 * others wait on its flags: they fail naming it. */
static void victim_case(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  size_t n = 1 << 18;
  float *a = calloc(n, sizeof *a);
  int victim = j->world - 1;
  const char *how = j->kase == CASE_KILL ? "lost" : "unresponsive";
  char want[48];
  coll_status_t s = COLL_OK;
  if (a == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  for (int it = 0; it < 10 && s == COLL_OK; it++) {
    if (it == 3 && j->rank == victim) {
      if (j->kase == CASE_KILL) raise(SIGKILL);
      *j->victim_pid = getpid();
      raise(SIGSTOP);
      for (;;) pause(); /* killed by rank 0 */
    }
    s = coll_allreduce(c, a, a, n, COLL_F32, COLL_SUM, NULL);
  }
  free(a);
  snprintf(want, sizeof want, "rank %d %s", victim, how);
  if (s != COLL_ERR_PEER_LOST || strstr(coll_last_error(), want) == NULL)
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "expected PEER_LOST naming %s: %s: %s", want, coll_status_name(s),
             coll_last_error());
  if (j->kase == CASE_STOP && j->rank == 0) {
    while (*j->victim_pid == 0) test_sleep_ms(1);
    kill(*j->victim_pid, SIGKILL);
  }
}

/* Rank 1 stays in its own code past rank 0's timeout: rank 0's allreduce
 * is a TIMEOUT. */
static void timeout_case(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  float a[16] = {0};
  coll_status_t s;
  if (j->rank == 1) {
    test_sleep_ms(2500);
    (void)coll_allreduce(c, a, a, 16, COLL_F32, COLL_SUM, NULL);
    return;
  }
  s = coll_allreduce(c, a, a, 16, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_ERR_TIMEOUT)
    fail_out(o, s, "expected TIMEOUT: %s: %s", coll_status_name(s),
             coll_last_error());
}

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TRANSPORT", "shm", 1);
  setenv("COLL_ALGO", "shm", 1);
  setenv("COLL_TIMEOUT_MS", j->kase == CASE_TIMEOUT ? "1000" : "30000", 1);
  /* A short heartbeat timeout for the stopped rank only: elsewhere a
   * heartbeat thread starved on a loaded machine must not fail a case. */
  if (j->kase == CASE_STOP) setenv("COLL_HEARTBEAT_TIMEOUT_MS", "1000", 1);
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "init: %s", coll_last_error());
    return 0;
  }
  o->used_shm = coll__t_rounds(((coll_cpu_t *)c->be)->t) != NULL;
  switch (j->kase) {
    case CASE_NUMERICS: numerics(c, j->rank, j->world, o); break;
    case CASE_ABORT: abort_case(c, j, o); break;
    case CASE_TIMEOUT: timeout_case(c, j, o); break;
    default: victim_case(c, j, o); break;
  }
  coll_comm_destroy(c);
  return 0;
}

/* ---- the test process ---------------------------------------------------- */

typedef struct run {
  rank_out_t *out;
  volatile pid_t *pid;
  int st[MAX_RANKS];
  char *before;
} run_t;

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

static void run_job(int world, int kase, run_t *R) {
  pid_t pids[MAX_RANKS];
  job_t j = {world, bt_free_port("127.0.0.1"), 0, kase, NULL, NULL};
  R->out = mmap(NULL, sizeof *R->out * MAX_RANKS + sizeof(pid_t),
                PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(R->out != MAP_FAILED);
  memset(R->out, 0, sizeof *R->out * MAX_RANKS + sizeof(pid_t));
  R->pid = (volatile pid_t *)(R->out + MAX_RANKS);
  R->before = devshm();
  j.out = R->out;
  j.victim_pid = R->pid;
  for (int r = 0; r < world; r++) {
    j.rank = r;
    pids[r] = bt_fork(rank_main, &j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < world; r++) R->st[r] = bt_wait_child(pids[r], CHILD_MS);
}

/* Ends a run: the ranks but `skip` exited 0 having used shared memory and
 * reported no failure; /dev/shm is as before. */
static void run_end(int world, int skip, run_t *R) {
  char *after = devshm();
  for (int r = 0; r < world; r++) {
    if (r == skip) continue;
    if (R->out[r].status != 0)
      fail_msg("world %d rank %d: %s", world, r, R->out[r].msg);
    assert_int_equal(R->st[r], 0);
    assert_true(R->out[r].used_shm);
  }
  assert_string_equal(R->before, after);
  free(R->before);
  free(after);
  munmap(R->out, sizeof *R->out * MAX_RANKS + sizeof(pid_t));
}

static void numerics_case(int world) {
  run_t R;
  run_job(world, CASE_NUMERICS, &R);
  /* 8 dtypes x 8 sizes x 5 ops (quick: the 2 sizes past a slot with 2
   * ops only): every one checked on every rank. */
  int want = quick() ? 8 * (6 * 5 + 2 * 2) : 8 * 8 * 5;
  for (int r = 0; r < world; r++)
    if (R.out[r].status == 0) assert_int_equal(R.out[r].checked, want);
  run_end(world, -1, &R);
}

static void test_numerics_2(void **state) {
  (void)state;
  numerics_case(2);
}

static void test_numerics_3(void **state) {
  (void)state;
  numerics_case(3);
}

static void test_numerics_4(void **state) {
  (void)state;
  numerics_case(4);
}

static void test_abort_while_waiting_on_flag(void **state) {
  run_t R;
  (void)state;
  run_job(2, CASE_ABORT, &R);
  run_end(2, -1, &R);
}

static void test_killed_rank_named(void **state) {
  run_t R;
  (void)state;
  run_job(3, CASE_KILL, &R);
  assert_int_equal(R.st[2], 128 + SIGKILL);
  run_end(3, 2, &R);
}

static void test_stopped_rank_unresponsive(void **state) {
  run_t R;
  (void)state;
  run_job(3, CASE_STOP, &R);
  assert_int_equal(R.st[2], 128 + SIGKILL);
  run_end(3, 2, &R);
}

static void test_timeout_on_flag(void **state) {
  run_t R;
  (void)state;
  run_job(2, CASE_TIMEOUT, &R);
  /* Rank 1's late allreduce fails (rank 0 gave up): only rank 0's
   * outcome is asserted. */
  R.out[1].status = 0;
  run_end(2, -1, &R);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_numerics_2),
      cmocka_unit_test(test_numerics_3),
      cmocka_unit_test(test_numerics_4),
      cmocka_unit_test(test_abort_while_waiting_on_flag),
      cmocka_unit_test(test_killed_rank_named),
      cmocka_unit_test(test_stopped_rank_unresponsive),
      cmocka_unit_test(test_timeout_on_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
