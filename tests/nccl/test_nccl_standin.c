/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_standin.c: the stand-in itself, called through the table as
 * libcoll calls NCCL, against what NCCL 2.28.9 does (the rules the
 * second review listed as G1-G15, nccl: src/ at v2.28.9-1): a multi-rank
 * nonblocking group end answers ncclInProgress and launches from a thread;
 * world 1 launches in the call; a call on a comm still in progress is
 * refused; an argument error poisons the comm; destroy with a pending
 * error returns it and leaves the group open; abort waits for the streams;
 * an abort inside an open group is queued to its end; revoke; split;
 * NCCL_COMM_BLOCKING; two threads inside one comm are seen; the legacy
 * default stream synchronises with the device's blocking streams. The
 * shrink rules are in test_nccl_shrink. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define N 16

typedef struct pair {
  const coll_nccl_table_t *t;
  ncclComm_t c[2];
  float *buf[2];
} pair_t;

/* The state once it left ncclInProgress (bounded). */
static ncclResult_t settle(const coll_nccl_table_t *t, ncclComm_t c) {
  ncclResult_t state = ncclInProgress;
  int n;
  for (n = 0; state == ncclInProgress && n < 10000; n++) {
    assert_int_equal(t->nccl_comm_get_async_error(c, &state), ncclSuccess);
    if (state == ncclInProgress) test_sleep_ms(1);
  }
  return state;
}

/* Two nonblocking ranks (devices 0 and 1) made from this thread, and a
 * first allreduce on both so they are connected. */
static void pair_open(pair_t *p, int world) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  int i;
  memset(p, 0, sizeof *p);
  p->t = coll__nccl_table();
  config.blocking = 0;
  assert_int_equal(p->t->nccl_get_unique_id(&id), ncclSuccess);
  assert_int_equal(p->t->nccl_group_start(), ncclSuccess);
  for (i = 0; i < world; i++) {
    nt_set_device(i);
    p->t->nccl_comm_init_rank_config(&p->c[i], world, id, i, &config);
  }
  p->t->nccl_group_end();
  for (i = 0; i < world; i++) {
    assert_int_equal(settle(p->t, p->c[i]), ncclSuccess);
    p->buf[i] = standin_dev_alloc(i, N * sizeof(float));
  }
  nt_set_device(0);
}

/* One allreduce of every rank in one group from this thread. */
static ncclResult_t pair_allreduce(pair_t *p, int world) {
  ncclResult_t r = ncclSuccess, e;
  int i;
  p->t->nccl_group_start();
  for (i = 0; i < world; i++) {
    nt_set_device(i);
    e = p->t->nccl_all_reduce(p->buf[i], p->buf[i], N, ncclFloat32, ncclSum,
                              p->c[i], NULL);
    if (r == ncclSuccess) r = e;
  }
  e = p->t->nccl_group_end();
  nt_set_device(0);
  return r != ncclSuccess ? r : e;
}

static void pair_close(pair_t *p, int world) {
  int i;
  for (i = 0; i < world; i++) {
    if (p->c[i] != NULL) p->t->nccl_comm_abort(p->c[i]);
    standin_dev_free(p->buf[i]);
  }
}

/* G1, G11: a two-rank nonblocking group end answers ncclInProgress every
 * time (a thread launches it); a world-1 collective is done in the call. */
static void test_launch_rules(void **state) {
  pair_t p, one;
  standin_stats_t before, after;
  int round;
  (void)state;
  pair_open(&p, 2);
  for (round = 0; round < 3; round++) {
    standin_stats(&before);
    assert_int_equal(pair_allreduce(&p, 2), ncclInProgress);
    assert_int_equal(settle(p.t, p.c[0]), ncclSuccess);
    assert_int_equal(settle(p.t, p.c[1]), ncclSuccess);
    standin_stats(&after);
    assert_int_equal(after.launches_async - before.launches_async, 1);
  }
  pair_open(&one, 1);
  standin_stats(&before);
  assert_int_equal(pair_allreduce(&one, 1), ncclSuccess);
  standin_stats(&after);
  assert_int_equal(after.launches_async, before.launches_async);
  pair_close(&one, 1);
  pair_close(&p, 2);
  assert_true(nt_no_misuse());
}

/* ncclCommEnsureReady: a call on a comm still in progress is refused (and
 * is libcoll's misuse); premul op creation too (G10). */
static void test_in_progress_refused(void **state) {
  pair_t p;
  ncclRedOp_t op;
  float k = 2.0f;
  standin_stats_t st;
  (void)state;
  pair_open(&p, 2);
  standin_set_launch_delay_us(200000);
  assert_int_equal(pair_allreduce(&p, 2), ncclInProgress);
  assert_int_equal(p.t->nccl_all_reduce(p.buf[0], p.buf[0], N, ncclFloat32,
                                        ncclSum, p.c[0], NULL),
                   ncclInvalidArgument);
  assert_int_equal(p.t->nccl_red_op_create_pre_mul_sum(
                       &op, &k, ncclFloat32, ncclScalarHostImmediate, p.c[1]),
                   ncclInvalidArgument);
  standin_stats(&st);
  assert_int_equal(st.misuse, 2);
  standin_set_launch_delay_us(0);
  pair_close(&p, 2);
}

