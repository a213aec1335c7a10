/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_staged_p2p.c: point-to-point of "device" buffers on CPU comms
 * (staged through pinned slabs): an isend+irecv exchange larger than any
 * unexpected-message buffering completes whichever request is waited first,
 * coll_test alone drives a staged request to the end, abort releases every
 * staged wait (also while the streams are held back), a staged send keeps
 * its place before a later host send on the same tag, destroy ends staged
 * requests, and the slab pool keeps no message-sized slab. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/staging_pool.h"
#include "nccl_test_util.h"
#include "test_util.h"

#define SEG NT_STAGE_SEG
#define MSG ((size_t)256 << 10) /* floats: 1 MiB, far above SEG */
#define RANK_BOUND_MS 30000     /* every rank thread ends within this */

static float val(int rank, size_t k) {
  return (float)(rank * 1000 + (int)(k % 997));
}

/* What a rank thread saw; the test thread asserts on it. */
struct xarg {
  coll_comm_t **comms;
  float *send[2], *recv[2];
  size_t got[2];
  coll_status_t s[2][8];
  char err[2][256];
  int bad[2];
  int loop_done[2];
};

static void note(struct xarg *x, int rank, int step, coll_status_t s) {
  x->s[rank][step] = s;
  if (s != COLL_OK && x->err[rank][0] == '\0')
    snprintf(x->err[rank], sizeof x->err[rank], "step %d: %s", step,
             coll_last_error());
}

static void check_status(const struct xarg *x, int nsteps) {
  int r, j;
  for (r = 0; r < 2; r++)
    for (j = 0; j < nsteps; j++)
      if (x->s[r][j] != COLL_OK)
        fail_msg("rank %d step %d: %s (%s)", r, j, coll_status_name(x->s[r][j]),
                 x->err[r]);
}

static void xarg_alloc(struct xarg *x, coll_comm_t **comms) {
  int r;
  size_t k;
  memset(x, 0, sizeof *x);
  x->comms = comms;
  for (r = 0; r < 2; r++) {
    x->send[r] = standin_dev_alloc(r, MSG * sizeof(float));
    x->recv[r] = standin_dev_alloc(r, MSG * sizeof(float));
    for (k = 0; k < MSG; k++) {
      x->send[r][k] = val(r, k);
      x->recv[r][k] = -1.0f;
    }
  }
}

static void xarg_free(struct xarg *x) {
  int r;
  for (r = 0; r < 2; r++) {
    standin_dev_free(x->send[r]);
    standin_dev_free(x->recv[r]);
  }
}

/* (a) Both ranks isend then irecv 1 MiB, then wait the send first. The
 * in-process transport buffers nothing: a send completes only once the
 * peer's receive is posted, so the receive must be posted at submit. */
static void exchange_rank(int rank, int world, void *p) {
  struct xarg *x = p;
  coll_comm_t *c = x->comms[rank];
  coll_request_t *rs = NULL, *rr = NULL;
  int peer = 1 - rank;
  size_t k;
  (void)world;
  note(x, rank, 0, coll_isend(c, x->send[rank], MSG, COLL_F32, peer, 3, &rs));
  note(
      x, rank, 1,
      coll_irecv(c, x->recv[rank], MSG, COLL_F32, peer, 3, &x->got[rank], &rr));
  if (rs != NULL) note(x, rank, 2, coll_wait(rs));
  if (rr != NULL) note(x, rank, 3, coll_wait(rr));
  for (k = 0; k < MSG; k++) x->bad[rank] |= x->recv[rank][k] != val(peer, k);
}

static void run_exchange(void) {
  coll_comm_t *comms[2] = {0};
  struct xarg x;
  standin_stats_t before, after;
  int r;
  assert_int_equal(test_inproc_comms(2, 5000, comms), 0);
  xarg_alloc(&x, comms);
  standin_stats(&before);
  test_run_ranks(2, exchange_rank, &x, RANK_BOUND_MS, "staged exchange");
  standin_stats(&after);
  check_status(&x, 4);
  for (r = 0; r < 2; r++) {
    assert_int_equal(x.got[r], MSG);
    if (x.bad[r]) fail_msg("rank %d: wrong bytes received", r);
  }
  /* The device buffers went through staging copies. */
  assert_true(after.copies >= before.copies + 4);
  test_destroy_comms(2, comms);
  xarg_free(&x);
  assert_true(nt_no_misuse());
}

