/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_single_copy.c: single copies between forked rank processes over
 * the shared-memory transport (transport/shm/shm_cma.c, algo/shm_direct.h):
 * a rank reads its peers' buffers with cross-memory attach instead of
 * through the shared slots. With the threshold forced down to one byte,
 * allreduce (every dtype and op, in place and out of place), broadcast
 * (every root), allgather and reduce-scatter (every dtype and op) at 2, 3
 * and 4 ranks, bit-exact against the serial reference in rank order that
 * the slots also meet, with single copies counted; the same with the
 * probe forced to fail on every rank, and on one rank only: no single copy
 * anywhere, the same results, and the fallback said at INFO. Then a rank
 * killed (kill -9) while a peer copies from its memory is PEER_LOST
 * naming it, on every other rank. COLL_SHM_SINGLE_COPY: ranks that set
 * it differently use the largest, a rank that sets 0 turns it off for
 * all, and a value that is no number of bytes is refused. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "coll.h"
#include "cpu/choose.h"
#include "rank_checks.h"
#include "rank_job.h"
#include "test_util.h"
#include "transport/shm/shm.h"

#define CHILD_MS 120000

enum {
  CASE_ON,
  CASE_OFF,
  CASE_ONE_REFUSES,
  CASE_KILL,
  CASE_KNOBS,    /* COLL_SHM_SINGLE_COPY differs: the largest holds */
  CASE_KNOB_OFF, /* one rank sets 0: off everywhere */
  CASE_KNOB_BAD  /* not a number: refused at creation */
};

/* A rank's record: the common part first (rank_job.h), then what the
 * single copies did. */
typedef struct rank_out {
  bt_rank_out_t r;
  long copies;       /* single copies this rank made */
  size_t copy_from;  /* the endpoint's single-copy threshold */
  int said_fallback; /* the INFO log says there is no single copy */
  pid_t pid;
} rank_out_t;

static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                COLL_AVG};
#define NOPS (sizeof ops / sizeof ops[0])

/* ---- counting single copies, and the kill in the middle of one ---------- */

static long copies;
static const bt_job_t *kill_job; /* CASE_KILL on rank 0 */
static int kill_armed;

/* Waits until pid is gone or a zombie: its memory can no longer be read. */
static void wait_dead(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (int i = 0; i < 20000; i++) {
    char buf[256] = {0}, *p;
    FILE *f = fopen(path, "r");
    size_t n;
    if (f == NULL) return;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))) return;
    test_sleep_ms(1);
  }
}

static void on_copy(int peer, size_t len) {
  (void)len;
  copies++;
  if (kill_job != NULL && kill_armed && peer == kill_job->world - 1) {
    pid_t victim = ((const rank_out_t *)kill_job->out)[peer].pid;
    kill_armed = 0;
    kill(victim, SIGKILL);
    wait_dead(victim);
  }
}

/* ---- the collectives --------------------------------------------------- */

/* The largest sizes check the chunking, not the kernels (the smaller ones
 * run every op in the same mode): SUM and MIN there, SUM alone under
 * TEST_QUICK. */
static int big_skip(int big, coll_op_t op) {
  return big && op != COLL_SUM && (bt_quick() || op != COLL_MIN);
}

/* Allreduce bytes: one element; a few cache lines (some ranks' slices
 * empty); past the in-process chunk; a slice of several single-copy
 * chunks at every world. */
static size_t ar_sizes(size_t es, size_t *out) {
  size_t k = 0;
  out[k++] = es;
  out[k++] = 5 * 64 + es;
  out[k++] = 64 * 1024 + es;
  out[k++] = (2u << 20) + 3 * es;
  return k;
}

