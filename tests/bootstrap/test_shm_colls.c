/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_colls.c: broadcast, allgather and reduce-scatter designed for
 * shared memory (algo/broadcast_shm.c, allgather_shm.c,
 * reduce_scatter_shm.c) between forked rank processes over the
 * shared-memory transport, as auto picks them. Sizes around each round
 * boundary (one element, a slot, a slot's share per rank, several
 * rounds), every root, in place and out of place; reduce-scatter on every
 * dtype and op, bit-exact against a serial reference that combines the
 * ranks' values in rank order with the scalar kernels. Each rank checks
 * that the collectives went through the shared rounds, not messages. Then
 * a rank killed during a broadcast is named by the others, and an abort
 * releases a rank waiting on a peer's flag. */
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
#include "cpu/choose.h"
#include "reduce/half.h"
#include "reduce/reduce.h"
#include "test_util.h"

#define MAX_RANKS 4
#define CHILD_MS 90000
#define SLOT (256u * 1024u) /* shm_int.h: a slot per rank and buffer */

enum { CASE_RESULTS, CASE_KILL, CASE_ABORT };

typedef struct rank_out {
  int status; /* coll_status_t of the step that failed; -1 a wrong result */
  char msg[400];
  int checked; /* collectives checked */
} rank_out_t;

typedef struct job {
  int world, port, rank, kase;
  rank_out_t *out;
} job_t;

/* The rank's first failure (boot_test.h). */
#define fail_out(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

static int quick(void) {
  const char *q = getenv("TEST_QUICK");
  return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

/* ---- values and the serial reference -------------------------------- */

/* The seed of rank r's block d in a reduce-scatter (as bt_reference). */
static int rs_seed(int r, int d) { return r + 4 * d; }

/* ---- the ranks --------------------------------------------------------- */

static int same(const void *a, const void *b, size_t n, size_t *at) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) {
      *at = i;
      return 0;
    }
  return 1;
}

/* Bytes around each round boundary: one, a cache line and a bit, a slot's
 * share per rank for reduce-scatter, a slot, several rounds. */
static size_t sizes(int world, size_t *out) {
  size_t k = 0;
  out[k++] = 8;
  out[k++] = 72;
  out[k++] = SLOT / (size_t)world - 8;
  out[k++] = SLOT / (size_t)world + 8;
  out[k++] = SLOT;
  out[k++] = SLOT + 8;
  out[k++] = 2 * SLOT + 24;
  return k;
}

static void broadcasts(coll_comm_t *c, int rank, int world, rank_out_t *o) {
  size_t sz[8], k = sizes(world, sz);
  for (size_t b = 0; b < k && !o->status; b++)
    for (int root = 0; root < world && !o->status; root++) {
      size_t n = sz[b];
      char *buf = malloc(n), *want = malloc(n);
      size_t at;
      coll_status_t s;
      if (buf == NULL || want == NULL) {
        fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
      } else {
        bt_fill_values(want, COLL_U8, COLL_SUM, 50 + root, n);
        if (rank == root)
          memcpy(buf, want, n);
        else
          memset(buf, 0xee, n);
        s = coll_broadcast(c, buf, n, COLL_U8, root, NULL);
        if (s != COLL_OK)
          fail_out(o, s, "broadcast %zu from %d: %s", n, root,
                   coll_last_error());
        else if (!same(buf, want, n, &at))
          fail_out(o, COLL_OK, "broadcast %zu from %d: byte %zu differs", n,
                   root, at);
        o->checked++;
      }
      free(buf);
      free(want);
    }
}

static void allgathers(coll_comm_t *c, int rank, int world, rank_out_t *o) {
  size_t sz[8], k = sizes(world, sz);
  for (size_t b = 0; b < k && !o->status; b++) {
    size_t n = sz[b];
    int in_place = (int)(b & 1);
    char *all = malloc(n * (size_t)world), *want = malloc(n * (size_t)world);
    char *mine = malloc(n);
    size_t at;
    coll_status_t s;
    if (all == NULL || want == NULL || mine == NULL) {
      fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
      goto next;
    }
    for (int r = 0; r < world; r++)
      bt_fill_values(want + r * n, COLL_U8, COLL_SUM, r, n);
    memset(all, 0xee, n * (size_t)world);
    bt_fill_values(mine, COLL_U8, COLL_SUM, rank, n);
    if (in_place) memcpy(all + (size_t)rank * n, mine, n);
    s = coll_allgather(c, in_place ? all + (size_t)rank * n : mine, all, n,
                       COLL_U8, NULL);
    if (s != COLL_OK)
      fail_out(o, s, "allgather %zu: %s", n, coll_last_error());
    else if (!same(all, want, n * (size_t)world, &at))
      fail_out(o, COLL_OK, "allgather %zu (%s): byte %zu (rank %zu's) differs",
               n, in_place ? "in place" : "out of place", at, at / n);
    o->checked++;
  next:
    free(all);
    free(want);
    free(mine);
  }
}

