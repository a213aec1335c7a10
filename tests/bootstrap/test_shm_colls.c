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
#include <unistd.h>
#include <cmocka.h>

#include "coll.h"
#include "cpu/choose.h"
#include "rank_checks.h"
#include "rank_job.h"
#include "test_util.h"

#define CHILD_MS 90000
#define SLOT (256u * 1024u) /* shm_int.h: a slot per rank and buffer */

enum { CASE_RESULTS, CASE_KILL, CASE_ABORT };

/* ---- the ranks --------------------------------------------------------- */

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

static void reduce_scatters(coll_comm_t *c, int rank, int world,
                            bt_rank_out_t *o) {
  static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};
  size_t sz[8], k = sizes(world, sz);
  for (int d = 0; d < COLL_DTYPE_COUNT && !o->status; d++) {
    coll_dtype_t dt = (coll_dtype_t)d;
    size_t es = coll_dtype_size(dt);
    for (size_t b = 0; b < k && !o->status; b++)
      for (size_t q = 0; q < sizeof ops / sizeof ops[0] && !o->status; q++) {
        if (bt_quick() && sz[b] > SLOT && ops[q] != COLL_SUM) continue;
        bt_check_reduce_scatter(c, rank, world, dt, ops[q],
                                sz[b] / es > 0 ? sz[b] / es : 1, o);
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

static void results(coll_comm_t *c, int rank, int world, bt_rank_out_t *o) {
  uint64_t r0 = rounds(c), used;
  size_t sz[8], k = sizes(world, sz);
  bt_check_broadcasts(c, rank, world, sz, k, o);
  bt_check_allgathers(c, rank, world, sz, k, o);
  reduce_scatters(c, rank, world, o);
  /* The descriptor agreement goes by messages; every collective took at
   * least one shared round. */
  used = rounds(c) - r0 - 1;
  if (!o->status && used < (uint64_t)o->checked)
    bt_out_fail(o, COLL_OK, "%d collectives ran only %llu shared rounds",
                o->checked, (unsigned long long)used);
}

/* The last rank dies before its third broadcast while the others wait on
 * its flags: they fail naming it. */
static void kill_case(coll_comm_t *c, const bt_job_t *j, bt_rank_out_t *o) {
  size_t n = 1 << 20;
  char *a = calloc(n, 1);
  int victim = j->world - 1;
  char want[48];
  coll_status_t s = COLL_OK;
  if (a == NULL) {
    bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
    return;
  }
  for (int it = 0; it < 10 && s == COLL_OK; it++) {
    if (it == 3 && j->rank == victim) raise(SIGKILL);
    s = coll_broadcast(c, a, n, COLL_U8, 0, NULL);
  }
  free(a);
  snprintf(want, sizeof want, "rank %d lost", victim);
  if (s != COLL_ERR_PEER_LOST || strstr(coll_last_error(), want) == NULL)
    bt_out_fail(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
                "expected PEER_LOST naming %s: %s: %s", want,
                coll_status_name(s), coll_last_error());
}

static void *abort_soon(void *p) {
  test_sleep_ms(300);
  coll_abort(p);
  return NULL;
}

/* Rank 0 enters an allgather that rank 1 joins only later and aborts it
 * from another thread: ABORTED; rank 1's then fails naming rank 0. */
static void abort_case(coll_comm_t *c, const bt_job_t *j, bt_rank_out_t *o) {
  char a[2 * 4096] = {0};
  coll_status_t s;
  if (j->rank == 0) {
    coll_abort_handle_t *h = NULL;
    pthread_t th;
    if (coll_comm_abort_handle(c, &h) != COLL_OK ||
        pthread_create(&th, NULL, abort_soon, h) != 0) {
      bt_out_fail(o, COLL_ERR_INTERNAL, "setup: %s", coll_last_error());
      return;
    }
    s = coll_allgather(c, a, a, 4096, COLL_U8, NULL);
    pthread_join(th, NULL);
    coll_abort_handle_release(h);
    if (s != COLL_ERR_ABORTED)
      bt_out_fail(o, s, "expected ABORTED: %s: %s", coll_status_name(s),
                  coll_last_error());
    return;
  }
  test_sleep_ms(1500);
  s = coll_allgather(c, a + 4096, a, 4096, COLL_U8, NULL);
  if (s != COLL_ERR_ABORTED || strstr(coll_last_error(), "rank 0") == NULL)
    bt_out_fail(o, s, "expected ABORTED naming rank 0: %s: %s",
                coll_status_name(s), coll_last_error());
}

static int rank_main(void *p) {
  bt_job_t *j = p;
  bt_rank_out_t *o = bt_job_out(j, j->rank);
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TRANSPORT", "shm", 1);
  unsetenv("COLL_ALGO");
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    bt_out_fail(o, s, "init: %s", coll_last_error());
    return 0;
  }
  if (!coll__cpu_shared(c->be) ||
      !coll__cpu_shm_others_fit(c->be, SIZE_MAX - 1))
    bt_out_fail(o, COLL_OK,
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

static void results_case(int world) {
  bt_job_t j;
  size_t sz[8];
  int k = (int)sizes(world, sz), rs = 0;
  bt_job_run(&j, world, CASE_RESULTS, sizeof(bt_rank_out_t), rank_main,
             CHILD_MS);
  for (int b = 0; b < k; b++) rs += bt_quick() && sz[b] > SLOT ? 1 : 5;
  bt_job_expect_ok(&j, -1);
  for (int r = 0; r < world; r++)
    assert_int_equal(bt_job_out(&j, r)->checked,
                     k * world + k + COLL_DTYPE_COUNT * rs);
  bt_job_end(&j);
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
  bt_job_t j;
  (void)state;
  bt_job_run(&j, 3, CASE_KILL, sizeof(bt_rank_out_t), rank_main, CHILD_MS);
  assert_int_equal(j.st[2], 128 + SIGKILL);
  bt_job_expect_ok(&j, 2);
  bt_job_end(&j);
}

static void test_abort_while_waiting(void **state) {
  bt_job_t j;
  (void)state;
  bt_job_run(&j, 2, CASE_ABORT, sizeof(bt_rank_out_t), rank_main, CHILD_MS);
  bt_job_expect_ok(&j, -1);
  bt_job_end(&j);
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
