/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_staging.c: "device" buffers (the stand-in says which pointers
 * are device memory) on CPU comms over the in-process transport: staged
 * through pinned segments, results back in device memory. Several sizes
 * cross the 4 MiB segment, so the pipeline runs more than one slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/staging.h"
#include "cuda/staging_pool.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define W 3
/* With 64 KiB segments (the default 4 MiB would make the test slow). */
#define SEG NT_STAGE_SEG
#define BIG ((size_t)40 * 1000) /* floats: 160 KB, three segments */
#define PER ((size_t)11 * 1000) /* per-rank block: three segments */

static void test_work_on_device(void **state) {
  float host[4] = {0}, *dev = standin_dev_alloc(1, 16);
  coll_work_t w;
  coll_buffer_t b[2] = {{host, 4, COLL_F32}, {dev, 4, COLL_F32}};
  (void)state;
  memset(&w, 0, sizeof w);
  w.kind = COLL_WORK_ALLREDUCE;
  w.send = host;
  w.recv = host;
  assert_int_equal(coll__work_on_device(&w), 0);
  w.recv = dev;
  assert_int_equal(coll__work_on_device(&w), 1);
  memset(&w, 0, sizeof w);
  w.kind = COLL_WORK_ALLREDUCE;
  w.bufs = b;
  w.nbufs = 1;
  assert_int_equal(coll__work_on_device(&w), 0);
  w.nbufs = 2;
  assert_int_equal(coll__work_on_device(&w), 1);
  w.nbufs = 0;
  w.kind = COLL_WORK_BARRIER;
  assert_int_equal(coll__work_on_device(&w), 0);
  standin_dev_free(dev);
}

struct st_arg {
  coll_comm_t **comms;
  float *big[W], *out[W], *small[W];
  float *host_small[W];
  float *ag_send[W], *ag_recv[W], *rs_send[W], *rs_recv[W];
  float *rd_recv[W];
  float *p2p_in[W];
  coll_status_t s[W][8];
  int bad[W][8];
};

/* Rank r's element k of the big buffer: r + (k % 1000) / 4 (exact in f32). */
static float bigval(int r, size_t k) {
  return (float)r + (float)(k % 1000) / 4;
}

static void staging_rank(int rank, int world, void *p) {
  struct st_arg *x = p;
  coll_comm_t *c = x->comms[rank];
  coll_status_t *s = x->s[rank];
  int *bad = x->bad[rank], j;
  size_t k;
  coll_buffer_t batch[2] = {{x->host_small[rank], 100, COLL_F32},
                            {x->small[rank], 100, COLL_F32}};
  for (k = 0; k < BIG; k++) x->big[rank][k] = bigval(rank, k);
  /* Out of place, device to device, three segments. */
  s[0] = coll_allreduce(c, x->big[rank], x->out[rank], BIG, COLL_F32, COLL_SUM,
                        NULL);
  for (k = 0; k < BIG; k++)
    bad[0] |= x->out[rank][k] != 3.0f + 3.0f * (float)(k % 1000) / 4;
  for (k = 0; k < BIG; k++) bad[0] |= x->big[rank][k] != bigval(rank, k);
  /* A batch mixing host and device buffers, as premul-sum. */
  for (k = 0; k < 100; k++) {
    x->host_small[rank][k] = (float)k;
    x->small[rank][k] = 1.0f;
  }
  s[1] = coll_allreduce_premul_sum(c, batch, 2, (float)(rank + 1), NULL);
  for (k = 0; k < 100; k++)
    bad[1] |= x->host_small[rank][k] != 6.0f * k || x->small[rank][k] != 6.0f;
  /* Broadcast from rank 1 in place, big. */
  s[2] = coll_broadcast(c, x->big[rank], BIG, COLL_F32, 1, NULL);
  for (k = 0; k < BIG; k++) bad[2] |= x->big[rank][k] != bigval(1, k);
  /* Allgather and reduce-scatter, per-rank blocks over two segments. */
  for (k = 0; k < PER; k++) x->ag_send[rank][k] = (float)(rank * 10 + k % 7);
  s[3] = coll_allgather(c, x->ag_send[rank], x->ag_recv[rank], PER, COLL_F32,
                        NULL);
  for (j = 0; j < world; j++)
    for (k = 0; k < PER; k++)
      bad[3] |= x->ag_recv[rank][j * PER + k] != (float)(j * 10 + k % 7);
  for (k = 0; k < (size_t)world * PER; k++)
    x->rs_send[rank][k] = (float)(rank + k / PER);
  s[4] = coll_reduce_scatter(c, x->rs_send[rank], x->rs_recv[rank], PER,
                             COLL_F32, COLL_SUM, NULL);
  for (k = 0; k < PER; k++) bad[4] |= x->rs_recv[rank][k] != 3.0f + 3.0f * rank;
  /* Reduce to root 2: off the root, recv keeps its bytes. */
  for (k = 0; k < 100; k++) x->rd_recv[rank][k] = -1.0f;
  s[5] = coll_reduce(c, x->small[rank], x->rd_recv[rank], 100, COLL_F32,
                     COLL_MAX, 2, NULL);
  for (k = 0; k < 100; k++)
    bad[5] |= x->rd_recv[rank][k] != (rank == 2 ? 6.0f : -1.0f);
  s[6] = coll_barrier(c);
  /* Point-to-point around the ring with device buffers on both ends; even
   * ranks send first, odd ranks receive first, so the blocking calls meet. */
  {
    size_t got = 0;
    int to = (rank + 1) % world, from = (rank + world - 1) % world;
    coll_status_t a, b;
    standin_stats_t before, after;
    for (k = 0; k < PER; k++) x->ag_send[rank][k] = (float)(rank * 100 + k % 5);
    coll_barrier(c); /* every rank's copies so far are done */
    standin_stats(&before);
    if (rank % 2 == 0) {
      a = coll_send(c, x->ag_send[rank], PER, COLL_F32, to, 9);
      b = coll_recv(c, x->p2p_in[rank], PER, COLL_F32, from, 9, &got);
    } else {
      b = coll_recv(c, x->p2p_in[rank], PER, COLL_F32, from, 9, &got);
      a = coll_send(c, x->ag_send[rank], PER, COLL_F32, to, 9);
    }
    s[7] = a != COLL_OK ? a : b;
    standin_stats(&after);
    /* The device buffers went through staging copies, not to the wire. */
    bad[7] |= after.copies <= before.copies;
    bad[7] |= got != PER;
    for (k = 0; k < PER; k++)
      bad[7] |= x->p2p_in[rank][k] != (float)(from * 100 + k % 5);
  }
}