/* G8: an argument error becomes a nonblocking comm's state. G5: destroy
 * then returns it without destroying, the thread's group left open. */
static void test_poison_and_destroy(void **state) {
  pair_t p;
  ncclResult_t s = ncclSuccess;
  standin_stats_t st;
  (void)state;
  pair_open(&p, 1);
  assert_int_equal(
      p.t->nccl_all_reduce(p.buf[0], p.buf[0], N, (ncclDataType_t)99, ncclSum,
                           p.c[0], NULL),
      ncclInvalidArgument);
  p.t->nccl_comm_get_async_error(p.c[0], &s);
  assert_int_equal(s, ncclInvalidArgument);
  assert_int_equal(standin_group_depth(), 0);
  assert_int_equal(p.t->nccl_comm_destroy(p.c[0]), ncclInvalidArgument);
  assert_int_equal(standin_group_depth(), 1);
  standin_stats(&st);
  assert_int_equal(st.destroy_refused, 1);
  assert_int_equal(st.comms_live, 1);
  assert_int_equal(p.t->nccl_group_end(), ncclSuccess);
  assert_int_equal(standin_group_depth(), 0);
  pair_close(&p, 1);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

static void unstall_later(void *p) {
  test_sleep_ms((int64_t)(intptr_t)p);
  standin_stall(0);
}

/* G6: ncclCommAbort waits until the streams passed the comm's work; G15:
 * inside an open group it is queued to the group's end. Revoke returns at
 * once and ends when the streams did. */
static void test_abort_waits_for_streams(void **state) {
  pair_t p;
  uv_thread_t th;
  ncclResult_t s = ncclSuccess;
  standin_stats_t st;
  int64_t t0, took;
  (void)state;
  pair_open(&p, 2);
  assert_int_equal(pair_allreduce(&p, 2), ncclInProgress);
  settle(p.t, p.c[0]);
  settle(p.t, p.c[1]);
  standin_stall(1);
  assert_int_equal(pair_allreduce(&p, 2), ncclInProgress);
  settle(p.t, p.c[0]);
  settle(p.t, p.c[1]);
  /* Revoke: at once; in progress until the stream moves. */
  assert_int_equal(p.t->nccl_comm_revoke(p.c[1], 0), ncclInProgress);
  p.t->nccl_comm_get_async_error(p.c[1], &s);
  assert_int_equal(s, ncclInProgress);
  assert_int_equal(p.t->nccl_comm_revoke(p.c[1], 0), ncclInvalidArgument);
  assert_int_equal(uv_thread_create(&th, unstall_later, (void *)(intptr_t)300),
                   0);
  t0 = test_now_ms();
  assert_int_equal(p.t->nccl_comm_abort(p.c[0]), ncclSuccess);
  took = test_now_ms() - t0;
  uv_thread_join(&th);
  p.c[0] = NULL;
  assert_true(took >= 200);
  assert_int_equal(settle(p.t, p.c[1]), ncclSuccess); /* revoke ended */
  assert_int_equal(p.t->nccl_all_reduce(p.buf[1], p.buf[1], N, ncclFloat32,
                                        ncclSum, p.c[1], NULL),
                   ncclInvalidUsage); /* revoked: refused */
  assert_int_equal(p.t->nccl_comm_destroy(p.c[1]), ncclSuccess);
  p.c[1] = NULL;
  /* Inside a group: queued to its end. */
  pair_open(&p, 1);
  p.t->nccl_group_start();
  assert_int_equal(p.t->nccl_comm_abort(p.c[0]), ncclSuccess);
  standin_stats(&st);
  assert_int_equal(st.aborts_in_group, 1);
  assert_int_equal(st.comms_live, 1);
  p.t->nccl_group_end();
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  p.c[0] = NULL;
  pair_close(&p, 1);
  assert_true(nt_no_misuse());
}

/* Split: *newcomm NULL at the call, the parent in progress, both ranks'
 * children once the job ended. */
static void test_split(void **state) {
  pair_t p;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t child[2] = {(ncclComm_t)&p, (ncclComm_t)&p};
  int i;
  (void)state;
  config.blocking = 0;
  pair_open(&p, 2);
  for (i = 0; i < 2; i++) {
    nt_set_device(i);
    assert_int_equal(p.t->nccl_comm_split(p.c[i], 0, 1 - i, &child[i], &config),
                     ncclInProgress);
  }
  for (i = 0; i < 2; i++) {
    assert_int_equal(settle(p.t, p.c[i]), ncclSuccess);
    assert_non_null(child[i]);
    assert_int_equal(settle(p.t, child[i]), ncclSuccess);
  }
  for (i = 0; i < 2; i++)
    assert_int_equal(p.t->nccl_comm_destroy(child[i]), ncclSuccess);
  pair_close(&p, 2);
  assert_true(nt_no_misuse());
}

/* G9: NCCL_COMM_BLOCKING overrides the config. */
static void test_comm_blocking_env(void **state) {
  const coll_nccl_table_t *t = coll__nccl_table();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t c = NULL;
  (void)state;
  config.blocking = 0;
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  assert_int_equal(t->nccl_get_unique_id(&id), ncclSuccess);
  /* World 1, blocking: the init is done when it returns. */
  assert_int_equal(t->nccl_comm_init_rank_config(&c, 1, id, 0, &config),
                   ncclSuccess);
  unsetenv("NCCL_COMM_BLOCKING");
  assert_int_equal(t->nccl_comm_destroy(c), ncclSuccess);
  assert_true(nt_no_misuse());
}

struct overlap {
  const coll_nccl_table_t *t;
  ncclComm_t c;
};

static void abort_thread(void *p) {
  struct overlap *o = p;
  o->t->nccl_comm_abort(o->c);
}

/* G7: two threads inside calls on one comm at once are recorded: one in
 * ncclCommAbort waiting for a stalled stream, one asking the comm's state
 * meanwhile. */
static void test_overlap_seen(void **state) {
  struct overlap o;
  pair_t p;
  uv_thread_t th;
  ncclResult_t s;
  standin_stats_t st;
  (void)state;
  pair_open(&p, 2);
  standin_stall(1);
  assert_int_equal(pair_allreduce(&p, 2), ncclInProgress);
  settle(p.t, p.c[0]);
  settle(p.t, p.c[1]);
  o.t = p.t;
  o.c = p.c[0];
  assert_int_equal(uv_thread_create(&th, abort_thread, &o), 0);
  test_sleep_ms(100); /* the abort waits for the stream now */
  p.t->nccl_comm_get_async_error(p.c[0], &s);
  standin_stall(0);
  uv_thread_join(&th);
  p.c[0] = NULL;
  standin_stats(&st);
  assert_int_equal(st.misuse, 1);
  assert_non_null(strstr(standin_misuse_text(), "another thread is inside"));
  pair_close(&p, 2);
}

/* 1 once event e (recorded on its stream) has passed, within ms. */
static int passes_within(const coll_nccl_table_t *t, cudaEvent_t e, int ms) {
  int64_t end = test_now_ms() + ms;
  while (t->cuda_event_query(e) == cudaErrorNotReady) {
    if (test_now_ms() > end) return 0;
    test_sleep_ms(2);
  }
  return 1;
}

/* G14: work on the legacy default stream (NULL) waits for what was posted
 * before it on the device's blocking streams, and their work for what was
 * posted before it on the legacy stream; a cudaStreamNonBlocking stream
 * takes no part, and neither does another device. Before, the stand-in's
 * default streams synchronised with nothing. */
static void test_legacy_stream_sync(void **state) {
  const coll_nccl_table_t *t = coll__nccl_table();
  cudaStream_t blocking, nonblocking;
  cudaEvent_t e;
  (void)state;
  assert_int_equal(t->cuda_stream_create(&blocking), cudaSuccess);
  assert_int_equal(
      t->cuda_stream_create_with_flags(&nonblocking, cudaStreamNonBlocking),
      cudaSuccess);
  assert_int_equal(t->cuda_event_create(&e, 0), cudaSuccess);
  /* A held non-blocking stream holds nothing else up. */
  standin_hold(nonblocking, 60000);
  assert_int_equal(t->cuda_event_record(e, NULL), cudaSuccess);
  assert_true(passes_within(t, e, 5000));
  assert_int_equal(t->cuda_event_record(e, blocking), cudaSuccess);
  assert_true(passes_within(t, e, 5000));
  /* A held blocking stream holds the legacy one, for as long as it holds. */
  standin_hold(blocking, 300);
  assert_int_equal(t->cuda_event_record(e, NULL), cudaSuccess);
  assert_int_equal(t->cuda_event_query(e), cudaErrorNotReady);
  assert_true(passes_within(t, e, 30000));
  /* A held legacy stream holds the blocking ones of its device only. */
  standin_hold(NULL, 300);
  assert_int_equal(t->cuda_event_record(e, blocking), cudaSuccess);
  assert_int_equal(t->cuda_event_query(e), cudaErrorNotReady);
  assert_true(passes_within(t, e, 30000));
  standin_hold(NULL, 60000);
  nt_set_device(1);
  assert_int_equal(t->cuda_event_destroy(e), cudaSuccess);
  assert_int_equal(t->cuda_event_create(&e, 0), cudaSuccess);
  assert_int_equal(t->cuda_event_record(e, NULL), cudaSuccess);
  assert_true(passes_within(t, e, 5000));
  nt_set_device(0);
  assert_int_equal(t->cuda_event_destroy(e), cudaSuccess);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_launch_rules, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_in_progress_refused, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_poison_and_destroy, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_waits_for_streams, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_split, nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_comm_blocking_env, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_overlap_seen, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_legacy_stream_sync, nt_setup2,
                                      nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
