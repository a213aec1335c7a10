/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_comm.c: per-rank NCCL comms on the stand-in: unique ids, init
 * checks, every collective against a host reference, premul-sum, buffer
 * kinds, and NOT_AVAILABLE when NCCL, the driver or a device is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/env_init.h"
#include "bootstrap/store/store.h"
#include "cuda/gpu_table.h"
#include "nccl/nccl_env.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define W 3
#define N 257

static void test_unique_id_round_trip(void **state) {
  coll_unique_id_t a, b, c;
  unsigned char wire[COLL_UNIQUE_ID_BYTES];
  coll_comm_t *comms[2] = {0};
  (void)state;
  assert_int_equal(sizeof(coll_unique_id_t), COLL_UNIQUE_ID_BYTES);
  assert_int_equal(coll_unique_id_create(&a), COLL_OK);
  assert_int_equal(coll_unique_id_create(&b), COLL_OK);
  assert_memory_not_equal(&a, &b, sizeof a);
  memcpy(wire, &a, sizeof wire); /* through bytes, as a launcher ships it */
  memcpy(&c, wire, sizeof c);
  assert_memory_equal(&a, &c, sizeof a);
  assert_int_equal(coll_unique_id_create(NULL), COLL_ERR_INVALID_ARG);
  assert_int_equal(nt_rank_comms(2, 0, comms), 0);
  coll_comm_destroy(comms[0]);
  coll_comm_destroy(comms[1]);
}

static void test_init_validation(void **state) {
  coll_unique_id_t id;
  coll_comm_t *c = (coll_comm_t *)(uintptr_t)1;
  standin_stats_t st;
  (void)state;
  assert_int_equal(coll_unique_id_create(&id), COLL_OK);
  assert_int_equal(coll_comm_init_rank(2, 2, &id, NULL, &c),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "rank 2 is out of range"));
  assert_null(c);
  assert_int_equal(coll_comm_init_rank(-1, 2, &id, NULL, &c),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_comm_init_rank(0, 0, &id, NULL, &c),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "world 0"));
  assert_int_equal(coll_comm_init_rank(0, 1, NULL, NULL, &c),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_comm_init_rank(0, 1, &id, NULL, NULL),
                   COLL_ERR_INVALID_ARG);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  /* World 1 on device 2: the caller's device is unchanged. */
  nt_set_device(2);
  assert_int_equal(coll_comm_init_rank(0, 1, &id, NULL, &c), COLL_OK);
  assert_int_equal(nt_current_device(), 2);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
}

struct coll_arg {
  coll_comm_t **comms;
  float *a[W], *b[W], *rs[W], *pr[W];
  int32_t *ia[W];
  double *da[W];
  coll_status_t s[W][9];
  int bad[W][9]; /* the result of step j on rank r differs */
};

#define PER (N / W)

/* Every collective on every rank, each result checked by the rank against
 * a host formula (recorded, asserted after the join). Rank r's data is
 * r * 1000 + k. */