static void test_exchange_send_first(void **state) {
  (void)state;
  run_exchange();
}

/* The same with streams that run their work only when queried. */
static void test_exchange_deferred(void **state) {
  (void)state;
  run_exchange();
}

/* (b) coll_test alone completes a staged isend/irecv pair (bounded at 5 s).
 * Each rank sends a few elements less than the peer's buffer holds, so
 * *received and the untouched tail are checked too. */
static size_t sent_by(int rank) { return MSG - 10 * (size_t)(rank + 1); }

static void test_loop_rank(int rank, int world, void *p) {
  struct xarg *x = p;
  coll_comm_t *c = x->comms[rank];
  coll_request_t *rs = NULL, *rr = NULL;
  int peer = 1 - rank, ds = 0, dr = 0;
  int64_t t0;
  size_t k;
  (void)world;
  note(x, rank, 0,
       coll_isend(c, x->send[rank], sent_by(rank), COLL_F32, peer, 4, &rs));
  note(
      x, rank, 1,
      coll_irecv(c, x->recv[rank], MSG, COLL_F32, peer, 4, &x->got[rank], &rr));
  if (rs == NULL || rr == NULL) return;
  t0 = test_now_ms();
  while (!(ds && dr) && test_now_ms() - t0 < 5000) {
    coll_status_t s = COLL_OK;
    if (!ds) s = coll_test(rs, &ds);
    if (s == COLL_OK && !dr) s = coll_test(rr, &dr);
    if (s != COLL_OK) {
      note(x, rank, 2, s);
      break;
    }
  }
  x->loop_done[rank] = ds && dr;
  /* Done: the waits return at once with the outcome. */
  note(x, rank, 2, coll_wait(rs));
  note(x, rank, 3, coll_wait(rr));
  for (k = 0; k < sent_by(peer); k++)
    x->bad[rank] |= x->recv[rank][k] != val(peer, k);
  for (; k < MSG; k++) x->bad[rank] |= x->recv[rank][k] != -1.0f;
}

static void run_test_loop(void) {
  coll_comm_t *comms[2] = {0};
  struct xarg x;
  int r;
  assert_int_equal(test_inproc_comms(2, 3000, comms), 0);
  xarg_alloc(&x, comms);
  test_run_ranks(2, test_loop_rank, &x, RANK_BOUND_MS, "staged test loop");
  for (r = 0; r < 2; r++)
    if (!x.loop_done[r])
      fail_msg("rank %d: coll_test did not report done=1 within 5 s", r);
  check_status(&x, 4);
  for (r = 0; r < 2; r++) {
    assert_int_equal(x.got[r], sent_by(1 - r));
    if (x.bad[r]) fail_msg("rank %d: wrong bytes received", r);
  }
  test_destroy_comms(2, comms);
  xarg_free(&x);
  assert_true(nt_no_misuse());
}

static void test_test_loop(void **state) {
  (void)state;
  run_test_loop();
}

static void test_test_loop_deferred(void **state) {
  (void)state;
  run_test_loop();
}

/* A staged receive shorter than the message: COLL_ERR_LENGTH_MISMATCH with
 * nothing written, and the comm stays usable (the next message arrives). */
static void short_rank(int rank, int world, void *p) {
  struct xarg *x = p;
  coll_comm_t *c = x->comms[rank];
  (void)world;
  if (rank == 0) {
    note(x, 0, 0, coll_send(c, x->send[0], 100, COLL_F32, 1, 8));
    note(x, 0, 1, coll_send(c, x->send[0], 50, COLL_F32, 1, 8));
    return;
  }
  x->s[1][0] = coll_recv(c, x->recv[1], 50, COLL_F32, 0, 8, &x->got[1]);
  note(x, 1, 1, coll_recv(c, x->recv[1], 60, COLL_F32, 0, 8, &x->got[1]));
}

