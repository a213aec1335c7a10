/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_desync.c: "who is missing" over TCP, ranks as processes on
 * 127.0.0.1: a rank that skips a collective, one that waits in a recv, and
 * one stopped (SIGSTOP) inside the collective are named in every rank's
 * error; and the control frames (QUERY, POSITION, REPORT) against
 * malformed input, through the receive state machine of one connection. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "desync_rank.h"
#include "tcp_test_util.h"

#define JOB_MS 90000

/* ---- ranks as processes ------------------------------------------------- */

typedef struct desync_arg {
  ds_scenario_t sc;
  ds_shared_t *sh; /* MAP_SHARED */
} desync_arg_t;

static int desync_rank(tt_job_t *job, int rank, int world, void *arg) {
  desync_arg_t *a = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_transport_t *t;
  coll_comm_t *c;
  int rc;
  TRY(tt_create(job, rank, world, &t), "create");
  cfg.timeout_ms = DS_TIMEOUT_MS;
  TRY(coll_comm_create(t, &cfg, &c), "comm_create");
  rc = ds_rank(c, rank, a->sc, a->sh);
  coll_comm_destroy(c);
  return rc;
}

/* Waits (bounded) until flag[r] for every rank but `skip`; 0 if so. */
static int wait_flags(atomic_int *flag, int skip, int64_t ms) {
  int64_t end = tt_now_ms() + ms;
  int r;
  for (r = 0; r < DS_WORLD; r++) {
    if (r == skip) continue;
    while (!atomic_load(&flag[r]))
      if (tt_now_ms() > end)
        return -1;
      else
        tt_sleep_ms(5);
  }
  return 0;
}

static void run_tcp(ds_scenario_t sc) {
  tt_job_t job;
  desync_arg_t a = {sc, NULL};
  pid_t pids[DS_WORLD];
  int codes[DS_WORLD];
  char msg[DS_TEXT + 128];
  int rc;
  a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a.sh != MAP_FAILED);
  ds_shared_init(a.sh);
  a.sh->heard_first = 1;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  /* Recursive doubling with the check folded in lets ranks whose partners
   * all ran finish a small allreduce without the stopped rank's last
   * message; the ring needs every rank at every step, so every other rank
   * is held in allreduce #2. */
  if (sc == DS_STOPPED) setenv("COLL_ALGO", "ring", 1);
  tt_spawn(&job, DS_WORLD, desync_rank, &a, pids);
  unsetenv("COLL_ALGO");
  if (sc == DS_STOPPED) {
    /* The odd rank enters allreduce #2 (the others wait for `go`), is
     * stopped there, and runs again once the others returned. */
    if (wait_flags(a.sh->ready, -1, JOB_MS) == 0) {
      tt_sleep_ms(
          200); /* into the call; before it, it does not answer either */
      kill(pids[DS_ODD], SIGSTOP);
      atomic_store(&a.sh->go, 1);
      (void)wait_flags(a.sh->done, DS_ODD, JOB_MS);
    }
    kill(pids[DS_ODD], SIGCONT);
  }
  rc = tt_wait(pids, DS_WORLD, JOB_MS, codes, msg, sizeof msg);
  tt_job_fini(&job);
  if (rc < 0) fail_msg("tcp: %s", msg);
  if (ds_check(a.sh, sc, msg, sizeof msg) != 0) {
    munmap(a.sh, sizeof *a.sh);
    fail_msg("tcp: %s", msg);
  }
  munmap(a.sh, sizeof *a.sh);
}

static void test_skip(void **state) {
  (void)state;
  run_tcp(DS_SKIP);
}

static void test_recv(void **state) {
  (void)state;
  run_tcp(DS_RECV);
}

static void test_stopped(void **state) {
  (void)state;
  run_tcp(DS_STOPPED);
}

/* ---- the control frames, one connection --------------------------------- */

/* A transport of two ranks whose connection to rank 1 is a socketpair, as
 * in test_tcp_rx.c. */
typedef tt_rx_fixture_t fixture_t;

