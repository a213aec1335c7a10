/* SPDX-License-Identifier: Apache-2.0 */
/* test_topo.c: CPU comms whose ranks are spread over hosts (host tables
 * given to in-process transports, as the rendezvous gives them to TCP ones),
 * with interleaved numberings and uneven layouts.
 *
 * - The walk order groups ranks by host whatever the numbering
 *   (coll__topo_init on its own).
 * - Every collective, dtype and op matches the serial reference bit for bit
 *   under COLL_ALGO=auto, ring and twolevel (and rh on 2x2 and 2x3), on
 *   2x2, 2x3, 3x2 and 3+1 layouts (two-level falls back to the
 *   host-ordered ring on 3+1).
 * - The ring crosses between hosts once per host per pass: a trace of the
 *   bytes each rank sent to each peer (a transport test hook) shows exactly
 *   nhosts cross-host links, each carrying what a ring link carries; the
 *   two-level allreduce sends 1/local of that between hosts per rank.
 * - Random floats: the two-level result is the same bits on every rank and
 *   in every run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/topo.h"
#include "api_test.h"
#include "transport/route/route.h"
#include "transport/transport.h"

#define MAXW 6
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 240000

static const coll_dtype_t k_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                        COLL_F64, COLL_I8,   COLL_U8,
                                        COLL_I32, COLL_I64};
static const coll_op_t k_ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};
#define NDT ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))
#define NOP ((int)(sizeof k_ops / sizeof k_ops[0]))

typedef struct layout {
  const char *name;
  int world;
  int host_of[MAXW];
  int nhosts;
} layout_t;

static const layout_t k_2x2 = {"2x2 interleaved", 4, {0, 1, 0, 1}, 2};
static const layout_t k_2x3 = {"2x3 interleaved", 6, {0, 1, 0, 1, 0, 1}, 2};
static const layout_t k_3x2 = {"3x2 interleaved", 6, {0, 1, 2, 0, 1, 2}, 3};
static const layout_t k_3p1 = {"3+1", 4, {0, 0, 1, 0}, 2};

/* ---- the walk order alone ------------------------------------------------ */

static void expect_order(int world, const int *host_of, const int *want,
                         int nhosts, int local) {
  coll_topo_t tp;
  int p;
  assert_int_equal(coll__topo_init(&tp, world, 0, host_of), COLL_OK);
  assert_int_equal(tp.nhosts, nhosts);
  assert_int_equal(tp.local, local);
  for (p = 0; p < world; p++) {
    int r = tp.order != NULL ? tp.order[p] : p;
    assert_int_equal(r, want[p]);
    if (tp.pos != NULL) assert_int_equal(tp.pos[r], p);
  }
  coll__topo_free(&tp);
}

static void test_order(void **state) {
  static const int inter[] = {0, 1, 0, 1}, inter_want[] = {0, 2, 1, 3};
  static const int three[] = {0, 1, 2, 0, 1, 2},
                   three_want[] = {0, 3, 1, 4, 2, 5};
  static const int uneven[] = {0, 0, 1, 0}, uneven_want[] = {0, 1, 3, 2};
  static const int ident_want[] = {0, 1, 2, 3};
  /* Numbers that are not the rendezvous's (hosts 7 and 3): the same. */
  static const int foreign[] = {7, 3, 7, 3};
  coll_topo_t tp;
  (void)state;
  expect_order(4, inter, inter_want, 2, 2);
  expect_order(4, foreign, inter_want, 2, 2);
  expect_order(6, three, three_want, 3, 2);
  expect_order(4, uneven, uneven_want, 2, 0);
  expect_order(4, NULL, ident_want, 1, 4);
  /* The column of rank 3 (host B, local index 1) on 2x2: ranks 2 and 3. */
  assert_int_equal(coll__topo_init(&tp, 4, 3, inter), COLL_OK);
  assert_non_null(tp.column);
  assert_int_equal(tp.column[0], 2);
  assert_int_equal(tp.column[1], 3);
  assert_true(coll__topo_two_level(&tp));
  coll__topo_free(&tp);
  assert_int_equal(coll__topo_init(&tp, 4, 0, uneven), COLL_OK);
  assert_false(coll__topo_two_level(&tp));
  coll__topo_free(&tp);
}

/* ---- comms over a faked host table --------------------------------------- */

static void comms_open(const layout_t *L, const char *algo,
                       coll_comm_t **comms) {
  coll_transport_t *ts[MAXW];
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  int r;
  if (algo != NULL)
    setenv("COLL_ALGO", algo, 1);
  else
    unsetenv("COLL_ALGO");
  cfg.timeout_ms = COMM_TIMEOUT_MS;
  assert_int_equal(coll_inproc_create(L->world, ts), COLL_OK);
  for (r = 0; r < L->world; r++)
    assert_int_equal(coll__route_create(&ts[r], NULL, L->host_of), COLL_OK);
  for (r = 0; r < L->world; r++)
    if (coll_comm_create(ts[r], &cfg, &comms[r]) != COLL_OK)
      fail_msg("comm_create: %s", coll_last_error());
  unsetenv("COLL_ALGO");
}