static void allreduces(coll_comm_t *c, int rank, int world, bt_rank_out_t *o) {
  for (int d = 0; d < COLL_DTYPE_COUNT && !o->status; d++) {
    coll_dtype_t dt = (coll_dtype_t)d;
    size_t es = coll_dtype_size(dt), sz[4], k = ar_sizes(es, sz);
    for (size_t b = 0; b < k && !o->status; b++)
      for (size_t q = 0; q < NOPS && !o->status; q++) {
        size_t n = sz[b] / es, at;
        coll_op_t op = ops[q];
        int in_place = (int)((b + q) & 1);
        char *mine, *got, *want;
        coll_status_t s;
        if (big_skip(b == k - 1, op)) continue;
        mine = malloc(n * es);
        got = malloc(n * es);
        want = malloc(n * es);
        if (mine == NULL || got == NULL || want == NULL ||
            bt_reference(want, dt, op, world, 0, n) != 0) {
          bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
          goto next;
        }
        bt_fill_values(mine, dt, op, rank, n);
        if (in_place) memcpy(got, mine, n * es);
        s = coll_allreduce(c, in_place ? got : mine, got, n, dt, op, NULL);
        if (s != COLL_OK)
          bt_out_fail(o, s, "allreduce %s %s %zu: %s", coll_dtype_name(dt),
                      coll_op_name(op), n, coll_last_error());
        else if (!bt_same(got, want, n * es, &at))
          bt_out_fail(o, COLL_OK,
                      "allreduce %s %s %zu (%s): element %zu differs from the "
                      "serial reference in rank order",
                      coll_dtype_name(dt), coll_op_name(op), n,
                      in_place ? "in place" : "out of place", at / es);
        o->checked++;
      next:
        free(mine);
        free(got);
        free(want);
      }
  }
}

static const size_t other_sizes[] = {8, 72, 300 * 1024 + 8};
#define NOTHER (sizeof other_sizes / sizeof other_sizes[0])

static void reduce_scatters(coll_comm_t *c, int rank, int world,
                            bt_rank_out_t *o) {
  for (int d = 0; d < COLL_DTYPE_COUNT && !o->status; d++) {
    coll_dtype_t dt = (coll_dtype_t)d;
    size_t es = coll_dtype_size(dt);
    for (size_t b = 0; b < NOTHER && !o->status; b++)
      for (size_t q = 0; q < NOPS && !o->status; q++) {
        if (big_skip(b == NOTHER - 1, ops[q])) continue;
        bt_check_reduce_scatter(
            c, rank, world, dt, ops[q],
            other_sizes[b] / es > 0 ? other_sizes[b] / es : 1, o);
      }
  }
}

/* The number of collectives results() checks on each rank. */
static int results_count(int world) {
  int big = bt_quick() ? 1 : 2;
  int ar = COLL_DTYPE_COUNT * (3 * (int)NOPS + big);
  int rs = COLL_DTYPE_COUNT * (((int)NOTHER - 1) * (int)NOPS + big);
  return ar + (int)NOTHER * world + (int)NOTHER + rs;
}

static void results(coll_comm_t *c, int rank, int world, bt_rank_out_t *o) {
  allreduces(c, rank, world, o);
  bt_check_broadcasts(c, rank, world, other_sizes, NOTHER, o);
  bt_check_allgathers(c, rank, world, other_sizes, NOTHER, o);
  reduce_scatters(c, rank, world, o);
}

/* Rank 0 kills the last rank in the middle of its fourth allreduce, just
 * before it copies from the victim's memory: every survivor fails naming
 * it. */
