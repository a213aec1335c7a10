/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_stream.c: the stream contract of NCCL comms, on a stand-in
 * that launches like NCCL 2.28 (every multi-rank nonblocking group end
 * answers ncclInProgress and a thread of NCCL's puts the work on the stream
 * later): when an i-form returns COLL_OK its work is on the stream, before
 * whatever the caller queues next (N1 of the second review); the caller's
 * later stream work does not count against the comm's timeout; a
 * cudaStreamPerThread handle, which NCCL's thread would resolve to its own
 * stream, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define N 64
#define ROUNDS 20

struct order_arg {
  coll_comm_t *c[2];
  float *send[2], *recv[2], *host[2];
  coll_status_t s[2], w[2];
  int bad_round[2]; /* the first round that read stale data, or -1 */
  float got[2], want[2];
};

/* Out of place into a poisoned buffer; then, without coll_wait, a copy of
 * the result queued on the same stream and that stream synchronised: the
 * copy must see the sum. */
static void order_rank(int rank, int world, void *p) {
  struct order_arg *a = p;
  const coll_nccl_table_t *t = coll__nccl_table();
  coll_request_t *req = NULL;
  int round, i;
  (void)world;
  nt_set_device(rank);
  a->bad_round[rank] = -1;
  for (round = 0; round < ROUNDS; round++) {
    for (i = 0; i < N; i++) {
      a->send[rank][i] = (float)(rank + 1) * (float)(i + round);
      a->recv[rank][i] = -1.0f;
    }
    a->s[rank] = coll_iallreduce(a->c[rank], a->send[rank], a->recv[rank], N,
                                 COLL_F32, COLL_SUM, NULL, &req);
    if (a->s[rank] != COLL_OK) return;
    t->cuda_memcpy_async(a->host[rank], a->recv[rank], N * sizeof(float),
                         cudaMemcpyDeviceToHost, NULL);
    t->cuda_stream_synchronize(NULL);
    a->w[rank] = coll_wait(req);
    for (i = 0; i < N && a->bad_round[rank] < 0; i++)
      if (a->host[rank][i] != 3.0f * (float)(i + round)) {
        a->bad_round[rank] = round;
        a->got[rank] = a->host[rank][i];
        a->want[rank] = 3.0f * (float)(i + round);
      }
  }
}

static void test_work_on_stream_at_return(void **state) {
  struct order_arg a;
  int r;
  (void)state;
  memset(&a, 0, sizeof a);
  /* NCCL's thread takes its time: the caller's copy would come first. */
  standin_set_launch_delay_us(5000);
  assert_int_equal(nt_rank_comms(2, 10000, a.c), 0);
  for (r = 0; r < 2; r++) {
    a.send[r] = standin_dev_alloc(r, N * sizeof(float));
    a.recv[r] = standin_dev_alloc(r, N * sizeof(float));
    a.host[r] = calloc(N, sizeof(float));
  }
  test_run_ranks(2, order_rank, &a, 30000, "order at return");
  for (r = 0; r < 2; r++) {
    assert_int_equal(a.s[r], COLL_OK);
    assert_int_equal(a.w[r], COLL_OK);
    if (a.bad_round[r] >= 0)
      fail_msg(
          "rank %d round %d: the copy queued after coll_iallreduce read "
          "%g, want %g: the work was not on the stream at return",
          r, a.bad_round[r], a.got[r], a.want[r]);
  }
  for (r = 0; r < 2; r++) {
    coll_comm_destroy(a.c[r]);
    standin_dev_free(a.send[r]);
    standin_dev_free(a.recv[r]);
    free(a.host[r]);
  }
  assert_true(nt_no_misuse());
}

struct late_arg {
  coll_comm_t *c[2];
  float *buf[2];
  coll_status_t s[2], w[2];
  char err[2][256];
};

/* The caller queues 1 s of its own work on the stream right after the
 * call: the comm's 200 ms timeout must not count it. */
static void late_rank(int rank, int world, void *p) {
  struct late_arg *a = p;
  coll_request_t *req = NULL;
  (void)world;
  nt_set_device(rank);
  a->buf[rank][0] = 1.0f;
  a->s[rank] = coll_iallreduce(a->c[rank], a->buf[rank], a->buf[rank], 1,
                               COLL_F32, COLL_SUM, NULL, &req);
  if (a->s[rank] != COLL_OK) return;
  standin_hold(NULL, 1000);
  a->w[rank] = coll_wait(req);
  snprintf(a->err[rank], sizeof a->err[rank], "%s", coll_last_error());
}

static void test_later_work_not_timed(void **state) {
  struct late_arg a;
  int r;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(2, 200, a.c), 0);
  for (r = 0; r < 2; r++) a.buf[r] = standin_dev_alloc(r, sizeof(float));
  test_run_ranks(2, late_rank, &a, 30000, "later stream work");
  for (r = 0; r < 2; r++) {
    assert_int_equal(a.s[r], COLL_OK);
    if (a.w[r] != COLL_OK)
      fail_msg("rank %d: coll_wait: %s: %s", r, coll_status_name(a.w[r]),
               a.err[r]);
    assert_true(a.buf[r][0] == 2.0f);
  }
  for (r = 0; r < 2; r++) {
    coll_comm_destroy(a.c[r]);
    standin_dev_free(a.buf[r]);
  }
  assert_true(nt_no_misuse());
}

/* cudaStreamPerThread names the calling thread's stream; NCCL's launch
 * thread would put the work on its own. Refused, nothing issued. */
static void test_per_thread_stream_refused(void **state) {
  coll_comm_t *c = NULL;
  coll_request_t *req = NULL;
  float *buf;
  standin_stats_t before, after;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 10000, &c), 0);
  buf = standin_dev_alloc(0, sizeof(float));
  standin_stats(&before);
  assert_int_equal(coll_iallreduce(c, buf, buf, 1, COLL_F32, COLL_SUM,
                                   cudaStreamPerThread, &req),
                   COLL_ERR_INVALID_ARG);
  assert_null(req);
  assert_non_null(strstr(coll_last_error(), "cudaStreamPerThread"));
  assert_int_equal(coll_broadcast(c, buf, 1, COLL_F32, 0, cudaStreamPerThread),
                   COLL_ERR_INVALID_ARG);
  standin_stats(&after);
  assert_int_equal(after.collectives, before.collectives);
  /* Not sticky: the comm works on, also on cudaStreamLegacy. */
  buf[0] = 4.0f;
  assert_int_equal(
      coll_allreduce(c, buf, buf, 1, COLL_F32, COLL_SUM, cudaStreamLegacy),
      COLL_OK);
  assert_true(buf[0] == 4.0f);
  coll_comm_destroy(c);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_work_on_stream_at_return,
                                      nt_setup_deferred2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_later_work_not_timed, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_per_thread_stream_refused, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