static void test_staged_recv_too_short(void **state) {
  coll_comm_t *comms[2] = {0};
  struct xarg x;
  size_t k;
  (void)state;
  assert_int_equal(test_inproc_comms(2, 5000, comms), 0);
  xarg_alloc(&x, comms);
  test_run_ranks(2, short_rank, &x, RANK_BOUND_MS, "staged short receive");
  assert_int_equal(x.s[1][0], COLL_ERR_LENGTH_MISMATCH);
  x.s[1][0] = COLL_OK;
  check_status(&x, 2);
  assert_int_equal(x.got[1], 50);
  for (k = 0; k < 50; k++) assert_true(x.recv[1][k] == val(0, k));
  for (; k < MSG; k++) assert_true(x.recv[1][k] == -1.0f);
  test_destroy_comms(2, comms);
  xarg_free(&x);
  assert_true(nt_no_misuse());
}

/* (c) coll_abort from another thread ends a staged wait (or a coll_test
 * loop) within 1 s. The last rank thread aborts the others' comms 200 ms
 * in. */
enum { AB_RECV, AB_SEND_STALLED, AB_TEST_STALLED, AB_ALLREDUCE_STALLED };

struct aarg {
  coll_comm_t **comms;
  coll_abort_handle_t *h[2];
  float *buf[2];
  int mode, waiters;
  coll_status_t s[2];
  int64_t t_abort, t_ret[2];
};

static void abort_rank(int rank, int world, void *p) {
  struct aarg *a = p;
  coll_comm_t *c;
  coll_request_t *req = NULL;
  int i;
  (void)world;
  if (rank == a->waiters) {
    test_sleep_ms(200);
    a->t_abort = test_now_ms();
    for (i = 0; i < a->waiters; i++) coll_abort(a->h[i]);
    return;
  }
  c = a->comms[rank];
  switch (a->mode) {
    case AB_RECV: /* no one sends: the wait is on the transport */
      a->s[rank] = coll_irecv(c, a->buf[rank], MSG, COLL_F32, 1, 7, NULL, &req);
      break;
    case AB_SEND_STALLED: /* the copy into the slab never completes */
      a->s[rank] = coll_isend(c, a->buf[rank], MSG, COLL_F32, 1, 7, &req);
      break;
    case AB_TEST_STALLED: { /* the same, polled by coll_test (5 s bound) */
      int done = 0;
      int64_t t0 = test_now_ms();
      a->s[rank] = coll_isend(c, a->buf[rank], MSG, COLL_F32, 1, 7, &req);
      while (req != NULL && !done && test_now_ms() - t0 < 5000)
        if (coll_test(req, &done) != COLL_OK) break;
      a->t_ret[rank] = test_now_ms();
      if (req != NULL) a->s[rank] = coll_wait(req);
      return;
    }
    default: /* both ranks' first copy-in never completes */
      a->s[rank] = coll_allreduce(c, a->buf[rank], a->buf[rank], MSG, COLL_F32,
                                  COLL_SUM, NULL);
      break;
  }
  if (req != NULL) a->s[rank] = coll_wait(req);
  a->t_ret[rank] = test_now_ms();
}

static void run_abort(int mode) {
  coll_comm_t *comms[2] = {0};
  struct aarg a;
  int r;
  memset(&a, 0, sizeof a);
  a.comms = comms;
  a.mode = mode;
  a.waiters = mode == AB_ALLREDUCE_STALLED ? 2 : 1;
  /* A long comm timeout: only the abort can end the waits in time. */
  assert_int_equal(test_inproc_comms(2, 20000, comms), 0);
  for (r = 0; r < 2; r++) {
    a.buf[r] = standin_dev_alloc(r, MSG * sizeof(float));
    assert_int_equal(coll_comm_abort_handle(comms[r], &a.h[r]), COLL_OK);
  }
  if (mode != AB_RECV) standin_stall(1);
  test_run_ranks(a.waiters + 1, abort_rank, &a, RANK_BOUND_MS, "staged abort");
  standin_stall(0);
  for (r = 0; r < a.waiters; r++) {
    if (a.s[r] != COLL_ERR_ABORTED)
      fail_msg("rank %d: %s, expected COLL_ERR_ABORTED", r,
               coll_status_name(a.s[r]));
    if (a.t_ret[r] - a.t_abort >= 1000)
      fail_msg("rank %d: the wait ended %lld ms after the abort", r,
               (long long)(a.t_ret[r] - a.t_abort));
  }
  test_destroy_comms(2, comms);
  for (r = 0; r < 2; r++) {
    coll_abort_handle_release(a.h[r]);
    standin_dev_free(a.buf[r]);
  }
  assert_true(nt_no_misuse());
}