static void reduce_scatters(coll_comm_t *c, int rank, int world,
                            rank_out_t *o) {
  static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};
  size_t sz[8], k = sizes(world, sz);
  for (int d = 0; d < COLL_DTYPE_COUNT && !o->status; d++) {
    coll_dtype_t dt = (coll_dtype_t)d;
    size_t es = coll_dtype_size(dt);
    for (size_t b = 0; b < k && !o->status; b++)
      for (size_t q = 0; q < sizeof ops / sizeof ops[0] && !o->status; q++) {
        coll_op_t op = ops[q];
        size_t n = sz[b] / es > 0 ? sz[b] / es : 1, at;
        char *send, *got, *want, *again;
        coll_status_t s;
        if (quick() && sz[b] > SLOT && op != COLL_SUM) continue;
        send = malloc(n * es * (size_t)world);
        again = malloc(n * es * (size_t)world);
        got = malloc(n * es);
        want = malloc(n * es);
        if (send == NULL || again == NULL || got == NULL || want == NULL ||
            bt_reference(want, dt, op, world, rank, n) != 0) {
          fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
          goto next;
        }
        for (int r = 0; r < world; r++)
          bt_fill_values(send + (size_t)r * n * es, dt, op, rs_seed(rank, r),
                         n);
        memcpy(again, send, n * es * (size_t)world);
        s = coll_reduce_scatter(c, send, got, n, dt, op, NULL);
        if (s != COLL_OK)
          fail_out(o, s, "reduce-scatter %s %s %zu: %s", coll_dtype_name(dt),
                   coll_op_name(op), n, coll_last_error());
        else if (!same(got, want, n * es, &at))
          fail_out(o, COLL_OK,
                   "reduce-scatter %s %s %zu: element %zu differs from the "
                   "serial reference in rank order",
                   coll_dtype_name(dt), coll_op_name(op), n, at / es);
        else if (memcmp(send, again, n * es * (size_t)world) != 0)
          fail_out(o, COLL_OK, "reduce-scatter %s %s %zu: send buffer changed",
                   coll_dtype_name(dt), coll_op_name(op), n);
        o->checked++;
      next:
        free(send);
        free(again);
        free(got);
        free(want);
      }
  }
}

/* The shared rounds this comm ran so far. Every rank asks at the same
 * points (it takes a round number, as a collective would). */
static uint64_t rounds(coll_comm_t *c) {
  coll_transport_t *t = ((coll_cpu_t *)c->be)->t;
  coll_rounds_t *sh = coll__t_rounds(t);
  return sh != NULL ? coll__rounds_next(sh) : 0;
}

static void results(coll_comm_t *c, int rank, int world, rank_out_t *o) {
  uint64_t r0 = rounds(c), used;
  broadcasts(c, rank, world, o);
  allgathers(c, rank, world, o);
  reduce_scatters(c, rank, world, o);
  /* The descriptor agreement goes by messages; every collective took at
   * least one shared round. */
  used = rounds(c) - r0 - 1;
  if (!o->status && used < (uint64_t)o->checked)
    fail_out(o, COLL_OK, "%d collectives ran only %llu shared rounds",
             o->checked, (unsigned long long)used);
}

/* The last rank dies before its third broadcast while the others wait on
 * its flags: they fail naming it. */
static void kill_case(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  size_t n = 1 << 20;
  char *a = calloc(n, 1);
  int victim = j->world - 1;
  char want[48];
  coll_status_t s = COLL_OK;
  if (a == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  for (int it = 0; it < 10 && s == COLL_OK; it++) {
    if (it == 3 && j->rank == victim) raise(SIGKILL);
    s = coll_broadcast(c, a, n, COLL_U8, 0, NULL);
  }
  free(a);
  snprintf(want, sizeof want, "rank %d lost", victim);
  if (s != COLL_ERR_PEER_LOST || strstr(coll_last_error(), want) == NULL)
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "expected PEER_LOST naming %s: %s: %s", want, coll_status_name(s),
             coll_last_error());
}

static void *abort_soon(void *p) {
  test_sleep_ms(300);
  coll_abort(p);
  return NULL;
}