static void run_staging(void) {
  coll_comm_t *comms[W] = {0};
  struct st_arg x;
  standin_stats_t st;
  int r, j;
  memset(&x, 0, sizeof x);
  x.comms = comms;
  assert_int_equal(test_inproc_comms(W, 60000, comms), 0);
  for (r = 0; r < W; r++) {
    int d = r % 2;
    x.big[r] = standin_dev_alloc(d, BIG * sizeof(float));
    x.out[r] = standin_dev_alloc(d, BIG * sizeof(float));
    x.small[r] = standin_dev_alloc(d, 100 * sizeof(float));
    x.rd_recv[r] = standin_dev_alloc(d, 100 * sizeof(float));
    x.host_small[r] = calloc(100, sizeof(float));
    x.ag_send[r] = standin_dev_alloc(d, PER * sizeof(float));
    x.ag_recv[r] = standin_dev_alloc(d, W * PER * sizeof(float));
    x.rs_send[r] = standin_dev_alloc(d, W * PER * sizeof(float));
    x.rs_recv[r] = standin_dev_alloc(d, PER * sizeof(float));
    x.p2p_in[r] = standin_dev_alloc(d, PER * sizeof(float));
  }
  test_run_ranks(W, staging_rank, &x, 60000, "staged collectives");
  for (r = 0; r < W; r++)
    for (j = 0; j < 8; j++) {
      if (x.s[r][j] != COLL_OK)
        fail_msg("rank %d step %d: status %d", r, j, x.s[r][j]);
      if (x.bad[r][j]) fail_msg("rank %d step %d: wrong result", r, j);
    }
  test_destroy_comms(W, comms);
  for (r = 0; r < W; r++) {
    standin_dev_free(x.big[r]);
    standin_dev_free(x.out[r]);
    standin_dev_free(x.small[r]);
    standin_dev_free(x.rd_recv[r]);
    free(x.host_small[r]);
    standin_dev_free(x.ag_send[r]);
    standin_dev_free(x.ag_recv[r]);
    standin_dev_free(x.rs_send[r]);
    standin_dev_free(x.rs_recv[r]);
    standin_dev_free(x.p2p_in[r]);
  }
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0); /* no NCCL comm was ever made */
  assert_true(nt_no_misuse());
}

static void test_staged_collectives(void **state) {
  (void)state;
  run_staging();
}

/* Streams that run copies only when looked at: the staging must wait for
 * its copies before it reads or returns. */
static void test_staged_deferred(void **state) {
  (void)state;
  run_staging();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_work_on_device, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_staged_collectives, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_staged_deferred,
                                      nt_setup_staged_deferred, nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