static void test_abort_staged_recv(void **state) {
  (void)state;
  run_abort(AB_RECV);
}

static void test_abort_staged_send_stalled(void **state) {
  (void)state;
  run_abort(AB_SEND_STALLED);
}

static void test_abort_staged_test_loop_stalled(void **state) {
  (void)state;
  run_abort(AB_TEST_STALLED);
}

static void test_abort_staged_allreduce_stalled(void **state) {
  (void)state;
  run_abort(AB_ALLREDUCE_STALLED);
}

/* A staged send whose copy is held back, then a host send on the same tag:
 * the receiver must see them in the order they were issued. */
#define SMALL 1000

struct oarg {
  coll_comm_t **comms;
  float *dev, host[SMALL], in[2][SMALL];
  atomic_int issued;
  coll_status_t s[2][2];
  char err[256];
};

static void order_rank(int rank, int world, void *p) {
  struct oarg *o = p;
  coll_comm_t *c = o->comms[rank];
  coll_request_t *r1 = NULL, *r2 = NULL;
  int64_t t0 = test_now_ms();
  (void)world;
  if (rank == 0) {
    standin_stall(1);
    o->s[0][0] = coll_isend(c, o->dev, SMALL, COLL_F32, 1, 5, &r1);
    o->s[0][1] = coll_isend(c, o->host, SMALL, COLL_F32, 1, 5, &r2);
    atomic_store(&o->issued, 1);
    test_sleep_ms(100); /* the receiver is waiting by now */
    standin_stall(0);
    if (r1 != NULL) o->s[0][0] = coll_wait(r1);
    if (r2 != NULL) o->s[0][1] = coll_wait(r2);
    return;
  }
  while (!atomic_load(&o->issued) && test_now_ms() - t0 < 5000)
    test_sleep_ms(1);
  o->s[1][0] = coll_recv(c, o->in[0], SMALL, COLL_F32, 0, 5, NULL);
  o->s[1][1] = coll_recv(c, o->in[1], SMALL, COLL_F32, 0, 5, NULL);
  if (o->s[1][0] != COLL_OK || o->s[1][1] != COLL_OK)
    snprintf(o->err, sizeof o->err, "%s", coll_last_error());
}

static void test_order_staged_then_host(void **state) {
  coll_comm_t *comms[2] = {0};
  struct oarg o;
  int r, j;
  size_t k;
  (void)state;
  memset(&o, 0, sizeof o);
  o.comms = comms;
  o.dev = standin_dev_alloc(0, SMALL * sizeof(float));
  for (k = 0; k < SMALL; k++) {
    o.dev[k] = val(0, k);
    o.host[k] = val(5, k);
  }
  assert_int_equal(test_inproc_comms(2, 5000, comms), 0);
  test_run_ranks(2, order_rank, &o, RANK_BOUND_MS, "staged order");
  for (r = 0; r < 2; r++)
    for (j = 0; j < 2; j++)
      if (o.s[r][j] != COLL_OK)
        fail_msg("rank %d call %d: %s (%s)", r, j, coll_status_name(o.s[r][j]),
                 o.err);
  for (k = 0; k < SMALL; k++) {
    if (o.in[0][k] != val(0, k))
      fail_msg("first message is not the staged one");
    if (o.in[1][k] != val(5, k)) fail_msg("second message is not the host one");
  }
  test_destroy_comms(2, comms);
  standin_dev_free(o.dev);
  assert_true(nt_no_misuse());
}

/* Destroy with staged requests outstanding (a receive no one matches, a
 * send whose copy is held back): their waits fail with ABORTED, nothing
 * touches freed memory. */
