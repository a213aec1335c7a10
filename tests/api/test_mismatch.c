/* SPDX-License-Identifier: Apache-2.0 */
/* test_mismatch.c: ranks that disagree on count, dtype, op, root or
 * collective get COLL_ERR_LENGTH_MISMATCH on every rank (no hang) and the
 * comm keeps working; an aborted comm refuses every call at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define RUN_TIMEOUT_MS 120000

static t_fail_t g_fails;

#define EXPECT(call, want, name) \
  t_expect_err(&g_fails, (call), want, name, #call, __LINE__)
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) t_fail(&g_fails, "line %d: %s is false", __LINE__, #cond); \
  } while (0)

static void begin(void) { t_fail_init(&g_fails); }
static void end(const char *what) {
  int n = t_fail_report(&g_fails, what);
  t_fail_destroy(&g_fails);
  assert_int_equal(n, 0);
}

/* ---- ranks that disagree ----------------------------------------------- */

#define MISMATCH_WORLD 4
#define BIGC 70001

typedef enum { M_AR, M_BCAST, M_REDUCE, M_AG, M_RS } mkind_t;

/* What one rank calls in one mismatch case. */
typedef struct mcall {
  mkind_t kind;
  size_t count;
  coll_dtype_t dt;
  coll_op_t op;
  int root;
} mcall_t;

/* A case: what every rank calls, and what one odd rank calls instead. */
typedef struct mcase {
  const char *what;
  mcall_t all;
  int odd_rank;
  mcall_t odd;
} mcase_t;

static const mcase_t k_mcases[] = {
    {"allreduce count",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     1,
     {M_AR, 5, COLL_F32, COLL_SUM, 0}},
    {"allreduce count 0 vs 4",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     2,
     {M_AR, 0, COLL_F32, COLL_SUM, 0}},
    {"allreduce large count",
     {M_AR, BIGC, COLL_F32, COLL_SUM, 0},
     3,
     {M_AR, BIGC - 1, COLL_F32, COLL_SUM, 0}},
    {"allreduce dtype, same size",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     3,
     {M_AR, 4, COLL_I32, COLL_SUM, 0}},
    {"allreduce dtype and count, same bytes",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     0,
     {M_AR, 8, COLL_F16, COLL_SUM, 0}},
    {"allreduce op",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     1,
     {M_AR, 4, COLL_F32, COLL_MAX, 0}},
    {"allreduce op on a large buffer",
     {M_AR, BIGC, COLL_F64, COLL_SUM, 0},
     2,
     {M_AR, BIGC, COLL_F64, COLL_AVG, 0}},
    {"broadcast root",
     {M_BCAST, 10, COLL_I32, COLL_SUM, 0},
     2,
     {M_BCAST, 10, COLL_I32, COLL_SUM, 1}},
    {"broadcast count",
     {M_BCAST, 9, COLL_I32, COLL_SUM, 0},
     0,
     {M_BCAST, 10, COLL_I32, COLL_SUM, 0}},
    {"broadcast dtype",
     {M_BCAST, 9, COLL_I64, COLL_SUM, 1},
     3,
     {M_BCAST, 9, COLL_F64, COLL_SUM, 1}},
    {"reduce root",
     {M_REDUCE, 6, COLL_F32, COLL_SUM, 0},
     3,
     {M_REDUCE, 6, COLL_F32, COLL_SUM, 2}},
    {"reduce op",
     {M_REDUCE, 6, COLL_F32, COLL_SUM, 1},
     0,
     {M_REDUCE, 6, COLL_F32, COLL_MIN, 1}},
    {"reduce count",
     {M_REDUCE, 6, COLL_U8, COLL_SUM, 2},
     1,
     {M_REDUCE, 7, COLL_U8, COLL_SUM, 2}},
    {"allgather count",
     {M_AG, 2, COLL_I32, COLL_SUM, 0},
     1,
     {M_AG, 3, COLL_I32, COLL_SUM, 0}},
    {"allgather dtype",
     {M_AG, 5, COLL_I8, COLL_SUM, 0},
     2,
     {M_AG, 5, COLL_U8, COLL_SUM, 0}},
    {"reduce_scatter count",
     {M_RS, 3, COLL_F32, COLL_SUM, 0},
     3,
     {M_RS, 2, COLL_F32, COLL_SUM, 0}},
    {"reduce_scatter op",
     {M_RS, 3, COLL_F32, COLL_SUM, 0},
     0,
     {M_RS, 3, COLL_F32, COLL_PROD, 0}},
    {"reduce_scatter dtype",
     {M_RS, 3, COLL_F32, COLL_SUM, 0},
     2,
     {M_RS, 3, COLL_I32, COLL_SUM, 0}},
    {"allreduce vs broadcast",
     {M_AR, 4, COLL_F32, COLL_SUM, 0},
     1,
     {M_BCAST, 4, COLL_F32, COLL_SUM, 0}},
};
#define NMCASES ((int)(sizeof k_mcases / sizeof k_mcases[0]))