static int setup(void **state) {
  fixture_t *f =
      tt_rx_fixture_new(16); /* control frames have bounds of their own */
  if (f == NULL) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  tt_rx_fixture_free(*state);
  return 0;
}

/* Sends a frame of `kind` from rank 1 announcing n payload bytes, and the
 * payload p unless it is NULL (the header alone is refused). */
static void put_frame(fixture_t *f, uint8_t kind, const void *p, uint64_t n) {
  uint8_t h[COLL_TCP_FRAME_BYTES];
  coll__tcp_frame_encode(h, kind, 0, 1, 0, n);
  assert_int_equal(tt_send_all(f->peer, h, sizeof h), 0);
  if (p != NULL && n > 0)
    assert_int_equal(tt_send_all(f->peer, p, (size_t)n), 0);
}

static tcp_ev_t progress(fixture_t *f, char *why) {
  tcp_ev_t ev;
  uv_mutex_lock(&f->c->rmu);
  ev = coll__tcp_rx_progress(f->c, 0, why);
  uv_mutex_unlock(&f->c->rmu);
  return ev;
}

static void expect_proto(fixture_t *f, const char *needle) {
  char why[TCP_WHY_MAX] = "";
  assert_int_equal(progress(f, why), TCP_EV_PROTO);
  if (strstr(why, needle) == NULL)
    fail_msg("want a refusal naming '%s', got '%s'", needle, why);
}

static void pos_bytes(uint8_t out[COLL_TCP_POS_BYTES]) {
  coll_tcp_pos_t p;
  memset(&p, 0, sizeof p);
  p.seq = 41;
  p.count = 1024;
  p.root1 = 0;
  p.kind = 3; /* broadcast */
  p.in_call = 1;
  p.p2p = 2;
  p.p2p_peer = 0;
  p.p2p_tag = 7;
  coll__tcp_pos_encode(out, &p);
}

/* The well-formed frames: a query asks for an answer, a position is kept
 * as the peer's answer, a report as the transport's. */
static void test_frames_accepted(void **state) {
  fixture_t *f = *state;
  uint8_t pos[COLL_TCP_POS_BYTES];
  const char *rep = "allreduce #2 timed out after 1.0 s: rank 3 did not answer";
  char why[TCP_WHY_MAX], got[COLL_TCP_REPORT_MAX + 1];
  pos_bytes(pos);
  put_frame(f, COLL_TCP_K_QUERY, NULL, 0);
  put_frame(f, COLL_TCP_K_POSITION, pos, sizeof pos);
  put_frame(f, COLL_TCP_K_REPORT, rep, strlen(rep));
  assert_int_equal(progress(f, why), TCP_EV_NONE);
  assert_int_equal(atomic_load(&f->c->want_reply), 1);
  assert_int_equal(atomic_load(&f->c->answered), 1);
  assert_int_equal(f->c->answer.seq, 41);
  assert_int_equal(f->c->answer.count, 1024);
  assert_int_equal(f->c->answer.kind, 3);
  assert_int_equal(f->c->answer.in_call, 1);
  assert_int_equal(f->c->answer.root, -1);
  assert_int_equal(f->c->answer.p2p, COLL_POS_P2P_RECV);
  assert_int_equal(f->c->answer.p2p_tag, 7);
  assert_int_equal(coll__tcp_heard(&f->t, got, sizeof got), 1);
  assert_string_equal(got, rep);
  assert_int_equal(f->c->rstate, RS_HDR); /* the stream goes on */
}

static void test_query_with_payload(void **state) {
  fixture_t *f = *state;
  put_frame(f, COLL_TCP_K_QUERY, "x", 1);
  expect_proto(f, "kind 5 with 1 bytes");
}

static void test_position_short(void **state) {
  fixture_t *f = *state;
  uint8_t pos[COLL_TCP_POS_BYTES];
  pos_bytes(pos);
  put_frame(f, COLL_TCP_K_POSITION, pos, sizeof pos - 1);
  expect_proto(f, "kind 6 with 39 bytes");
}