/* Rank 0 enters an allgather that rank 1 joins only later and aborts it
 * from another thread: ABORTED; rank 1's then fails naming rank 0. */
static void abort_case(coll_comm_t *c, const job_t *j, rank_out_t *o) {
  char a[2 * 4096] = {0};
  coll_status_t s;
  if (j->rank == 0) {
    coll_abort_handle_t *h = NULL;
    pthread_t th;
    if (coll_comm_abort_handle(c, &h) != COLL_OK ||
        pthread_create(&th, NULL, abort_soon, h) != 0) {
      fail_out(o, COLL_ERR_INTERNAL, "setup: %s", coll_last_error());
      return;
    }
    s = coll_allgather(c, a, a, 4096, COLL_U8, NULL);
    pthread_join(th, NULL);
    coll_abort_handle_release(h);
    if (s != COLL_ERR_ABORTED)
      fail_out(o, s, "expected ABORTED: %s: %s", coll_status_name(s),
               coll_last_error());
    return;
  }
  test_sleep_ms(1500);
  s = coll_allgather(c, a + 4096, a, 4096, COLL_U8, NULL);
  if (s != COLL_ERR_ABORTED || strstr(coll_last_error(), "rank 0") == NULL)
    fail_out(o, s, "expected ABORTED naming rank 0: %s: %s",
             coll_status_name(s), coll_last_error());
}

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TRANSPORT", "shm", 1);
  unsetenv("COLL_ALGO");
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "init: %s", coll_last_error());
    return 0;
  }
  if (!coll__cpu_shared(c->be) ||
      !coll__cpu_shm_others_fit(c->be, SIZE_MAX - 1))
    fail_out(o, COLL_OK,
             "auto does not take the shared-memory collectives at every "
             "size");
  else if (j->kase == CASE_RESULTS)
    results(c, j->rank, j->world, o);
  else if (j->kase == CASE_KILL)
    kill_case(c, j, o);
  else
    abort_case(c, j, o);
  coll_comm_destroy(c);
  return 0;
}

/* ---- the test process ---------------------------------------------------- */

static rank_out_t *run_job(int world, int kase, int *st) {
  pid_t pids[MAX_RANKS];
  job_t j = {world, bt_free_port("127.0.0.1"), 0, kase, NULL};
  rank_out_t *out = mmap(NULL, sizeof *out * MAX_RANKS, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(out != MAP_FAILED);
  memset(out, 0, sizeof *out * MAX_RANKS);
  j.out = out;
  for (int r = 0; r < world; r++) {
    j.rank = r;
    pids[r] = bt_fork(rank_main, &j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < world; r++) st[r] = bt_wait_child(pids[r], CHILD_MS);
  return out;
}

static void expect_ok(int world, int skip, rank_out_t *out, const int *st) {
  for (int r = 0; r < world; r++) {
    if (r == skip) continue;
    if (out[r].status != 0)
      fail_msg("world %d rank %d: %s", world, r, out[r].msg);
    assert_int_equal(st[r], 0);
  }
}

static void results_case(int world) {
  int st[MAX_RANKS];
  size_t sz[8];
  int k = (int)sizes(world, sz), rs = 0;
  rank_out_t *out = run_job(world, CASE_RESULTS, st);
  for (int b = 0; b < k; b++) rs += quick() && sz[b] > SLOT ? 1 : 5;
  expect_ok(world, -1, out, st);
  for (int r = 0; r < world; r++)
    assert_int_equal(out[r].checked, k * world + k + COLL_DTYPE_COUNT * rs);
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_results_2(void **state) {
  (void)state;
  results_case(2);
}

static void test_results_3(void **state) {
  (void)state;
  results_case(3);
}

static void test_results_4(void **state) {
  (void)state;
  results_case(4);
}

static void test_killed_rank_named(void **state) {
  int st[MAX_RANKS];
  rank_out_t *out;
  (void)state;
  out = run_job(3, CASE_KILL, st);
  assert_int_equal(st[2], 128 + SIGKILL);
  expect_ok(3, 2, out, st);
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_abort_while_waiting(void **state) {
  int st[MAX_RANKS];
  rank_out_t *out;
  (void)state;
  out = run_job(2, CASE_ABORT, st);
  expect_ok(2, -1, out, st);
  munmap(out, sizeof *out * MAX_RANKS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_results_2),
      cmocka_unit_test(test_results_3),
      cmocka_unit_test(test_results_4),
      cmocka_unit_test(test_killed_rank_named),
      cmocka_unit_test(test_abort_while_waiting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