typedef struct mctx {
  coll_comm_t *comms[MISMATCH_WORLD];
} mctx_t;

static coll_status_t mcall(coll_comm_t *c, const mcall_t *m, void *a, void *b) {
  switch (m->kind) {
    case M_AR: return coll_allreduce(c, a, b, m->count, m->dt, m->op, NULL);
    case M_BCAST: return coll_broadcast(c, a, m->count, m->dt, m->root, NULL);
    case M_REDUCE:
      return coll_reduce(c, a, b, m->count, m->dt, m->op, m->root, NULL);
    case M_AG: return coll_allgather(c, a, b, m->count, m->dt, NULL);
    default: return coll_reduce_scatter(c, a, b, m->count, m->dt, m->op, NULL);
  }
}

static void mismatch_rank(int rank, int world, void *arg) {
  mctx_t *m = arg;
  size_t cap = (size_t)BIGC * 8 * MISMATCH_WORLD;
  unsigned char *a = calloc(1, cap), *b = calloc(1, cap);
  int i, j;
  if (a == NULL || b == NULL) {
    t_fail(&g_fails, "out of memory in the test");
    goto out;
  }
  for (i = 0; i < NMCASES; i++) {
    const mcase_t *mc = &k_mcases[i];
    const mcall_t *mine = rank == mc->odd_rank ? &mc->odd : &mc->all;
    int32_t v[7];
    coll_status_t s = mcall(m->comms[rank], mine, a, b);
    if (t_expect(&g_fails, s, COLL_ERR_LENGTH_MISMATCH,
                 "mismatch \"%s\" on rank %d%s", mc->what, rank,
                 rank == mc->odd_rank ? " (the odd one)" : "") &&
        coll_last_error()[0] == '\0')
      t_fail(&g_fails, "mismatch \"%s\" rank %d: no error text", mc->what,
             rank);
    /* The comm still works. */
    for (j = 0; j < 7; j++) v[j] = rank * 10 + j + i;
    s = coll_allreduce(m->comms[rank], v, v, 7, COLL_I32, COLL_SUM, NULL);
    if (!t_expect(&g_fails, s, COLL_OK,
                  "allreduce after mismatch \"%s\" on rank %d", mc->what, rank))
      continue;
    for (j = 0; j < 7; j++)
      if (v[j] != 10 * world * (world - 1) / 2 + world * (j + i)) {
        t_fail(&g_fails,
               "allreduce after mismatch \"%s\" rank %d: element "
               "%d is %d",
               mc->what, rank, j, v[j]);
        break;
      }
  }
out:
  free(a);
  free(b);
}

static void test_mismatch(void **state) {
  mctx_t m;
  (void)state;
  begin();
  assert_int_equal(test_inproc_comms(MISMATCH_WORLD, 20000, m.comms), 0);
  test_run_ranks(MISMATCH_WORLD, mismatch_rank, &m, RUN_TIMEOUT_MS,
                 "mismatched arguments");
  test_destroy_comms(MISMATCH_WORLD, m.comms);
  end("mismatched arguments");
}

/* ---- batches that differ ------------------------------------------------
 * The text names the batch as the user called it and lists its buffers;
 * the descriptor's internals (a hash of the list) never show. */

#define BATCH_WORLD 3