static void colls_rank(int rank, int world, void *p) {
  struct coll_arg *x = p;
  coll_comm_t *c = x->comms[rank];
  coll_buffer_t bufs[3] = {{x->a[rank], N, COLL_F32},
                           {x->ia[rank], N, COLL_I32},
                           {x->da[rank], N, COLL_F64}};
  int left = (rank + world - 1) % world, right = (rank + 1) % world;
  size_t received = 0;
  int k, j, *bad = x->bad[rank];
  coll_status_t *s = x->s[rank];
  for (k = 0; k < N; k++) {
    x->a[rank][k] = (float)(rank * 1000 + k);
    x->ia[rank][k] = rank * 7 - k;
    x->da[rank][k] = -rank;
  }
  s[0] = coll_allreduce(c, x->a[rank], x->b[rank], N, COLL_F32, COLL_SUM, NULL);
  for (k = 0; k < N; k++) bad[0] |= x->b[rank][k] != 3000.0f + 3.0f * k;
  s[1] = coll_allreduce_batch(c, bufs, 3, COLL_MAX, NULL);
  for (k = 0; k < N; k++)
    bad[1] |= x->a[rank][k] != 2000.0f + k || x->ia[rank][k] != 14 - k ||
              x->da[rank][k] != 0.0;
  for (k = 0; k < N; k++) {
    x->a[rank][k] = (float)(rank * 1000 + k);
    x->ia[rank][k] = rank * 100 + k;
  }
  s[2] = coll_broadcast(c, x->ia[rank], N, COLL_I32, 2, NULL);
  for (k = 0; k < N; k++) bad[2] |= x->ia[rank][k] != 200 + k;
  s[3] = coll_allgather(c, x->a[rank], x->b[rank], PER, COLL_F32, NULL);
  for (j = 0; j < world; j++)
    for (k = 0; k < PER; k++)
      bad[3] |= x->b[rank][j * PER + k] != j * 1000.0f + k;
  s[4] = coll_reduce_scatter(c, x->a[rank], x->rs[rank], PER, COLL_F32,
                             COLL_SUM, NULL);
  for (k = 0; k < PER; k++)
    bad[4] |= x->rs[rank][k] != 3000.0f + 3.0f * (float)(rank * PER + k);
  s[5] = coll_reduce(c, x->a[rank], rank == 1 ? x->b[rank] : NULL, N, COLL_F32,
                     COLL_MIN, 1, NULL);
  for (k = 0; rank == 1 && k < N; k++) bad[5] |= x->b[rank][k] != (float)k;
  s[6] = coll_barrier(c);
  /* A ring of messages: even ranks send first, odd ones receive first
   * (NCCL carries no tags: tag 0). */
  if (rank % 2 == 0) {
    s[7] = coll_send(c, x->a[rank], N, COLL_F32, right, 0);
    s[8] = coll_recv(c, x->pr[rank], N, COLL_F32, left, 0, &received);
  } else {
    s[8] = coll_recv(c, x->pr[rank], N, COLL_F32, left, 0, &received);
    s[7] = coll_send(c, x->a[rank], N, COLL_F32, right, 0);
  }
  bad[8] |= received != N;
  for (k = 0; k < N; k++) bad[8] |= x->pr[rank][k] != left * 1000.0f + k;
}

static void test_collectives(void **state) {
  coll_comm_t *comms[W] = {0};
  struct coll_arg x;
  int r, j;
  (void)state;
  memset(&x, 0, sizeof x);
  x.comms = comms;
  assert_int_equal(nt_rank_comms(W, 0, comms), 0);
  for (r = 0; r < W; r++) {
    x.a[r] = standin_dev_alloc(r, N * sizeof(float));
    x.b[r] = standin_dev_alloc(r, N * sizeof(float));
    x.rs[r] = standin_dev_alloc(r, PER * sizeof(float));
    x.pr[r] = standin_dev_alloc(r, N * sizeof(float));
    x.ia[r] = standin_dev_alloc(r, N * sizeof(int32_t));
    x.da[r] = standin_dev_alloc(r, N * sizeof(double));
  }
  test_run_ranks(W, colls_rank, &x, 20000, "nccl collectives");
  for (r = 0; r < W; r++)
    for (j = 0; j < 9; j++) {
      if (x.s[r][j] != COLL_OK)
        fail_msg("rank %d step %d: status %d", r, j, x.s[r][j]);
      if (x.bad[r][j]) fail_msg("rank %d step %d: wrong result", r, j);
    }
  for (r = 0; r < W; r++) {
    coll_comm_destroy(comms[r]);
    standin_dev_free(x.a[r]);
    standin_dev_free(x.b[r]);
    standin_dev_free(x.rs[r]);
    standin_dev_free(x.pr[r]);
    standin_dev_free(x.ia[r]);
    standin_dev_free(x.da[r]);
  }
  assert_true(nt_no_misuse());
}

struct premul_arg {
  coll_comm_t **comms;
  float *a[W], *b[W];
  coll_status_t s[W];
};

static void premul_rank(int rank, int world, void *p) {
  struct premul_arg *x = p;
  coll_buffer_t bufs[2] = {{x->a[rank], N, COLL_F32},
                           {x->b[rank], 5, COLL_F32}};
  (void)world;
  x->s[rank] = coll_allreduce_premul_sum(x->comms[rank], bufs, 2,
                                         0.5f * (float)(rank + 1), NULL);
}

