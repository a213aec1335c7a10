/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_promises.c: the promises that hold only if nothing waits for a
 * peer under the issue guard (stand-in that behaves like NCCL >= 2.22:
 * connections at first use, ncclInProgress on nonblocking comms, launch at
 * ncclGroupEnd). Abort ends a first-use connect and an init waiting for a
 * rank that never comes (H1, H2); a bounded init; an isend+irecv exchange
 * (H3); tags and received on NCCL comms (W2); no context made on a device
 * the thread never used (W3); a group's handle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "nccl_test_util.h"
#include "test_util.h"

static void inject_remote_error(void *p) {
  (void)p;
  test_sleep_ms(100);
  standin_inject_async_error(ncclRemoteError);
}

/* Calls coll_abort(h) after delay_ms and records how long abort took.
 *
 * The bound the tests assert is PROMPT_MS: a comm that waits for a peer
 * under the issue guard holds abort for seconds (the stand-in's connect
 * gives up after 20 s), so it tells the two designs apart with room for a
 * loaded CI machine; the tests print what they measured (0-1 ms). */
#define PROMPT_MS 500
struct aborter {
  coll_abort_handle_t *h;
  int64_t delay_ms, at_ms, took_ms;
};

static void aborter_main(void *p) {
  struct aborter *a = p;
  int64_t t0;
  test_sleep_ms(a->delay_ms);
  t0 = test_now_ms();
  coll_abort(a->h);
  a->at_ms = test_now_ms();
  a->took_ms = a->at_ms - t0;
}

struct one_call {
  coll_comm_t *c;
  float *buf;
  coll_status_t s;
  int64_t end_ms;
  char err[512];
};

static void allreduce_rank(int rank, int world, void *p) {
  struct one_call *a = p;
  (void)rank, (void)world;
  nt_set_device(0);
  a->s = coll_allreduce(a->c, a->buf, a->buf, 4, COLL_F32, COLL_SUM, NULL);
  a->end_ms = test_now_ms();
  snprintf(a->err, sizeof a->err, "%s", coll_last_error());
}

/* H1: rank 1 never makes its first collective, so rank 0's first
 * allreduce waits in NCCL's connect. coll_abort must return at once and
 * end the call promptly (with the guard held across the connect, abort
 * would wait for the guard until the peer came). */
static void test_abort_ends_first_use_connect(void **state) {
  coll_comm_t *comms[2] = {0};
  struct one_call a;
  struct aborter ab = {NULL, 100, 0, 0};
  uv_thread_t th;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(2, 0, comms), 0);
  a.c = comms[0];
  a.buf = standin_dev_alloc(0, 4 * sizeof(float));
  assert_int_equal(coll_comm_abort_handle(a.c, &ab.h), COLL_OK);
  assert_int_equal(uv_thread_create(&th, aborter_main, &ab), 0);
  test_run_ranks(1, allreduce_rank, &a, 10000, "allreduce waiting to connect");
  uv_thread_join(&th);
  assert_int_equal(a.s, COLL_ERR_ABORTED);
  print_message(
      "first-use connect: coll_abort took %lld ms, the call ended "
      "%lld ms after it\n",
      (long long)ab.took_ms, (long long)(a.end_ms - ab.at_ms));
  assert_true(ab.took_ms < PROMPT_MS);
  assert_true(a.end_ms - ab.at_ms < PROMPT_MS);
  assert_int_equal(coll_comm_destroy(comms[0]), COLL_OK);
  assert_int_equal(coll_comm_destroy(comms[1]), COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.destroy_blocked, 0);
  assert_int_equal(st.comms_live, 0);
  coll_abort_handle_release(ab.h);
  standin_dev_free(a.buf);
  assert_true(nt_no_misuse());
}

/* The same wait ends at the comm's timeout, saying what it waited for. */
static void test_timeout_ends_first_use_connect(void **state) {
  coll_comm_t *comms[2] = {0};
  struct one_call a;
  int64_t t0;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(nt_rank_comms(2, 300, comms), 0);
  a.c = comms[0];
  a.buf = standin_dev_alloc(0, 4 * sizeof(float));
  t0 = test_now_ms();
  test_run_ranks(1, allreduce_rank, &a, 10000, "allreduce waiting to connect");
  assert_int_equal(a.s, COLL_ERR_TIMEOUT);
  assert_true(a.end_ms - t0 >= 300 && a.end_ms - t0 < 3000);
  assert_non_null(strstr(a.err, "did not take the work within 300 ms"));
  assert_non_null(strstr(a.err, "first use"));
  assert_int_equal(coll_comm_destroy(comms[0]), COLL_OK);
  assert_int_equal(coll_comm_destroy(comms[1]), COLL_OK);
  standin_dev_free(a.buf);
  assert_true(nt_no_misuse());
}