typedef struct bcase {
  const char *what;
  int odd_n;            /* rank 1's buffers; the others pass two */
  coll_buffer_t odd[3]; /* data filled in by the rank */
  int plain;            /* rank 1 calls coll_allreduce instead */
  const char *want[3];  /* words every rank's text must hold */
  const char *want_odd; /* and rank 1's, which lists its own buffers */
} bcase_t;

static const bcase_t k_bcases[] = {
    {"one buffer more",
     3,
     {{NULL, 1000, COLL_F32}, {NULL, 1000, COLL_F32}, {NULL, 8, COLL_F16}},
     0,
     {"allreduce_batch: ", "rank 1 has 3 buffers (f32 1000", "2 buffers"},
     "3 buffers (f32 1000, f32 1000, f16 8)"},
    {"same count, other dtype",
     2,
     {{NULL, 1000, COLL_F32}, {NULL, 1000, COLL_I32}},
     0,
     {"allreduce_batch: ", "a different list", "2 buffers (f32 1000, "},
     "rank 1 has 2 buffers (f32 1000, i32 1000)"},
    {"a batch against an allreduce",
     0,
     {{NULL, 0, COLL_F32}},
     1,
     {"allreduce_batch", "collective allreduce,", "count 2000"},
     NULL},
};
#define NBCASES ((int)(sizeof k_bcases / sizeof k_bcases[0]))

static void batch_mismatch_rank(int rank, int world, void *arg) {
  coll_comm_t **comms = arg;
  float *mem = calloc(4000, sizeof(float));
  int i, j;
  (void)world;
  if (mem == NULL) {
    t_fail(&g_fails, "out of memory in the test");
    return;
  }
  for (i = 0; i < NBCASES; i++) {
    const bcase_t *bc = &k_bcases[i];
    coll_buffer_t bufs[3] = {{mem, 1000, COLL_F32},
                             {mem + 1000, 1000, COLL_F32},
                             {NULL, 0, COLL_F32}};
    int n = 2;
    coll_status_t s;
    const char *text;
    if (rank == 1 && bc->odd_n > 0) {
      n = bc->odd_n;
      for (j = 0; j < n; j++) {
        bufs[j] = bc->odd[j];
        bufs[j].data = mem + 1000 * j;
      }
    }
    if (rank == 1 && bc->plain)
      s = coll_allreduce(comms[rank], mem, mem, 2000, COLL_F32, COLL_SUM, NULL);
    else
      s = coll_allreduce_batch(comms[rank], bufs, (size_t)n, COLL_SUM, NULL);
    if (!t_expect(&g_fails, s, COLL_ERR_LENGTH_MISMATCH,
                  "batch mismatch \"%s\" on rank %d", bc->what, rank))
      continue;
    text = coll_last_error();
    for (j = 0; j < 3; j++)
      if (bc->want[j] != NULL && strstr(text, bc->want[j]) == NULL)
        t_fail(&g_fails, "batch mismatch \"%s\" rank %d: \"%s\" lacks \"%s\"",
               bc->what, rank, text, bc->want[j]);
    if (rank == 1 && bc->want_odd != NULL && strstr(text, bc->want_odd) == NULL)
      t_fail(&g_fails, "batch mismatch \"%s\" rank 1: \"%s\" lacks \"%s\"",
             bc->what, text, bc->want_odd);
    if (strstr(text, "root") != NULL)
      t_fail(&g_fails, "batch mismatch \"%s\" rank %d: \"%s\" shows a root",
             bc->what, rank, text);
  }
  free(mem);
}

static void test_batch_mismatch(void **state) {
  coll_comm_t *comms[BATCH_WORLD];
  (void)state;
  begin();
  assert_int_equal(test_inproc_comms(BATCH_WORLD, 20000, comms), 0);
  test_run_ranks(BATCH_WORLD, batch_mismatch_rank, comms, RUN_TIMEOUT_MS,
                 "batches that differ");
  test_destroy_comms(BATCH_WORLD, comms);
  end("batches that differ");
}

/* ---- use after abort --------------------------------------------------- */