static void kill_case(coll_comm_t *c, const bt_job_t *j, bt_rank_out_t *o) {
  size_t n = 1 << 18;
  float *a = calloc(n, sizeof *a);
  int victim = j->world - 1;
  char want[48];
  coll_status_t s = COLL_OK;
  if (a == NULL) {
    bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  if (j->rank == 0) kill_job = j;
  for (int it = 0; it < 10 && s == COLL_OK; it++) {
    if (it == 3 && j->rank == 0) kill_armed = 1;
    s = coll_allreduce(c, a, a, n, COLL_F32, COLL_SUM, NULL);
  }
  free(a);
  snprintf(want, sizeof want, "rank %d lost", victim);
  if (s != COLL_ERR_PEER_LOST || strstr(coll_last_error(), want) == NULL)
    bt_out_fail(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
                "expected PEER_LOST naming %s: %s: %s", want,
                coll_status_name(s), coll_last_error());
}

/* One allreduce at the agreed threshold, and one just below it. */
static void knob_case(coll_comm_t *c, const bt_job_t *j, bt_rank_out_t *o) {
  size_t n = (1u << 20) / sizeof(float);
  float *a = calloc(n, sizeof *a);
  coll_status_t s = COLL_OK;
  if (a == NULL) {
    bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++) a[i] = (float)(j->rank + 1);
  s = coll_allreduce(c, a, a, n, COLL_F32, COLL_SUM, NULL);
  if (s == COLL_OK)
    s = coll_allreduce(c, a, a, n - 16, COLL_F32, COLL_MAX, NULL);
  if (s != COLL_OK)
    bt_out_fail(o, s, "allreduce: %s", coll_last_error());
  else if (a[0] != 6.0f || a[n - 1] != 6.0f)
    bt_out_fail(o, COLL_OK, "allreduce: %g and %g where 6 is due", (double)a[0],
                (double)a[n - 1]);
  free(a);
}

/* 1 if the log this rank wrote so far (stderr, a temporary file) holds
 * `part`. */
static int log_says(FILE *log, const char *part) {
  char line[1024];
  int found = 0;
  fflush(stderr);
  rewind(log);
  while (!found && fgets(line, sizeof line, log) != NULL)
    found = strstr(line, part) != NULL;
  fseek(log, 0, SEEK_END);
  return found;
}

static int rank_main(void *p) {
  bt_job_t *j = p;
  rank_out_t *o = (rank_out_t *)bt_job_out(j, j->rank);
  coll_comm_t *c = NULL;
  coll_status_t s;
  FILE *log = tmpfile();
  o->pid = getpid();
  if (log == NULL || dup2(fileno(log), 2) < 0) {
    bt_out_fail(&o->r, COLL_ERR_SYSTEM, "no log file: %s", strerror(errno));
    return 0;
  }
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TRANSPORT", "shm", 1);
  unsetenv("COLL_ALGO");
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  unsetenv("COLL_SHM_SINGLE_COPY");
  if (j->kase < CASE_KNOBS) coll__shm_copy_from_test = 1;
  if (j->kase == CASE_KNOBS)
    setenv("COLL_SHM_SINGLE_COPY",
           j->rank == 0   ? "4096"
           : j->rank == 1 ? "65536"
                          : "1048576",
           1);
  if (j->kase == CASE_KNOB_OFF)
    setenv("COLL_SHM_SINGLE_COPY", j->rank == 2 ? "0" : "1048576", 1);
  if (j->kase == CASE_KNOB_BAD) setenv("COLL_SHM_SINGLE_COPY", "1M", 1);
  coll__shm_cma_refuse =
      j->kase == CASE_OFF || (j->kase == CASE_ONE_REFUSES && j->rank == 1);
  coll__shm_peer_read_hook = on_copy;
  s = coll_comm_init_env(NULL, &c);
  if (j->kase == CASE_KNOB_BAD) {
    if (s != COLL_ERR_INVALID_ARG ||
        strstr(coll_last_error(), "COLL_SHM_SINGLE_COPY='1M'") == NULL)
      bt_out_fail(&o->r, s == COLL_OK ? COLL_ERR_INTERNAL : s,
                  "expected INVALID_ARG naming COLL_SHM_SINGLE_COPY: %s: %s",
                  coll_status_name(s), coll_last_error());
    if (s == COLL_OK) coll_comm_destroy(c);
    return 0;
  }
  if (s != COLL_OK) {
    bt_out_fail(&o->r, s, "init: %s", coll_last_error());
    return 0;
  }
  o->copy_from = coll__t_copy_from(((coll_cpu_t *)c->be)->t);
  o->said_fallback = log_says(log, "no single copy");
  if (!coll__cpu_shared(c->be) ||
      !coll__cpu_shm_others_fit(c->be, SIZE_MAX - 1))
    bt_out_fail(&o->r, COLL_OK,
                "auto does not take the shared-memory collectives at every "
                "size");
  else if (j->kase == CASE_KILL)
    kill_case(c, j, &o->r);
  else if (j->kase >= CASE_KNOBS)
    knob_case(c, j, &o->r);
  else
    results(c, j->rank, j->world, &o->r);
  o->copies = copies;
  coll_comm_destroy(c);
  return 0;
}

/* ---- the test process ---------------------------------------------------- */

/* The ranks' records, after bt_job_run. */
static rank_out_t *outs(const bt_job_t *j) { return j->out; }

static void run_job(bt_job_t *j, int world, int kase) {
  bt_job_run(j, world, kase, sizeof(rank_out_t), rank_main, CHILD_MS);
}

static void results_case(int world, int kase) {
  bt_job_t j;
  rank_out_t *out;
  run_job(&j, world, kase);
  out = outs(&j);
  bt_job_expect_ok(&j, -1);
  for (int r = 0; r < world; r++) {
    assert_int_equal(out[r].r.checked, results_count(world));
    if (kase == CASE_ON) {
      assert_int_equal(out[r].copy_from, 1);
      assert_true(out[r].copies > 0);
      assert_false(out[r].said_fallback);
    } else {
      assert_int_equal(out[r].copy_from, 0);
      assert_int_equal(out[r].copies, 0);
      assert_true(out[r].said_fallback);
    }
  }
  bt_job_end(&j);
}

static void test_on_2(void **state) {
  (void)state;
  results_case(2, CASE_ON);
}

static void test_on_3(void **state) {
  (void)state;
  results_case(3, CASE_ON);
}

static void test_on_4(void **state) {
  (void)state;
  results_case(4, CASE_ON);
}

static void test_off_3(void **state) {
  (void)state;
  results_case(3, CASE_OFF);
}

static void test_one_refuses_3(void **state) {
  (void)state;
  results_case(3, CASE_ONE_REFUSES);
}

/* Ranks that set COLL_SHM_SINGLE_COPY to 4096, 65536 and 1 MiB all use
 * 1 MiB: one allreduce of it copies once per peer and slice, the one just
 * below it none. */
static void test_knob_largest_wins(void **state) {
  bt_job_t j;
  rank_out_t *out;
  (void)state;
  run_job(&j, 3, CASE_KNOBS);
  out = outs(&j);
  bt_job_expect_ok(&j, -1);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(out[r].copy_from, 1u << 20);
    /* Its slice (a third of 1 MiB: two chunks of 256 KiB) of each peer's
     * input, then each peer's slice. */
    assert_int_equal(out[r].copies, 2 * 2 + 2);
  }
  bt_job_end(&j);
}