static void test_premul_sum(void **state) {
  coll_comm_t *comms[W] = {0};
  struct premul_arg x;
  standin_stats_t st, st2;
  int r, k;
  (void)state;
  memset(&x, 0, sizeof x);
  x.comms = comms;
  assert_int_equal(nt_rank_comms(W, 0, comms), 0);
  for (r = 0; r < W; r++) {
    x.a[r] = standin_dev_alloc(r, N * sizeof(float));
    x.b[r] = standin_dev_alloc(r, 5 * sizeof(float));
    for (k = 0; k < N; k++) x.a[r][k] = (float)k;
    for (k = 0; k < 5; k++) x.b[r][k] = 2.0f;
  }
  standin_stats(&st);
  test_run_ranks(W, premul_rank, &x, 10000, "premul");
  standin_stats(&st2);
  for (r = 0; r < W; r++) {
    assert_int_equal(x.s[r], COLL_OK);
    /* sum of 0.5(r+1) over 3 ranks = 3 */
    for (k = 0; k < N; k++) assert_float_equal(x.a[r][k], 3.0f * k, 1e-4);
    assert_float_equal(x.b[r][0], 6.0f, 1e-6);
  }
  assert_int_equal(st2.ops_created - st.ops_created, W);
  assert_int_equal(st2.ops_live, 0);
  assert_int_equal(st2.group_ends - st.group_ends, W); /* one batch launch */
  for (r = 0; r < W; r++) {
    coll_comm_destroy(comms[r]);
    standin_dev_free(x.a[r]);
    standin_dev_free(x.b[r]);
  }
}

/* Refusals and failures on world-1 comms: wrong dtype (refused by libcoll,
 * the comm goes on); an argument NCCL refuses (NCCL keeps it as the comm's
 * error, so it sticks: N8 of the second review), and any other NCCL error
 * (sticky too: the comm is aborted, H5 of the first review); the op is
 * destroyed either way. */
static void test_premul_errors(void **state) {
  coll_comm_t *c = NULL;
  float *f = NULL;
  int32_t *h = NULL;
  coll_buffer_t bad[2], good[1];
  standin_stats_t st;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 0, &c), 0);
  f = standin_dev_alloc(0, 8 * sizeof(float));
  h = standin_dev_alloc(0, 8 * sizeof(int32_t));
  bad[0] = (coll_buffer_t){f, 8, COLL_F32};
  bad[1] = (coll_buffer_t){h, 8, COLL_I32};
  good[0] = bad[0];
  assert_int_equal(coll_allreduce_premul_sum(c, bad, 2, 2.0f, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "f16, bf16, f32 or f64"));
  assert_non_null(strstr(coll_last_error(), "buffer 1 is i32"));
  /* Refused by libcoll: the comm still works. */
  f[0] = 1.5f;
  assert_int_equal(coll_allreduce_premul_sum(c, good, 1, 2.0f, NULL), COLL_OK);
  assert_float_equal(f[0], 3.0f, 0);
  standin_fail_next(ncclInvalidArgument);
  assert_int_equal(coll_allreduce_premul_sum(c, good, 1, 2.0f, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "invalid argument"));
  standin_stats(&st);
  assert_int_equal(st.ops_created, 2);
  assert_int_equal(st.ops_live, 0);
  assert_int_equal(coll_allreduce(c, f, f, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "invalid argument"));
  assert_non_null(strstr(coll_last_error(), "was aborted"));
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  assert_int_equal(nt_rank_comms(1, 0, &c), 0);
  standin_fail_next(ncclInternalError);
  assert_int_equal(coll_allreduce_premul_sum(c, good, 1, 2.0f, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "internal error"));
  assert_int_equal(coll_allreduce(c, f, f, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_BACKEND);
  assert_non_null(strstr(coll_last_error(), "internal error"));
  assert_non_null(strstr(coll_last_error(), "was aborted"));
  standin_stats(&st);
  assert_int_equal(st.revokes, 2);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_int_equal(st.destroy_refused, 0);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.ops_live, 0);
  standin_dev_free(f);
  standin_dev_free(h);
  assert_true(nt_no_misuse());
}

