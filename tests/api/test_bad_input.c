/* SPDX-License-Identifier: Apache-2.0 */
/* test_bad_input.c: every collective and point-to-point call refuses bad
 * arguments with the right status and a sentence naming it; status, dtype
 * and op tables; the error text is per thread. (Comms, handles and
 * transports: test_bad_handles.c; ranks that disagree, and calls on an
 * aborted comm: test_mismatch.c.) */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"

/* ---- tables (the version: test_version.c) ------------------------------ */

static void test_tables(void **state) {
  static const struct {
    coll_dtype_t dt;
    size_t size;
    const char *name;
  } dts[] = {{COLL_F16, 2, "f16"}, {COLL_BF16, 2, "bf16"}, {COLL_F32, 4, "f32"},
             {COLL_F64, 8, "f64"}, {COLL_I8, 1, "i8"},     {COLL_U8, 1, "u8"},
             {COLL_I32, 4, "i32"}, {COLL_I64, 8, "i64"}};
  static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};
  size_t i;
  (void)state;
  bi_begin();
  for (i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    CHECK(coll_dtype_size(dts[i].dt) == dts[i].size);
    CHECK(strcmp(coll_dtype_name(dts[i].dt), dts[i].name) == 0);
  }
  CHECK(coll_dtype_size(COLL_DTYPE_COUNT) == 0);
  CHECK(coll_dtype_size((coll_dtype_t)-1) == 0);
  CHECK(strcmp(coll_dtype_name(COLL_DTYPE_COUNT), "invalid") == 0);
  CHECK(strcmp(coll_dtype_name((coll_dtype_t)-5), "invalid") == 0);
  for (i = 0; i < 5; i++)
    CHECK(strcmp(coll_op_name((coll_op_t)i), ops[i]) == 0);
  CHECK(strcmp(coll_op_name(COLL_OP_COUNT), "invalid") == 0);
  CHECK(strcmp(coll_op_name((coll_op_t)-1), "invalid") == 0);