struct init_call {
  coll_unique_id_t id;
  coll_abort_handle_t *h;
  int64_t timeout_ms;
  coll_comm_t *c;
  coll_status_t s;
  int64_t end_ms;
  char err[512];
};

static void init_rank0(int rank, int world, void *p) {
  struct init_call *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  (void)rank, (void)world;
  cfg.timeout_ms = a->timeout_ms;
  cfg.abort_handle = a->h;
  a->s = coll_comm_init_rank(0, 2, &a->id, &cfg, &a->c);
  a->end_ms = test_now_ms();
  snprintf(a->err, sizeof a->err, "%s", coll_last_error());
}

/* H2: an init whose second rank never comes is bounded by the timeout and
 * ended by the config's abort handle. */
static void test_init_bounded_and_abortable(void **state) {
  struct init_call a;
  struct aborter ab = {NULL, 100, 0, 0};
  uv_thread_t th;
  int64_t t0;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(coll_unique_id_create(&a.id), COLL_OK);
  a.timeout_ms = 300;
  t0 = test_now_ms();
  test_run_ranks(1, init_rank0, &a, 10000, "init without its peer");
  assert_int_equal(a.s, COLL_ERR_TIMEOUT);
  assert_null(a.c);
  assert_true(a.end_ms - t0 >= 300 && a.end_ms - t0 < 3000);
  assert_non_null(strstr(a.err, "rank 0 of 2"));
  assert_non_null(strstr(a.err, "within 300 ms"));

  memset(&a, 0, sizeof a);
  assert_int_equal(coll_unique_id_create(&a.id), COLL_OK);
  assert_int_equal(coll_abort_handle_create(&a.h), COLL_OK);
  ab.h = a.h;
  a.timeout_ms = -1; /* only the abort can end it */
  assert_int_equal(uv_thread_create(&th, aborter_main, &ab), 0);
  test_run_ranks(1, init_rank0, &a, 10000, "init ended by abort");
  uv_thread_join(&th);
  assert_int_equal(a.s, COLL_ERR_ABORTED);
  assert_null(a.c);
  print_message(
      "init: coll_abort took %lld ms, the init ended %lld ms after "
      "it\n",
      (long long)ab.took_ms, (long long)(a.end_ms - ab.at_ms));
  assert_true(ab.took_ms < PROMPT_MS);
  assert_true(a.end_ms - ab.at_ms < PROMPT_MS);
  /* The handle served its one init; it cannot be adopted again. */
  {
    coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
    coll_comm_t *c = NULL;
    cfg.abort_handle = a.h;
    assert_int_equal(coll_comm_init_rank(0, 1, &a.id, &cfg, &c),
                     COLL_ERR_INVALID_ARG);
    assert_non_null(strstr(coll_last_error(), "abort handle"));
  }
  coll_abort_handle_release(a.h);
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0); /* both half-made comms aborted */
  assert_true(nt_no_misuse());
}

struct exchange {
  coll_comm_t *comms[2];
  float *send[2], *recv[2];
  size_t count, received[2];
  coll_status_t s[2][2];
  int by_test; /* complete with coll_test loops before coll_wait */
  int test_done[2];
};

/* Both ranks send first, then receive, then wait the send first. */
static void exchange_rank(int rank, int world, void *p) {
  struct exchange *x = p;
  coll_request_t *sr = NULL, *rr = NULL;
  int peer = 1 - rank;
  (void)world;
  nt_set_device(rank);
  x->s[rank][0] = coll_isend(x->comms[rank], x->send[rank], x->count, COLL_F32,
                             peer, 0, &sr);
  x->s[rank][1] = coll_irecv(x->comms[rank], x->recv[rank], x->count, COLL_F32,
                             peer, 0, &x->received[rank], &rr);
  if (x->by_test && sr != NULL && rr != NULL) {
    int64_t t0 = test_now_ms();
    int ds = 0, dr = 0;
    while ((!ds || !dr) && test_now_ms() - t0 < 5000) {
      coll_test(sr, &ds);
      coll_test(rr, &dr);
    }
    x->test_done[rank] = ds && dr;
  }
  if (sr != NULL) x->s[rank][0] = coll_wait(sr);
  if (rr != NULL) x->s[rank][1] = coll_wait(rr);
}

/* H3: one fused launch per exchange, or the sends wait for receives that
 * sit behind them on the stream. */