static void test_position_huge(void **state) {
  fixture_t *f = *state;
  put_frame(f, COLL_TCP_K_POSITION, NULL, (uint64_t)1 << 40);
  expect_proto(f, "kind 6");
}

static void test_position_bad_fields(void **state) {
  fixture_t *f = *state;
  uint8_t pos[COLL_TCP_POS_BYTES];
  pos_bytes(pos);
  pos[26] = 1; /* a zero byte that is not */
  put_frame(f, COLL_TCP_K_POSITION, pos, sizeof pos);
  expect_proto(f, "malformed position");
  assert_int_equal(atomic_load(&f->c->answered), 0);
}

static void test_position_peer_out_of_range(void **state) {
  fixture_t *f = *state;
  uint8_t pos[COLL_TCP_POS_BYTES];
  pos_bytes(pos);
  pos[28] = 2; /* p2p peer 2 in a world of 2 */
  put_frame(f, COLL_TCP_K_POSITION, pos, sizeof pos);
  expect_proto(f, "malformed position");
}

static void test_position_kind_without_seq(void **state) {
  fixture_t *f = *state;
  uint8_t pos[COLL_TCP_POS_BYTES];
  pos_bytes(pos);
  memset(pos, 0, 8); /* seq 0 with a kind */
  put_frame(f, COLL_TCP_K_POSITION, pos, sizeof pos);
  expect_proto(f, "malformed position");
}

static void test_report_bad(void **state) {
  fixture_t *f = *state;
  char got[16];
  put_frame(f, COLL_TCP_K_REPORT, "bad\nline", 8);
  expect_proto(f, "malformed report (8 bytes)");
  assert_int_equal(coll__tcp_heard(&f->t, got, sizeof got), 0);
}

static void test_report_empty(void **state) {
  fixture_t *f = *state;
  put_frame(f, COLL_TCP_K_REPORT, NULL, 0);
  expect_proto(f, "malformed report (0 bytes)");
}

static void test_report_too_long(void **state) {
  fixture_t *f = *state;
  put_frame(f, COLL_TCP_K_REPORT, NULL, COLL_TCP_REPORT_MAX + 1);
  expect_proto(f, "malformed report");
}

/* The pure decoder: what the wire must hold for a position to count. */
static void test_pos_decoder(void **state) {
  uint8_t b[COLL_TCP_POS_BYTES];
  coll_tcp_pos_t p;
  (void)state;
  pos_bytes(b);
  assert_int_equal(coll__tcp_pos_decode(b, &p), 1);
  assert_int_equal(coll__tcp_pos_valid(&p, 2), 1);
  b[23] = 2; /* in_call neither 0 nor 1 */
  assert_int_equal(coll__tcp_pos_decode(b, &p), 1);
  assert_int_equal(coll__tcp_pos_valid(&p, 2), 0);
  pos_bytes(b);
  b[24] = 3; /* no such point-to-point call */
  (void)coll__tcp_pos_decode(b, &p);
  assert_int_equal(coll__tcp_pos_valid(&p, 2), 0);
  pos_bytes(b);
  b[16] = 3; /* root 2 in a world of 2 */
  (void)coll__tcp_pos_decode(b, &p);
  assert_int_equal(coll__tcp_pos_valid(&p, 2), 0);
  pos_bytes(b);
  b[39] = 1;
  assert_int_equal(coll__tcp_pos_decode(b, &p), 0);
  assert_int_equal(coll__tcp_report_valid((const uint8_t *)"ok", 2), 1);
  assert_int_equal(coll__tcp_report_valid((const uint8_t *)"\x7f", 1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pos_decoder),
      cmocka_unit_test_setup_teardown(test_frames_accepted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_query_with_payload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_position_short, setup, teardown),
      cmocka_unit_test_setup_teardown(test_position_huge, setup, teardown),
      cmocka_unit_test_setup_teardown(test_position_bad_fields, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_position_peer_out_of_range, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_position_kind_without_seq, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_report_bad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_report_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_report_too_long, setup, teardown),
      cmocka_unit_test(test_skip),
      cmocka_unit_test(test_recv),
      cmocka_unit_test(test_stopped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