static void aborted_rank(int rank, int world, void *arg) {
  coll_comm_t **cc = arg;
  coll_comm_t *c = cc[0];
  coll_abort_handle_t *h = NULL;
  float a[8] = {0}, b[16] = {0};
  coll_buffer_t bufs[1] = {{a, 8, COLL_F32}};
  coll_request_t *req = NULL;
  coll_dtype_t agreed;
  int32_t v[3] = {1, 2, 3};
  (void)rank, (void)world;
  if (!t_expect(&g_fails, coll_comm_abort_handle(c, &h), COLL_OK,
                "comm_abort_handle"))
    return;
  EXPECT(coll_abort(h), COLL_OK, "");
  CHECK(coll_is_aborted(h) == 1);
#define ABORTED(call) EXPECT(call, COLL_ERR_ABORTED, "")
  ABORTED(coll_allreduce(c, a, a, 8, COLL_F32, COLL_SUM, NULL));
  ABORTED(coll_iallreduce(c, a, a, 8, COLL_F32, COLL_SUM, NULL, &req));
  ABORTED(coll_allreduce_batch(c, bufs, 1, COLL_SUM, NULL));
  ABORTED(coll_allreduce_premul_sum(c, bufs, 1, 0.5f, NULL));
  ABORTED(coll_broadcast(c, a, 8, COLL_F32, 1, NULL));
  ABORTED(coll_ibroadcast(c, a, 8, COLL_F32, 0, NULL, &req));
  ABORTED(coll_allgather(c, a, b, 8, COLL_F32, NULL));
  ABORTED(coll_reduce_scatter(c, b, a, 8, COLL_F32, COLL_SUM, NULL));
  ABORTED(coll_reduce(c, a, b, 8, COLL_F32, COLL_SUM, 0, NULL));
  ABORTED(coll_barrier(c));
  ABORTED(coll_ibarrier(c, &req));
  ABORTED(coll_send(c, v, 3, COLL_I32, 1, 1));
  ABORTED(coll_recv(c, v, 3, COLL_I32, 1, 1, NULL));
  ABORTED(coll_isend(c, v, 3, COLL_I32, 1, 1, &req));
  ABORTED(coll_irecv(c, v, 3, COLL_I32, 1, 1, NULL, &req));
  ABORTED(coll_negotiate_dtype(c, COLL_F32, &agreed));
  ABORTED(coll_federated_average(c, a, 8, 100, NULL));
  ABORTED(coll_iallreduce_batch(c, bufs, 1, COLL_MAX, NULL, &req));
  ABORTED(coll_iallreduce_premul_sum(c, bufs, 1, 2.0f, NULL, &req));
  ABORTED(coll_iallgather(c, a, b, 8, COLL_F32, NULL, &req));
  ABORTED(coll_ireduce_scatter(c, b, a, 8, COLL_F32, COLL_SUM, NULL, &req));
  ABORTED(coll_ireduce(c, a, b, 8, COLL_F32, COLL_SUM, 1, NULL, &req));
  ABORTED(coll_inegotiate_dtype(c, COLL_F32, &agreed, &req));
  ABORTED(coll_ifederated_average(c, a, 8, 100, NULL, &req));
#undef ABORTED
  EXPECT(coll_abort(h), COLL_OK, ""); /* idempotent */
  coll_abort_handle_release(h);
  /* The peer's comm is a different comm: not aborted. */
  if (t_expect(&g_fails, coll_comm_abort_handle(cc[1], &h), COLL_OK,
               "comm_abort_handle(peer)")) {
    CHECK(coll_is_aborted(h) == 0);
    coll_abort_handle_release(h);
  }
}

static void test_use_after_abort(void **state) {
  coll_comm_t *cc[2];
  (void)state;
  begin();
  /* A long timeout: a call that waited instead of failing at once would
   * trip test_run_ranks' bound, not return a TIMEOUT. */
  assert_int_equal(test_inproc_comms(2, 600000, cc), 0);
  test_run_ranks(1, aborted_rank, cc, 60000, "calls on an aborted comm");
  test_destroy_comms(2, cc);
  end("use after abort");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_batch_mismatch),
      cmocka_unit_test(test_use_after_abort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