static void test_premul_old_nccl(void **state) {
  coll_comm_t *c = NULL;
  float *f;
  coll_buffer_t b;
  (void)state;
  standin_uninstall();
  nt_install(1, 0, 21003); /* 2.10.3: before pre-multiplied sums */
  assert_int_equal(nt_rank_comms(1, 0, &c), 0);
  f = standin_dev_alloc(0, sizeof(float));
  b = (coll_buffer_t){f, 1, COLL_F32};
  assert_int_equal(coll_allreduce_premul_sum(c, &b, 1, 2.0f, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "2.11"));
  assert_non_null(strstr(coll_last_error(), "2.10.3"));
  /* Everything else still works there. */
  assert_int_equal(coll_allreduce(c, f, f, 1, COLL_F32, COLL_AVG, NULL),
                   COLL_OK);
  coll_comm_destroy(c);
  standin_dev_free(f);
}

static void test_buffer_kinds(void **state) {
  const coll_nccl_table_t *t = coll__nccl_table();
  coll_comm_t *c = NULL;
  float *host = calloc(4, sizeof(float)), *dev1, *dev0;
  void *pinned = NULL;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 0, &c), 0); /* rank 0: device 0 */
  dev0 = standin_dev_alloc(0, 4 * sizeof(float));
  dev1 = standin_dev_alloc(1, 4 * sizeof(float));
  assert_int_equal(t->cuda_host_alloc(&pinned, 16, 0), cudaSuccess);
  assert_int_equal(coll_allreduce(c, host, host, 4, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "pageable host memory"));
  assert_int_equal(coll_allreduce(c, dev0, pinned, 4, COLL_F32, COLL_SUM, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "pinned host memory"));
  assert_int_equal(coll_broadcast(c, dev1, 4, COLL_F32, 0, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "device 1"));
  assert_int_equal(coll_broadcast(c, dev0, 4, COLL_F32, 1, NULL),
                   COLL_ERR_INVALID_ARG); /* root out of range */
  assert_int_equal(coll_broadcast(c, dev0, 4, COLL_F32, 0, NULL), COLL_OK);
  /* A stream of the comm's device. */
  {
    cudaStream_t st = NULL;
    nt_set_device(0);
    assert_int_equal(t->cuda_stream_create(&st), cudaSuccess);
    dev0[0] = 4.0f;
    assert_int_equal(coll_allreduce(c, dev0, dev0, 4, COLL_F32, COLL_AVG, st),
                     COLL_OK);
    assert_float_equal(dev0[0], 4.0f, 0);
  }
  coll_comm_destroy(c);
  t->cuda_free_host(pinned);
  standin_dev_free(dev0);
  standin_dev_free(dev1);
  free(host);
  assert_true(nt_no_misuse());
}

static void expect_unavailable(const char *text) {
  coll_unique_id_t id;
  assert_int_equal(coll_unique_id_create(&id), COLL_ERR_NOT_AVAILABLE);
  if (strstr(coll_last_error(), text) == NULL)
    fail_msg("\"%s\" lacks \"%s\"", coll_last_error(), text);
}