#define STATUS_CHECK_(name, value, text)                    \
  CHECK(COLL_##name == value);                              \
  CHECK(strcmp(coll_status_name(COLL_##name), #name) == 0); \
  CHECK(strcmp(coll_strerror(COLL_##name), text) == 0);
  COLL_STATUS_MAP(STATUS_CHECK_)
#undef STATUS_CHECK_
  CHECK(coll_strerror((coll_status_t)999) != NULL &&
        coll_strerror((coll_status_t)999)[0] != '\0');
  CHECK(coll_status_name((coll_status_t)-1) != NULL &&
        coll_status_name((coll_status_t)-1)[0] != '\0');
  CHECK(coll_set_last_error(COLL_ERR_PEER_LOST, "rank %d lost", 3) ==
        COLL_ERR_PEER_LOST);
  CHECK(strcmp(coll_last_error(), "rank 3 lost") == 0);
  bi_end("tables");
}

/* The error text is per thread: a fresh thread sees none of ours. */
static char g_other_err[64];
static void other_thread(int rank, int world, void *arg) {
  (void)rank, (void)world, (void)arg;
  snprintf(g_other_err, sizeof g_other_err, "%s", coll_last_error());
}

static void test_error_text_per_thread(void **state) {
  (void)state;
  assert_int_equal(coll_barrier(NULL), COLL_ERR_INVALID_ARG);
  assert_true(coll_last_error()[0] != '\0');
  strcpy(g_other_err, "unset");
  test_run_ranks(1, other_thread, NULL, RUN_TIMEOUT_MS, "error text thread");
  assert_string_equal(g_other_err, "");
}

/* ---- argument checks -------------------------------------------------- */

typedef struct comms2 {
  coll_comm_t *c[2];
} comms2_t;

/* Buffers for the argument checks; their contents never matter. */
static float g_a[64], g_b[64];

static void allreduce_args(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  coll_request_t *req = NULL;
  /* allreduce / iallreduce */
  BAD(coll_allreduce(NULL, a, b, 4, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_allreduce(c, NULL, b, 4, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_allreduce(c, a, NULL, 4, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_allreduce(c, a, b, SIZE_MAX, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_allreduce(c, a, b, SIZE_MAX / 2, COLL_F32, COLL_SUM, NULL),
      "allreduce");
  BAD(coll_allreduce(c, a, b, 4, COLL_DTYPE_COUNT, COLL_SUM, NULL),
      "allreduce");
  BAD(coll_allreduce(c, a, b, 4, (coll_dtype_t)-1, COLL_SUM, NULL),
      "allreduce");
  BAD(coll_allreduce(c, a, b, 4, COLL_F32, COLL_OP_COUNT, NULL), "allreduce");
  BAD(coll_allreduce(c, a, b, 4, COLL_F32, (coll_op_t)-1, NULL), "allreduce");
  BAD(coll_allreduce(c, a, a + 1, 4, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_allreduce(c, a + 3, a, 4, COLL_F32, COLL_SUM, NULL), "allreduce");
  BAD(coll_iallreduce(c, a, b, 4, COLL_F32, COLL_SUM, NULL, NULL),
      "iallreduce");
  BAD(coll_iallreduce(NULL, a, b, 4, COLL_F32, COLL_SUM, NULL, &req),
      "allreduce");
  BAD(coll_iallreduce(c, a, a + 2, 4, COLL_F32, COLL_SUM, NULL, &req),
      "allreduce");
  /* A refused nonblocking call leaves no request behind. */
  req = (coll_request_t *)a;
  BAD(coll_iallreduce(c, a, b, 4, COLL_DTYPE_COUNT, COLL_SUM, NULL, &req),
      "allreduce");
  CHECK(req == NULL);
  req = (coll_request_t *)a;
  BAD(coll_isend(c, a, 4, COLL_I32, 7, 0, &req), "send");
  CHECK(req == NULL);
  req = (coll_request_t *)a;
  BAD(coll_irecv(c, a, 4, COLL_I32, 0, 0, NULL, &req), "recv");
  CHECK(req == NULL);
  req = (coll_request_t *)a;
  BAD(coll_ibarrier(NULL, &req), "barrier");
  CHECK(req == NULL);
}

static void batch_args(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  coll_buffer_t bufs[2] = {{a, 4, COLL_F32}, {b, 4, COLL_F32}};
  coll_buffer_t nullbuf[1] = {{NULL, 4, COLL_F32}};
  coll_buffer_t baddt[1] = {{a, 4, COLL_DTYPE_COUNT}};
  coll_buffer_t huge[1] = {{a, SIZE_MAX, COLL_F32}};
  /* allreduce_batch */
  BAD(coll_allreduce_batch(NULL, bufs, 2, COLL_SUM, NULL), "allreduce_batch");
  BAD(coll_allreduce_batch(c, NULL, 2, COLL_SUM, NULL), "allreduce_batch");
  BAD(coll_allreduce_batch(c, nullbuf, 1, COLL_SUM, NULL), "allreduce_batch");
  BAD(coll_allreduce_batch(c, baddt, 1, COLL_SUM, NULL), "allreduce_batch");
  BAD(coll_allreduce_batch(c, huge, 1, COLL_SUM, NULL), "allreduce_batch");
  BAD(coll_allreduce_batch(c, bufs, 2, COLL_OP_COUNT, NULL), "allreduce_batch");
  BAD(coll_iallreduce_batch(c, bufs, 2, COLL_SUM, NULL, NULL),
      "iallreduce_batch");
  /* Buffers that share bytes would be reduced twice: refused, for the
   * pairwise check of small batches and the sorted one of large ones. */
  {
    coll_buffer_t ov[2] = {{a, 4, COLL_F32}, {a + 3, 4, COLL_F32}};
    coll_buffer_t same[2] = {{a, 4, COLL_F32}, {a, 4, COLL_F32}};
    coll_buffer_t inside[2] = {{a, 8, COLL_F32}, {(char *)a + 5, 1, COLL_U8}};
    coll_buffer_t many[40];
    coll_buffer_t sum[2] = {{a, SIZE_MAX / 4 / 2, COLL_F32},
                            {b, SIZE_MAX / 4 / 2, COLL_F32}};
    int k;
    BAD(coll_allreduce_batch(c, ov, 2, COLL_SUM, NULL), "overlap");
    BAD(coll_allreduce_batch(c, same, 2, COLL_SUM, NULL),
        "bufs[0] and bufs[1]");
    BAD(coll_allreduce_batch(c, inside, 2, COLL_SUM, NULL), "overlap");
    BAD(coll_allreduce_premul_sum(c, ov, 2, 1.0f, NULL), "overlap");
    for (k = 0; k < 40; k++) {
      many[k].data = a + k; /* one element each: adjacent, disjoint */
      many[k].count = 1;
      many[k].dtype = COLL_F32;
    }
    many[31].count = 2; /* reaches into many[32] */
    BAD(coll_allreduce_batch(c, many, 40, COLL_SUM, NULL),
        "bufs[31] and bufs[32]");
    /* Each buffer fits the address space; together they do not. */
    BAD(coll_allreduce_batch(c, sum, 2, COLL_SUM, NULL), "in all");
  }

  /* allreduce_premul_sum */
  BAD(coll_allreduce_premul_sum(NULL, bufs, 2, 1.0f, NULL), "premul");
  BAD(coll_allreduce_premul_sum(c, NULL, 2, 1.0f, NULL), "premul");
  BAD(coll_allreduce_premul_sum(c, nullbuf, 1, 1.0f, NULL), "premul");
  BAD(coll_allreduce_premul_sum(c, baddt, 1, 1.0f, NULL), "premul");
  BAD(coll_allreduce_premul_sum(c, bufs, 2, NAN, NULL), "premul");
  BAD(coll_allreduce_premul_sum(c, bufs, 2, INFINITY, NULL), "premul");
  BAD(coll_iallreduce_premul_sum(c, bufs, 2, 1.0f, NULL, NULL), "premul");
}

/* Broadcast and reduce (this comm is rank 0 of 2). */
static void rooted_args(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  coll_request_t *req = NULL;
  /* broadcast */
  BAD(coll_broadcast(NULL, a, 4, COLL_F32, 0, NULL), "broadcast");
  BAD(coll_broadcast(c, NULL, 4, COLL_F32, 0, NULL), "broadcast");
  BAD(coll_broadcast(c, a, SIZE_MAX, COLL_F32, 0, NULL), "broadcast");
  BAD(coll_broadcast(c, a, 4, COLL_DTYPE_COUNT, 0, NULL), "broadcast");
  BAD(coll_broadcast(c, a, 4, COLL_F32, -1, NULL), "broadcast");
  BAD(coll_broadcast(c, a, 4, COLL_F32, 2, NULL), "broadcast");
  BAD(coll_broadcast(c, a, 4, COLL_F32, INT_MAX, NULL), "broadcast");
  BAD(coll_ibroadcast(c, a, 4, COLL_F32, 0, NULL, NULL), "ibroadcast");
  BAD(coll_ibroadcast(c, a, 4, COLL_F32, 5, NULL, &req), "broadcast");

  /* reduce (this comm is rank 0: recv needed when root is 0) */
  BAD(coll_reduce(NULL, a, b, 4, COLL_F32, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_reduce(c, NULL, b, 4, COLL_F32, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_reduce(c, a, NULL, 4, COLL_F32, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_reduce(c, a, b, 4, COLL_F32, COLL_SUM, -1, NULL), "reduce");
  BAD(coll_reduce(c, a, b, 4, COLL_F32, COLL_SUM, 2, NULL), "reduce");
  BAD(coll_reduce(c, a, b, 4, COLL_F32, COLL_OP_COUNT, 0, NULL), "reduce");
  BAD(coll_reduce(c, a, b, 4, COLL_DTYPE_COUNT, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_reduce(c, a, b, SIZE_MAX, COLL_F32, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_reduce(c, a, a + 2, 4, COLL_F32, COLL_SUM, 0, NULL), "reduce");
  BAD(coll_ireduce(c, a, b, 4, COLL_F32, COLL_SUM, 0, NULL, NULL), "ireduce");
}

static void gather_scatter_args(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  /* allgather (world 2: recv holds 2 blocks) */
  BAD(coll_allgather(NULL, a, b, 4, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, NULL, b, 4, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, a, NULL, 4, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, a, b, 4, COLL_DTYPE_COUNT, NULL), "allgather");
  BAD(coll_allgather(c, a, b, SIZE_MAX, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, a, b, SIZE_MAX / 8, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, a + 1, a, 4, COLL_F32, NULL), "allgather");
  BAD(coll_allgather(c, a + 6, a, 4, COLL_F32, NULL), "allgather");
  BAD(coll_iallgather(c, a, b, 4, COLL_F32, NULL, NULL), "iallgather");

  /* reduce_scatter (world 2: send holds 2 blocks) */
  BAD(coll_reduce_scatter(NULL, a, b, 4, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, NULL, b, 4, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, NULL, 4, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, b, 4, COLL_F32, COLL_OP_COUNT, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, b, 4, (coll_dtype_t)99, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, b, SIZE_MAX / 8, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, a + 1, 4, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_reduce_scatter(c, a, a + 6, 4, COLL_F32, COLL_SUM, NULL),
      "reduce_scatter");
  BAD(coll_ireduce_scatter(c, a, b, 4, COLL_F32, COLL_SUM, NULL, NULL),
      "ireduce_scatter");
}

static void other_args(coll_comm_t *c) {
  float *a = g_a;
  coll_request_t *req = NULL;
  coll_dtype_t agreed;
  int part;
  /* barrier */
  BAD(coll_barrier(NULL), "barrier");
  BAD(coll_ibarrier(NULL, &req), "barrier");
  BAD(coll_ibarrier(c, NULL), "ibarrier");

  /* negotiate_dtype */
  BAD(coll_negotiate_dtype(NULL, COLL_F32, &agreed), "negotiate_dtype");
  BAD(coll_negotiate_dtype(c, COLL_F32, NULL), "negotiate_dtype");
  BAD(coll_negotiate_dtype(c, COLL_DTYPE_COUNT, &agreed), "negotiate_dtype");
  BAD(coll_inegotiate_dtype(c, COLL_F32, &agreed, NULL), "inegotiate_dtype");

  /* federated_average */
  BAD(coll_federated_average(NULL, a, 4, 100, &part), "federated_average");
  BAD(coll_federated_average(c, NULL, 4, 100, &part), "federated_average");
  BAD(coll_federated_average(c, a, 4, -1, &part), "federated_average");
  BAD(coll_federated_average(c, a, SIZE_MAX, 100, &part), "federated_average");
  BAD(coll_ifederated_average(c, a, 4, 100, &part, NULL), "ifederated_average");

  /* requests */
  BAD(coll_wait(NULL), "wait");
  {
    int done = 0;
    BAD(coll_test(NULL, &done), "test");
  }
}

static void p2p_args(coll_comm_t *c) {
  int32_t a[16];
  size_t got;
  coll_request_t *req = NULL;
  memset(a, 0, sizeof a);
  BAD(coll_send(NULL, a, 4, COLL_I32, 1, 0), "send");
  BAD(coll_send(c, NULL, 4, COLL_I32, 1, 0), "send");
  BAD(coll_send(c, a, 4, COLL_DTYPE_COUNT, 1, 0), "send");
  BAD(coll_send(c, a, SIZE_MAX, COLL_I32, 1, 0), "send");
  BAD(coll_send(c, a, 4, COLL_I32, -1, 0), "send");
  BAD(coll_send(c, a, 4, COLL_I32, 2, 0), "send");
  BAD(coll_send(c, a, 4, COLL_I32, 0, 0), "send"); /* peer == self */
  BAD(coll_send(c, a, 4, COLL_I32, 1, COLL_TAG_RESERVED), "send");
  BAD(coll_send(c, a, 4, COLL_I32, 1, 0xFFFFFFFFu), "send");
  BAD(coll_recv(NULL, a, 4, COLL_I32, 1, 0, &got), "recv");
  BAD(coll_recv(c, NULL, 4, COLL_I32, 1, 0, &got), "recv");
  BAD(coll_recv(c, a, 4, (coll_dtype_t)-2, 1, 0, &got), "recv");
  BAD(coll_recv(c, a, SIZE_MAX / 2, COLL_I32, 1, 0, &got), "recv");
  BAD(coll_recv(c, a, 4, COLL_I32, -1, 0, &got), "recv");
  BAD(coll_recv(c, a, 4, COLL_I32, 7, 0, &got), "recv");
  BAD(coll_recv(c, a, 4, COLL_I32, 0, 0, &got), "recv");
  BAD(coll_recv(c, a, 4, COLL_I32, 1, COLL_TAG_RESERVED + 5, &got), "recv");
  BAD(coll_isend(c, a, 4, COLL_I32, 1, 0, NULL), "isend");
  BAD(coll_isend(c, a, 4, COLL_I32, 0, 0, &req), "send");
  BAD(coll_isend(c, a, 4, COLL_I32, 1, COLL_TAG_RESERVED, &req), "send");
  BAD(coll_irecv(c, a, 4, COLL_I32, 1, 0, &got, NULL), "irecv");
  BAD(coll_irecv(c, a, 4, COLL_I32, 2, 0, &got, &req), "recv");
  BAD(coll_irecv(c, a, 4, COLL_I32, 1, 0x80000001u, &got, &req), "recv");
}

static void test_argument_checks(void **state) {
  comms2_t cc;
  (void)state;
  bi_begin();
  assert_int_equal(test_inproc_comms(2, SHORT_TIMEOUT_MS, cc.c), 0);
  /* Every call returns before talking to a peer, so one thread suffices;
   * a wrongly accepted collective fails after the comm's short timeout. */
  allreduce_args(cc.c[0]);
  batch_args(cc.c[0]);
  rooted_args(cc.c[0]);
  gather_scatter_args(cc.c[0]);
  other_args(cc.c[0]);
  p2p_args(cc.c[0]);
  test_destroy_comms(2, cc.c);
  bi_end("argument checks");
}

/* coll_test with a NULL `done`, on a real request. */
static void test_test_null_done(void **state) {
  coll_comm_t *c[1];
  coll_request_t *req = NULL;
  (void)state;
  bi_begin();
  assert_int_equal(test_inproc_comms(1, SHORT_TIMEOUT_MS, c), 0);
  assert_int_equal(coll_ibarrier(c[0], &req), COLL_OK);
  BAD(coll_test(req, NULL), "test");
  EXPECT(coll_wait(req), COLL_OK, "");
  test_destroy_comms(1, c);
  bi_end("coll_test(req, NULL)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tables),
      cmocka_unit_test(test_error_text_per_thread),
      cmocka_unit_test(test_argument_checks),
      cmocka_unit_test(test_test_null_done),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