static void exchange(int by_test) {
  struct exchange x;
  size_t k;
  int r;
  memset(&x, 0, sizeof x);
  x.by_test = by_test;
  x.count = 1 << 16;
  assert_int_equal(nt_rank_comms(2, 5000, x.comms), 0);
  for (r = 0; r < 2; r++) {
    x.send[r] = standin_dev_alloc(r, x.count * sizeof(float));
    x.recv[r] = standin_dev_alloc(r, x.count * sizeof(float));
    for (k = 0; k < x.count; k++) x.send[r][k] = (float)(r * 100000 + k);
  }
  test_run_ranks(2, exchange_rank, &x, 20000, "isend+irecv exchange");
  for (r = 0; r < 2; r++) {
    assert_int_equal(x.s[r][0], COLL_OK);
    assert_int_equal(x.s[r][1], COLL_OK);
    assert_int_equal(x.received[r], x.count);
    if (by_test) assert_true(x.test_done[r]);
    for (k = 0; k < x.count; k++)
      assert_true(x.recv[r][k] == (float)((1 - r) * 100000 + k));
  }
  for (r = 0; r < 2; r++) {
    coll_comm_destroy(x.comms[r]);
    standin_dev_free(x.send[r]);
    standin_dev_free(x.recv[r]);
  }
  assert_true(nt_no_misuse());
}

static void test_exchange_completes(void **state) {
  (void)state;
  exchange(0);
}

/* coll_test alone launches the held calls and completes them (it never
 * blocks, even while NCCL still connects). */
static void test_exchange_by_test(void **state) {
  (void)state;
  exchange(1);
}