static void test_destroy_with_staged(void **state) {
  coll_comm_t *comms[2] = {0};
  coll_request_t *rr = NULL, *rs = NULL;
  float *a = standin_dev_alloc(0, MSG * sizeof(float));
  float *b = standin_dev_alloc(0, MSG * sizeof(float));
  (void)state;
  assert_int_equal(test_inproc_comms(2, 5000, comms), 0);
  assert_int_equal(coll_irecv(comms[0], a, MSG, COLL_F32, 1, 1, NULL, &rr),
                   COLL_OK);
  standin_stall(1);
  assert_int_equal(coll_isend(comms[0], b, MSG, COLL_F32, 1, 2, &rs), COLL_OK);
  assert_int_equal(coll_comm_destroy(comms[0]), COLL_OK);
  assert_int_equal(coll_wait(rr), COLL_ERR_ABORTED);
  assert_int_equal(coll_wait(rs), COLL_ERR_ABORTED);
  standin_stall(0);
  assert_int_equal(coll_comm_destroy(comms[1]), COLL_OK);
  standin_dev_free(a);
  standin_dev_free(b);
  assert_true(nt_no_misuse());
}

/* (d) After large staged collectives and a 1 MiB staged send and receive,
 * the pool keeps no slab larger than three segments. */
static void pool_rank(int rank, int world, void *p) {
  struct xarg *x = p;
  coll_comm_t *c = x->comms[rank];
  int peer = 1 - rank;
  (void)world;
  note(x, rank, 0,
       coll_allreduce(c, x->send[rank], x->recv[rank], MSG, COLL_F32, COLL_SUM,
                      NULL));
  note(x, rank, 1,
       coll_reduce(c, x->send[rank], x->recv[rank], MSG, COLL_F32, COLL_MAX, 0,
                   NULL));
  note(
      x, rank, 2,
      coll_allgather(c, x->send[rank], x->recv[rank], MSG / 2, COLL_F32, NULL));
  /* Blocking, ordered by rank: this one is about slab sizes only. */
  if (rank == 0) {
    note(x, rank, 3, coll_send(c, x->send[rank], MSG, COLL_F32, peer, 6));
    note(x, rank, 4,
         coll_recv(c, x->recv[rank], MSG, COLL_F32, peer, 6, &x->got[rank]));
  } else {
    note(x, rank, 4,
         coll_recv(c, x->recv[rank], MSG, COLL_F32, peer, 6, &x->got[rank]));
    note(x, rank, 3, coll_send(c, x->send[rank], MSG, COLL_F32, peer, 6));
  }
}

static void test_pool_keeps_segment_slabs(void **state) {
  coll_comm_t *comms[2] = {0};
  struct xarg x;
  size_t largest = 0, total;
  (void)state;
  assert_int_equal(test_inproc_comms(2, 10000, comms), 0);
  xarg_alloc(&x, comms);
  test_run_ranks(2, pool_rank, &x, RANK_BOUND_MS, "staged pool");
  check_status(&x, 5);
  total = coll__slab_pool_bytes(&largest);
  if (largest > 3 * SEG)
    fail_msg("the pool keeps a %zu-byte slab (segment %zu, %zu bytes in all)",
             largest, SEG, total);
  test_destroy_comms(2, comms);
  xarg_free(&x);
  assert_true(nt_no_misuse());
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_exchange_send_first, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_exchange_deferred,
                                      nt_setup_staged_deferred, nt_teardown),
      cmocka_unit_test_setup_teardown(test_test_loop, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_test_loop_deferred,
                                      nt_setup_staged_deferred, nt_teardown),
      cmocka_unit_test_setup_teardown(test_staged_recv_too_short,
                                      nt_setup_staged, nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_staged_recv, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_staged_send_stalled,
                                      nt_setup_staged, nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_staged_test_loop_stalled,
                                      nt_setup_staged, nt_teardown),
      cmocka_unit_test_setup_teardown(test_abort_staged_allreduce_stalled,
                                      nt_setup_staged, nt_teardown),
      cmocka_unit_test_setup_teardown(test_order_staged_then_host,
                                      nt_setup_staged, nt_teardown),
      cmocka_unit_test_setup_teardown(test_destroy_with_staged, nt_setup_staged,
                                      nt_teardown),
      cmocka_unit_test_setup_teardown(test_pool_keeps_segment_slabs,
                                      nt_setup_staged, nt_teardown),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*abort*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