static void test_not_available(void **state) {
  standin_config_t cfg;
  (void)state;
  standin_uninstall();
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 1;
  cfg.no_nccl = 1;
  standin_install(&cfg);
  expect_unavailable("NCCL could not be loaded");
  standin_uninstall();
  cfg.no_nccl = 0;
  cfg.no_driver = 1;
  standin_install(&cfg);
  expect_unavailable("no usable CUDA driver");
  standin_uninstall();
  cfg.no_driver = 0;
  cfg.ndev = 0;
  standin_install(&cfg);
  expect_unavailable("no CUDA device");
  standin_uninstall();
  /* The real loader, pointed at a library that is not there. */
  setenv("COLL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  coll__nccl_table_install(NULL);
  expect_unavailable("/nonexistent/libnccl.so.2");
  unsetenv("COLL_NCCL_LIBRARY");
  coll__nccl_table_install(NULL);
  nt_install(1, 0, 0); /* for nt_teardown */
}

static void test_env_selection(void **state) {
  standin_config_t cfg;
  (void)state;
  setenv("COLL_BACKEND", "cpu", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_CPU);
  setenv("COLL_BACKEND", "nccl", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_NCCL);
  setenv("COLL_BACKEND", "auto", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_ASK);
  standin_uninstall();
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 1;
  cfg.no_driver = 1;
  standin_install(&cfg);
  coll_set_last_error(COLL_OK, NULL);
  /* auto: CPU, quietly */
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_CPU);
  assert_string_equal(coll_last_error(), "");
  setenv("COLL_BACKEND", "nccl", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  assert_non_null(strstr(coll_last_error(), "COLL_BACKEND=nccl"));
  unsetenv("COLL_BACKEND");
}

struct store_arg {
  int port;
  coll_comm_t *comms[2];
  float *buf[2];
  coll_status_t s[2];
};

/* Rank 0 makes the id and sets it in the store; rank 1 gets it; the comm
 * then works. Each rank thread makes its own device current first (two
 * ranks of one NCCL comm never share a device). */
static void store_rank(int rank, int world, void *p) {
  struct store_arg *a = p;
  coll_store_t *st = NULL;
  coll_store_ops_t ops;
  nt_set_device(rank);
  a->s[rank] = coll__store_connect("127.0.0.1", a->port, NULL, 10000, &st);
  coll__store_client_ops(st, &ops);
  if (a->s[rank] == COLL_OK)
    a->s[rank] =
        coll__env_nccl_comm(&ops, rank, world, NULL, 10000, &a->comms[rank]);
  if (a->s[rank] == COLL_OK)
    a->s[rank] = coll_allreduce(a->comms[rank], a->buf[rank], a->buf[rank], 2,
                                COLL_F32, COLL_SUM, NULL);
  coll__store_close(st);
}

static void test_comm_from_store(void **state) {
  coll_store_server_t *srv = NULL;
  coll_store_t *st = NULL;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  struct store_arg a;
  float *on3;
  int r;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(coll__store_server_start("127.0.0.1", 0, NULL, &srv),
                   COLL_OK);
  a.port = coll__store_server_port(srv);
  for (r = 0; r < 2; r++) {
    a.buf[r] = standin_dev_alloc(r, 2 * sizeof(float));
    a.buf[r][0] = (float)r;
    a.buf[r][1] = 10.0f;
  }
  test_run_ranks(2, store_rank, &a, 20000, "nccl comm from store");
  for (r = 0; r < 2; r++) {
    if (a.s[r] != COLL_OK) fail_msg("rank %d: status %d", r, a.s[r]);
    assert_float_equal(a.buf[r][0], 1.0f, 0);
    assert_float_equal(a.buf[r][1], 20.0f, 0);
    coll_comm_destroy(a.comms[r]);
    standin_dev_free(a.buf[r]);
  }
  coll__store_server_stop(srv);
  /* LOCAL_RANK picks the device (7 % 4 = 3); the caller's stays. */
  assert_int_equal(coll__store_server_start("127.0.0.1", 0, NULL, &srv),
                   COLL_OK);
  assert_int_equal(
      coll__store_connect("127.0.0.1", coll__store_server_port(srv), NULL,
                          10000, &st),
      COLL_OK);
  coll__store_client_ops(st, &ops);
  setenv("LOCAL_RANK", "7", 1);
  nt_set_device(0);
  assert_int_equal(coll__env_nccl_comm(&ops, 0, 1, NULL, 10000, &c), COLL_OK);
  unsetenv("LOCAL_RANK");
  assert_int_equal(nt_current_device(), 0);
  on3 = standin_dev_alloc(3, sizeof(float));
  assert_int_equal(coll_allreduce(c, on3, on3, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  coll_comm_destroy(c);
  standin_dev_free(on3);
  coll__store_close(st);
  coll__store_server_stop(srv);
  assert_true(nt_no_misuse());
}

/* Without the stand-in: whatever this machine has, the answer is OK or
 * NOT_AVAILABLE naming the missing piece, never a crash. */
static void test_real_libraries(void **state) {
  coll_unique_id_t id;
  coll_status_t s;
  (void)state;
  standin_uninstall();
  s = coll_unique_id_create(&id);
  if (s != COLL_OK) {
    assert_int_equal(s, COLL_ERR_NOT_AVAILABLE);
    assert_non_null(strstr(coll_last_error(), "unique_id_create: "));
    print_message("real libraries: %s\n", coll_last_error());
  }
  nt_install(1, 0, 0); /* for nt_teardown */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unique_id_round_trip, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_init_validation, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_collectives, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(test_premul_sum, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(test_premul_errors, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_premul_old_nccl, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_buffer_kinds, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_not_available, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_env_selection, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_comm_from_store, nt_setup4,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_real_libraries, nt_setup4,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