/* W2: NCCL carries no tags; a tag is refused, not silently ignored. */
static void test_tags_refused(void **state) {
  coll_comm_t *c[2] = {0};
  coll_request_t *req = NULL;
  float *buf;
  (void)state;
  assert_int_equal(nt_rank_comms(2, 0, c), 0);
  buf = standin_dev_alloc(0, 4 * sizeof(float));
  assert_int_equal(coll_send(c[0], buf, 4, COLL_F32, 1, 5),
                   COLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(coll_last_error(), "tag 5"));
  assert_non_null(strstr(coll_last_error(), "use tag 0"));
  assert_int_equal(coll_irecv(c[0], buf, 4, COLL_F32, 1, 7, NULL, &req),
                   COLL_ERR_UNSUPPORTED);
  assert_null(req);
  coll_comm_destroy(c[0]);
  coll_comm_destroy(c[1]);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

struct fresh {
  coll_abort_handle_t *h;
  unsigned contexts_after;
};

static void fresh_thread_abort(void *p) {
  struct fresh *f = p;
  standin_stats_t st;
  coll_abort(f->h);
  standin_stats(&st);
  f->contexts_after = st.contexts;
}

static void init_on_device1(int rank, int world, void *p) {
  struct init_call *a = p;
  (void)rank, (void)world;
  nt_set_device(1);
  a->s = coll_comm_init_rank(0, 1, &a->id, NULL, &a->c);
}

/* W3: a thread that never used CUDA (a watchdog calling coll_abort) must
 * not end up with a context on device 0 because libcoll "restored" the
 * device 0 that cudaGetDevice reports for such a thread. */
static void test_no_context_on_device0(void **state) {
  struct init_call a;
  struct fresh f;
  uv_thread_t th;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  memset(&f, 0, sizeof f);
  assert_int_equal(coll_unique_id_create(&a.id), COLL_OK);
  test_run_ranks(1, init_on_device1, &a, 10000, "init on device 1");
  assert_int_equal(a.s, COLL_OK);
  standin_stats(&st);
  assert_int_equal(st.contexts, 1u << 1);
  coll_comm_abort_handle(a.c, &f.h);
  assert_int_equal(uv_thread_create(&th, fresh_thread_abort, &f), 0);
  uv_thread_join(&th);
  assert_int_equal(f.contexts_after, 1u << 1);
  coll_comm_destroy(a.c);
  coll_abort_handle_release(f.h);
  assert_true(nt_no_misuse());
}

/* A group has an abort handle from creation; it reaches every comm the
 * group made, also after split. */
static void test_group_handle(void **state) {
  int devs[2] = {0, 1}, i;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL, *g_h = NULL, *c_h[2] = {0};
  coll_comm_t *comms[2] = {0};
  coll_group_t *g = NULL;
  (void)state;
  assert_int_equal(coll_abort_handle_create(&h), COLL_OK);
  cfg.abort_handle = h;
  cfg.name = "grp";
  assert_int_equal(coll_group_create_config(devs, 2, &cfg, &g), COLL_OK);
  assert_int_equal(coll_group_abort_handle(g, &g_h), COLL_OK);
  assert_ptr_equal(g_h, h);
  assert_int_equal(coll_group_split(g, comms), COLL_OK);
  for (i = 0; i < 2; i++) coll_comm_abort_handle(comms[i], &c_h[i]);
  assert_false(coll_is_aborted(c_h[0]));
  assert_int_equal(coll_abort(h), COLL_OK);
  for (i = 0; i < 2; i++) {
    assert_true(coll_is_aborted(c_h[i]));
    assert_int_equal(coll_barrier(comms[i]), COLL_ERR_ABORTED);
    assert_int_equal(coll_comm_destroy(comms[i]), COLL_OK);
    coll_abort_handle_release(c_h[i]);
  }
  coll_group_destroy(g);
  coll_abort_handle_release(g_h);
  coll_abort_handle_release(h);
  assert_true(nt_no_misuse());
}

struct dup_init {
  coll_unique_id_t id;
  coll_comm_t *c[2];
  coll_status_t s[2];
  char err[2][512];
};

static void dup_rank(int rank, int world, void *p) {
  struct dup_init *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  cfg.timeout_ms = 5000;
  nt_set_device(0);
  a->s[rank] = coll_comm_init_rank(rank, world, &a->id, &cfg, &a->c[rank]);
  snprintf(a->err[rank], sizeof a->err[rank], "%s", coll_last_error());
}

/* NCCL refuses two ranks of one comm on one GPU; the refusal carries
 * NCCL's own text (ncclGetLastError) and leaves nothing behind. */
static void test_two_ranks_one_device(void **state) {
  struct dup_init a;
  standin_stats_t st;
  int r;
  (void)state;
  standin_uninstall();
  nt_install(1, 0, 0);
  memset(&a, 0, sizeof a);
  assert_int_equal(coll_unique_id_create(&a.id), COLL_OK);
  test_run_ranks(2, dup_rank, &a, 10000, "two ranks on one device");
  for (r = 0; r < 2; r++) {
    assert_int_equal(a.s[r], COLL_ERR_BACKEND);
    assert_null(a.c[r]);
    assert_non_null(strstr(a.err[r], "invalid usage"));
    assert_non_null(strstr(a.err[r], "Duplicate GPU detected"));
  }
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  assert_true(nt_no_misuse());
}

struct mismatch {
  coll_comm_t *c[2];
  float *buf[2];
  coll_status_t s[3][2];
  char err[2][512];
};

static void mismatch_rank(int rank, int world, void *p) {
  struct mismatch *m = p;
  (void)world;
  nt_set_device(rank);
  /* Counts differ: both ranks are told, naming the field and the ranks. */
  m->s[0][rank] = coll_allreduce(m->c[rank], m->buf[rank], m->buf[rank],
                                 rank == 0 ? 8 : 7, COLL_F32, COLL_SUM, NULL);
  snprintf(m->err[rank], sizeof m->err[rank], "%s", coll_last_error());
  /* Different collectives. */
  if (rank == 0)
    m->s[1][rank] =
        coll_broadcast(m->c[rank], m->buf[rank], 8, COLL_F32, 0, NULL);
  else
    m->s[1][rank] = coll_allreduce(m->c[rank], m->buf[rank], m->buf[rank], 8,
                                   COLL_F32, COLL_SUM, NULL);
  /* The comm is still usable after a disagreement. */
  m->s[2][rank] = coll_allreduce(m->c[rank], m->buf[rank], m->buf[rank], 8,
                                 COLL_F32, COLL_SUM, NULL);
}

/* W2: with COLL_CHECK_MISMATCH=1 set, an NCCL comm agrees on every
 * collective's descriptor first, instead of hanging or corrupting. */
static void test_agreement_when_asked(void **state) {
  struct mismatch m;
  int r, k;
  (void)state;
  memset(&m, 0, sizeof m);
  setenv("COLL_CHECK_MISMATCH", "1", 1);
  assert_int_equal(nt_rank_comms(2, 5000, m.c), 0);
  unsetenv("COLL_CHECK_MISMATCH");
  for (r = 0; r < 2; r++) {
    m.buf[r] = standin_dev_alloc(r, 8 * sizeof(float));
    for (k = 0; k < 8; k++) m.buf[r][k] = (float)(r + 1);
  }
  test_run_ranks(2, mismatch_rank, &m, 20000, "mismatched collectives");
  for (r = 0; r < 2; r++) {
    assert_int_equal(m.s[0][r], COLL_ERR_LENGTH_MISMATCH);
    assert_non_null(
        strstr(m.err[r], "disagree on count: rank 0 has 8, rank 1 has 7"));
    assert_int_equal(m.s[1][r], COLL_ERR_LENGTH_MISMATCH);
    assert_int_equal(m.s[2][r], COLL_OK);
    for (k = 0; k < 8; k++) assert_true(m.buf[r][k] == 3.0f);
  }
  for (r = 0; r < 2; r++) {
    coll_comm_destroy(m.c[r]);
    standin_dev_free(m.buf[r]);
  }
  assert_true(nt_no_misuse());
}

/* M8: the timeout counts from when the work can start on the stream, so a
 * collective queued behind the caller's own long work (a stalled stream
 * here, 1.5 times the timeout) does not time out, and the comm is not
 * aborted for it. Work that never starts ends at twice the timeout from the
 * call (test_nccl_faults). */
static void test_timeout_starts_on_the_stream(void **state) {
  coll_comm_t *c = NULL;
  coll_request_t *req = NULL;
  float *buf;
  int done = 0, polls = 0;
  int64_t t0;
  (void)state;
  assert_int_equal(nt_rank_comms(1, 400, &c), 0);
  buf = standin_dev_alloc(0, 4 * sizeof(float));
  buf[0] = 2.5f;
  standin_stall(1);
  assert_int_equal(
      coll_iallreduce(c, buf, buf, 4, COLL_F32, COLL_SUM, NULL, &req), COLL_OK);
  t0 = test_now_ms();
  while (test_now_ms() - t0 < 600) { /* 1.5 times the timeout */
    assert_int_equal(coll_test(req, &done), COLL_OK);
    assert_false(done);
    polls++;
    test_sleep_ms(5);
  }
  standin_stall(0);
  assert_int_equal(coll_wait(req), COLL_OK);
  assert_true(buf[0] == 2.5f);
  assert_true(polls > 10);
  assert_int_equal(coll_allreduce(c, buf, buf, 4, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  coll_comm_destroy(c);
  standin_dev_free(buf);
  assert_true(nt_no_misuse());
}

/* N11: with the agreement on, a peer lost during it is NCCL's error
 * (PEER_LOST) at once, not a TIMEOUT after the whole timeout. */
struct warm {
  coll_comm_t **c;
  float **buf;
  coll_status_t s[2];
};

static void warm_rank(int rank, int world, void *p) {
  struct warm *w = p;
  (void)world;
  nt_set_device(rank);
  w->s[rank] = coll_allreduce(w->c[rank], w->buf[rank], w->buf[rank], 4,
                              COLL_F32, COLL_SUM, NULL);
}

static void test_agreement_sees_lost_peer(void **state) {
  coll_comm_t *c[2] = {0};
  uv_thread_t th;
  float *buf[2];
  struct warm w = {c, buf, {COLL_OK, COLL_OK}};
  int64_t t0, took;
  coll_status_t s;
  int i;
  (void)state;
  setenv("COLL_CHECK_MISMATCH", "1", 1);
  assert_int_equal(nt_rank_comms(2, 5000, c), 0);
  unsetenv("COLL_CHECK_MISMATCH");
  for (i = 0; i < 2; i++) buf[i] = standin_dev_alloc(i, 4 * sizeof(float));
  test_run_ranks(2, warm_rank, &w, 20000, "agreement warm-up");
  for (i = 0; i < 2; i++) assert_int_equal(w.s[i], COLL_OK);
  nt_set_device(0);
  /* Rank 1 is gone: NCCL reports it 100 ms into rank 0's call. */
  assert_int_equal(uv_thread_create(&th, inject_remote_error, NULL), 0);
  t0 = test_now_ms();
  s = coll_allreduce(c[0], buf[0], buf[0], 4, COLL_F32, COLL_SUM, NULL);
  took = test_now_ms() - t0;
  uv_thread_join(&th);
  print_message("agreement, peer lost: %s after %lld ms: %s\n",
                coll_status_name(s), (long long)took, coll_last_error());
  assert_int_equal(s, COLL_ERR_PEER_LOST);
  assert_true(took < 2500);
  for (i = 0; i < 2; i++) {
    coll_comm_destroy(c[i]);
    standin_dev_free(buf[i]);
  }
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_abort_ends_first_use_connect,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_timeout_ends_first_use_connect,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_init_bounded_and_abortable,
                                      nt_setup2, nt_teardown),
      cmocka_unit_test_setup_teardown(test_exchange_completes, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_exchange_by_test, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_tags_refused, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_no_context_on_device0, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_group_handle, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_two_ranks_one_device, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_agreement_when_asked, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_agreement_sees_lost_peer, nt_setup2,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_timeout_starts_on_the_stream,
                                      nt_setup2, nt_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