typedef struct job {
  const layout_t *L;
  coll_comm_t *comms[MAXW];
  size_t counts[3];
  int ncounts;
  int root;
  t_fail_t fails;
  uint64_t hash[MAXW]; /* random floats: each rank's result */
  size_t random_count;
} job_t;

static uint64_t case_of(int kind, size_t count, int di, int oi) {
  return t_mix((uint64_t)kind, (uint64_t)count,
               ((uint64_t)di << 8) | (uint64_t)oi);
}

static void check_allreduce(job_t *j, int rank, void *buf, size_t count, int di,
                            int oi) {
  coll_dtype_t dt = k_dtypes[di];
  coll_op_t op = k_ops[oi];
  uint64_t cas = case_of(0, count, di, oi);
  char what[160];
  snprintf(what, sizeof what, "%s allreduce rank %d count %zu %s %s",
           j->L->name, rank, count, coll_dtype_name(dt), coll_op_name(op));
  t_gen_n(dt, op, rank, 0, cas, buf, count);
  if (t_expect(&j->fails,
               coll_allreduce(j->comms[rank], buf, buf, count, dt, op, NULL),
               COLL_OK, "%s", what))
    t_check_reduced(&j->fails, what, dt, op, j->L->world, 0, cas, buf, count);
}

/* Reduce-scatter, allgather, reduce and broadcast keep their layouts by
 * comm rank under the host order. */
static void check_others(job_t *j, int rank, unsigned char *a, unsigned char *b,
                         size_t count, int di) {
  coll_dtype_t dt = k_dtypes[di];
  coll_comm_t *c = j->comms[rank];
  int n = j->L->world, r;
  size_t es = t_size(dt);
  uint64_t cas = case_of(1, count, di, 0);
  char what[160];
  snprintf(what, sizeof what, "%s rank %d count %zu %s", j->L->name, rank,
           count, coll_dtype_name(dt));
  t_gen_n(dt, COLL_SUM, rank, 0, cas, a, count * (size_t)n);
  if (t_expect(&j->fails,
               coll_reduce_scatter(c, a, b, count, dt, COLL_SUM, NULL), COLL_OK,
               "reduce_scatter %s", what))
    t_check_reduced(&j->fails, what, dt, COLL_SUM, n, (size_t)rank * count, cas,
                    b, count);
  t_bytes(rank, cas, a + (size_t)rank * count * es, count * es);
  if (t_expect(
          &j->fails,
          coll_allgather(c, a + (size_t)rank * count * es, a, count, dt, NULL),
          COLL_OK, "allgather %s", what))
    for (r = 0; r < n; r++) {
      t_bytes(r, cas, b, count * es);
      if (memcmp(a + (size_t)r * count * es, b, count * es) != 0)
        t_fail(&j->fails, "allgather %s: block %d differs", what, r);
    }
  t_gen_n(dt, COLL_MAX, rank, 0, cas, a, count);
  if (t_expect(&j->fails,
               coll_reduce(c, a, b, count, dt, COLL_MAX, j->root, NULL),
               COLL_OK, "reduce %s", what) &&
      rank == j->root)
    t_check_reduced(&j->fails, what, dt, COLL_MAX, n, 0, cas, b, count);
  if (rank == j->root) t_bytes(rank, cas, a, count * es);
  if (t_expect(&j->fails, coll_broadcast(c, a, count, dt, j->root, NULL),
               COLL_OK, "broadcast %s", what)) {
    t_bytes(j->root, cas, b, count * es);
    if (memcmp(a, b, count * es) != 0)
      t_fail(&j->fails, "broadcast %s: differs from root %d's", what, j->root);
  }
}

static void matrix_rank(int rank, int world, void *arg) {
  job_t *j = arg;
  size_t max = j->counts[j->ncounts - 1] * (size_t)world * 8;
  unsigned char *a = malloc(max), *b = malloc(max);
  int ci, di, oi;
  if (a == NULL || b == NULL) {
    t_fail(&j->fails, "rank %d: out of memory", rank);
    free(a);
    free(b);
    return;
  }
  for (ci = 0; ci < j->ncounts; ci++)
    for (di = 0; di < NDT; di++) {
      for (oi = 0; oi < NOP; oi++)
        check_allreduce(j, rank, a, j->counts[ci], di, oi);
      check_others(j, rank, a, b, j->counts[ci], di);
    }
  t_expect(&j->fails, coll_barrier(j->comms[rank]), COLL_OK, "barrier");
  free(a);
  free(b);
}