static void test_knob_zero_on_one_rank(void **state) {
  bt_job_t j;
  rank_out_t *out;
  (void)state;
  run_job(&j, 3, CASE_KNOB_OFF);
  out = outs(&j);
  bt_job_expect_ok(&j, -1);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(out[r].copy_from, 0);
    assert_int_equal(out[r].copies, 0);
    assert_true(out[r].said_fallback);
  }
  bt_job_end(&j);
}

static void test_knob_refused(void **state) {
  bt_job_t j;
  (void)state;
  run_job(&j, 2, CASE_KNOB_BAD);
  bt_job_expect_ok(&j, -1);
  bt_job_end(&j);
}

static void test_killed_mid_copy(void **state) {
  bt_job_t j;
  (void)state;
  run_job(&j, 3, CASE_KILL);
  assert_int_equal(j.st[2], 128 + SIGKILL);
  bt_job_expect_ok(&j, 2);
  assert_true(outs(&j)[0].copies > 0);
  bt_job_end(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_on_2),
      cmocka_unit_test(test_on_3),
      cmocka_unit_test(test_on_4),
      cmocka_unit_test(test_off_3),
      cmocka_unit_test(test_one_refuses_3),
      cmocka_unit_test(test_killed_mid_copy),
      cmocka_unit_test(test_knob_largest_wins),
      cmocka_unit_test(test_knob_zero_on_one_rank),
      cmocka_unit_test(test_knob_refused),
  };
  /* The fallback is said at INFO; each rank's log goes to a file. */
  setenv("COLL_DEBUG", "INFO", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
