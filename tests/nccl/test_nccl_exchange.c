/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_exchange.c: gather, scatter, alltoall and alltoallv on NCCL
 * comms (the stand-in), 1 to 4 ranks on 4 devices, with "device" buffers,
 * against the serial reference of tests/api/exchange_rank.c; and the same
 * calls on a CPU comm refuse device buffers (UNSUPPORTED, nothing sent,
 * the comm still works). A receive from any source is refused on NCCL
 * comms, and into device memory on CPU comms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exchange_rank.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define TIMEOUT_MS 20000

static void *dev_alloc(size_t bytes) {
  return standin_dev_alloc(nt_current_device(), bytes);
}

typedef struct arg {
  coll_comm_t **comms;
  xr_out_t out[4];
} arg_t;

static void nccl_rank(int rank, int world, void *p) {
  arg_t *a = p;
  xr_opts_t o;
  (void)world;
  memset(&o, 0, sizeof o);
  o.alloc = dev_alloc;
  o.release = standin_dev_free;
  o.quick = 1; /* the stand-in copies on one lock: keep it short */
  nt_set_device(rank % 4);
  xr_run(a->comms[rank], &o, &a->out[rank]);
}

static void on_nccl(int world) {
  coll_comm_t *comms[4];
  arg_t a;
  int r;
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(world, TIMEOUT_MS, comms), 0);
  a.comms = comms;
  test_run_ranks(world, nccl_rank, &a, 120000, "nccl exchange");
  for (r = 0; r < world; r++) {
    if (a.out[r].failed) fprintf(stderr, "%s\n", a.out[r].msg);
    assert_int_equal(a.out[r].failed, 0);
    assert_true(a.out[r].checked > 0);
    assert_int_equal(coll_comm_destroy(comms[r]), COLL_OK);
  }
  assert_true(nt_no_misuse());
}

static void nccl_1(void **s) { (void)s, on_nccl(1); }
static void nccl_2(void **s) { (void)s, on_nccl(2); }
static void nccl_3(void **s) { (void)s, on_nccl(3); }
static void nccl_4(void **s) { (void)s, on_nccl(4); }

/* A CPU comm with device buffers: refused before anything is sent. */
static void test_cpu_comm_refuses_device(void **state) {
  coll_comm_t *c[2];
  float host[8] = {0}, back[8];
  float *dev = standin_dev_alloc(0, 64);
  size_t cnt[2] = {1, 1}, dsp[2] = {0, 1};
  coll_request_t *req = (coll_request_t *)host;
  (void)state;
  assert_int_equal(test_inproc_comms(2, TIMEOUT_MS, c), 0);
  assert_int_equal(coll_gather(c[0], dev, host, 2, COLL_F32, 0, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "gather"));
  assert_int_equal(coll_scatter(c[0], host, dev, 2, COLL_F32, 0, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_int_equal(coll_alltoall(c[0], dev, host, 2, COLL_F32, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_int_equal(coll_ialltoallv(c[0], host, cnt, dsp, dev, cnt, dsp,
                                   COLL_F32, NULL, &req),
                   COLL_ERR_UNSUPPORTED);
  assert_null(req);
  assert_non_null(strstr(coll_last_error(), "alltoallv"));
  /* The comm was not touched: an exchange between both ranks works. */
  host[0] = 1.0f;
  host[1] = 2.0f;
  assert_int_equal(coll_iscatter(c[1], NULL, back, 1, COLL_F32, 0, NULL, &req),
                   COLL_OK);
  assert_int_equal(coll_scatter(c[0], host, back + 4, 1, COLL_F32, 0, NULL),
                   COLL_OK);
  assert_int_equal(coll_wait(req), COLL_OK);
  assert_true(back[4] == 1.0f && back[0] == 2.0f);
  test_destroy_comms(2, c);
  standin_dev_free(dev);
}

static void test_recv_any_refused(void **state) {
  coll_comm_t *nc[2], *cc[2];
  float host[4], *dev = standin_dev_alloc(0, 64);
  coll_request_t *req = (coll_request_t *)host;
  int src = -5;
  (void)state;
  assert_int_equal(nt_rank_comms(2, TIMEOUT_MS, nc), 0);
  assert_int_equal(coll_recv_any(nc[0], dev, 4, COLL_F32, 0, &src, NULL),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "recv_any"));
  assert_int_equal(src, -5);
  assert_int_equal(test_inproc_comms(2, TIMEOUT_MS, cc), 0);
  assert_int_equal(coll_irecv_any(cc[0], dev, 4, COLL_F32, 0, &src, NULL, &req),
                   COLL_ERR_UNSUPPORTED);
  assert_null(req);
  assert_non_null(strstr(coll_last_error(), "device memory"));
  test_destroy_comms(2, cc);
  test_destroy_comms(2, nc);
  standin_dev_free(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(nccl_1, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(nccl_2, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(nccl_3, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(nccl_4, nt_setup4, nt_teardown),
      cmocka_unit_test_setup_teardown(test_cpu_comm_refuses_device, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_recv_any_refused, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