static void run_matrix(const layout_t *L, const char *algo) {
  job_t *j = calloc(1, sizeof *j);
  char what[96];
  assert_non_null(j);
  j->L = L;
  /* 1 element, a few (below the ring threshold: recursive doubling), and a
   * count with uneven blocks well above it (COLL_RING_THRESHOLD below). */
  j->counts[0] = 1;
  j->counts[1] = 13;
  j->counts[2] = t_quick() ? 1001 : 10007;
  j->ncounts = 3;
  j->root = L->world - 1;
  t_fail_init(&j->fails);
  comms_open(L, algo, j->comms);
  snprintf(what, sizeof what, "%s, COLL_ALGO=%s", L->name,
           algo ? algo : "(unset)");
  test_run_ranks(L->world, matrix_rank, j, RUN_TIMEOUT_MS, what);
  test_destroy_comms(L->world, j->comms);
  if (t_fail_report(&j->fails, what) != 0) fail_msg("%s: wrong results", what);
  t_fail_destroy(&j->fails);
  free(j);
}

static int setup(void **state) {
  (void)state;
  /* Small thresholds and segments: the counts above take every path, and
   * the ring pipelines over several rounds. */
  setenv("COLL_RING_THRESHOLD", "1024", 1);
  setenv("COLL_SEGMENT_BYTES", "512", 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unsetenv("COLL_RING_THRESHOLD");
  unsetenv("COLL_SEGMENT_BYTES");
  unsetenv("COLL_ALGO");
  unsetenv("COLL_CHECK_MISMATCH");
  coll__t_send_test_hook = NULL;
  return 0;
}

static void test_2x2(void **state) {
  (void)state;
  run_matrix(&k_2x2, NULL);
  run_matrix(&k_2x2, "twolevel");
  run_matrix(&k_2x2, "ring");
  run_matrix(&k_2x2, "rh");
}

static void test_2x3(void **state) {
  (void)state;
  run_matrix(&k_2x3, NULL);
  if (!t_quick()) run_matrix(&k_2x3, "twolevel");
  run_matrix(&k_2x3, "rh"); /* 6 ranks: two fold in and out */
}

static void test_3x2(void **state) {
  (void)state;
  run_matrix(&k_3x2, "twolevel");
}

static void test_3p1(void **state) {
  (void)state;
  run_matrix(&k_3p1, NULL);
  run_matrix(&k_3p1, "twolevel");
}

/* ---- who sends to whom --------------------------------------------------- */

static atomic_ullong g_sent[MAXW][MAXW];

static void record_send(const coll_transport_t *t, int peer, size_t len) {
  int rank = coll_transport_rank(t);
  if (rank >= 0 && rank < MAXW && peer >= 0 && peer < MAXW)
    atomic_fetch_add(&g_sent[rank][peer], (unsigned long long)len);
}

typedef struct traffic {
  const layout_t *L;
  coll_comm_t *comms[MAXW];
  size_t count; /* f32 elements */
  t_fail_t fails;
} traffic_t;

static void traffic_rank(int rank, int world, void *arg) {
  traffic_t *x = arg;
  float *buf = malloc(x->count * sizeof *buf);
  uint64_t cas = t_mix(99, (uint64_t)world, x->count);
  (void)world;
  if (buf == NULL) {
    t_fail(&x->fails, "rank %d: out of memory", rank);
    return;
  }
  t_gen_n(COLL_F32, COLL_SUM, rank, 0, cas, buf, x->count);
  if (t_expect(&x->fails,
               coll_allreduce(x->comms[rank], buf, buf, x->count, COLL_F32,
                              COLL_SUM, NULL),
               COLL_OK, "allreduce rank %d", rank))
    t_check_reduced(&x->fails, "allreduce", COLL_F32, COLL_SUM, x->L->world, 0,
                    cas, buf, x->count);
  free(buf);
}

/* One allreduce of count f32 with the agreement round off (its recursive
 * doubling is not a ring); g_sent holds what each rank sent to each peer. */
static void run_traffic(const layout_t *L, const char *algo, size_t count) {
  traffic_t x;
  memset(&x, 0, sizeof x);
  memset(g_sent, 0, sizeof g_sent);
  x.L = L;
  x.count = count;
  t_fail_init(&x.fails);
  setenv("COLL_CHECK_MISMATCH", "0", 1);
  comms_open(L, algo, x.comms);
  unsetenv("COLL_CHECK_MISMATCH");
  coll__t_send_test_hook = record_send;
  test_run_ranks(L->world, traffic_rank, &x, RUN_TIMEOUT_MS, L->name);
  coll__t_send_test_hook = NULL;
  test_destroy_comms(L->world, x.comms);
  if (t_fail_report(&x.fails, L->name) != 0) fail_msg("wrong results");
  t_fail_destroy(&x.fails);
}

/* The flat ring: every rank sends to one peer only; exactly nhosts of those
 * links cross between hosts; each link carries 2(n-1) blocks of count/n. */
static void expect_ring(const layout_t *L, size_t count) {
  int r, p, cross = 0;
  unsigned long long link = 2ull * (unsigned)(L->world - 1) *
                            (count / (unsigned)L->world) * sizeof(float);
  run_traffic(L, "ring", count);
  for (r = 0; r < L->world; r++) {
    int peers = 0;
    for (p = 0; p < L->world; p++) {
      unsigned long long b = atomic_load(&g_sent[r][p]);
      if (b == 0) continue;
      peers++;
      assert_int_equal(b, link);
      if (L->host_of[r] != L->host_of[p]) cross++;
    }
    if (peers != 1) fail_msg("%s: rank %d sent to %d peers", L->name, r, peers);
  }
  if (cross != L->nhosts)
    fail_msg("%s: the ring crosses between hosts %d times, not %d", L->name,
             cross, L->nhosts);
}

static void test_ring_crosses_once_per_host(void **state) {
  (void)state;
  /* A multiple of every world: blocks of equal size. */
  expect_ring(&k_2x2, 6 * 1024);
  expect_ring(&k_2x3, 6 * 1024);
  expect_ring(&k_3x2, 6 * 1024);
  expect_ring(&k_3p1, 6 * 1024);
}

/* Two-level: each rank sends across hosts only to the ranks of its own
 * column, 2(H-1) blocks of count/local/H each. */
static void test_two_level_traffic(void **state) {
  const layout_t *ls[] = {&k_2x2, &k_2x3, &k_3x2};
  size_t count = 6 * 1024, i;
  (void)state;
  for (i = 0; i < sizeof ls / sizeof ls[0]; i++) {
    const layout_t *L = ls[i];
    int local = L->world / L->nhosts, r, p;
    unsigned long long want = 2ull * (unsigned)(L->nhosts - 1) *
                              (count / (unsigned)local / (unsigned)L->nhosts) *
                              sizeof(float);
    run_traffic(L, "twolevel", count);
    for (r = 0; r < L->world; r++) {
      unsigned long long across = 0;
      for (p = 0; p < L->world; p++)
        if (L->host_of[r] != L->host_of[p])
          across += atomic_load(&g_sent[r][p]);
      if (across != want)
        fail_msg("%s: rank %d sent %llu bytes across hosts, not %llu", L->name,
                 r, across, want);
    }
  }
}

/* ---- random floats: identical bits on every rank and in every run ------- */

static void random_rank(int rank, int world, void *arg) {
  job_t *j = arg;
  float *buf = malloc(j->random_count * sizeof *buf);
  uint64_t seed = t_mix(7, (uint64_t)rank, 0);
  size_t i;
  (void)world;
  if (buf == NULL) {
    t_fail(&j->fails, "rank %d: out of memory", rank);
    return;
  }
  for (i = 0; i < j->random_count; i++)
    buf[i] =
        (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 * 2.0 -
                1.0);
  if (t_expect(&j->fails,
               coll_allreduce(j->comms[rank], buf, buf, j->random_count,
                              COLL_F32, COLL_SUM, NULL),
               COLL_OK, "random allreduce rank %d", rank))
    j->hash[rank] = t_mix(0, 0, 0);
  for (i = 0; i < j->random_count; i++) {
    uint32_t u;
    memcpy(&u, &buf[i], sizeof u);
    j->hash[rank] = t_mix(j->hash[rank], u, i);
  }
  free(buf);
}

static void test_random_floats_identical(void **state) {
  uint64_t first = 0;
  int run, r;
  (void)state;
  for (run = 0; run < 2; run++) {
    job_t *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->L = &k_2x3;
    j->random_count = 50021;
    t_fail_init(&j->fails);
    comms_open(j->L, "twolevel", j->comms);
    test_run_ranks(j->L->world, random_rank, j, RUN_TIMEOUT_MS, "random");
    test_destroy_comms(j->L->world, j->comms);
    if (t_fail_report(&j->fails, "random floats") != 0) fail_msg("failed");
    t_fail_destroy(&j->fails);
    for (r = 1; r < j->L->world; r++)
      if (j->hash[r] != j->hash[0])
        fail_msg("rank %d's result differs from rank 0's", r);
    if (run == 0) first = j->hash[0];
    if (run == 1 && j->hash[0] != first) fail_msg("two runs differ");
    free(j);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order),
      cmocka_unit_test_setup_teardown(test_2x2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_2x3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_3x2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_3p1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_crosses_once_per_host, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_two_level_traffic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_floats_identical, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
