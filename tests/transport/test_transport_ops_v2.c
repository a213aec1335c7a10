/* SPDX-License-Identifier: Apache-2.0 */
/* test_transport_ops_v2.c: coll_transport_create with a version 2 table:
 * every refusal (unknown version, a size too small for version 2, each
 * group half set) with its sentence and ctx left to the caller; bind run
 * once with the handle; a version 1 table read no further than its
 * barrier slot (one exactly that long on the heap, one with version 2
 * slots set that must never run, through a failure, a timeout's report
 * and a shrink); what a version 2 table hands back judged, not trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/clock.h"
#include "core/desync.h"
#include "transport/transport.h"
#include "transport/transport_ops.h"
#include "transport_test.h"

/* ---- a provider that records which slots ran ----------------------------- */

static int destroy_calls, abort_calls, poison_calls, bind_calls;
static coll_transport_t *bound;

static coll_status_t nop_isend(void *ctx, int peer, uint32_t tag,
                               const void *buf, size_t len, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
  return coll_set_last_error(COLL_ERR_UNSUPPORTED, "nop");
}
static coll_status_t nop_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                               size_t cap, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)cap, (void)req;
  return coll_set_last_error(COLL_ERR_UNSUPPORTED, "nop");
}
static coll_status_t nop_wait(void *ctx, void *req, int64_t timeout_ms,
                              size_t *len) {
  (void)ctx, (void)req, (void)timeout_ms, (void)len;
  return coll_set_last_error(COLL_ERR_UNSUPPORTED, "nop");
}
static void count_abort(void *ctx) {
  (void)ctx;
  abort_calls++;
}
static void count_destroy(void *ctx) {
  (void)ctx;
  destroy_calls++;
}

/* Version 2 slots that count their calls (poison where they must not run,
 * or a fake of a transport that answers junk). */
static void v2_fail(void *ctx, const coll_fail_origin_t *o) {
  (void)ctx, (void)o;
  poison_calls++;
}
static int junk_origin;
static int v2_origin(void *ctx, coll_fail_origin_t *o) {
  (void)ctx;
  poison_calls++;
  if (!junk_origin) return 0;
  o->rank = 99; /* outside every world here */
  o->cause = COLL_FAIL_LOST;
  o->detail = 0;
  return 1;
}
static void v2_bind(void *ctx, coll_transport_t *t) {
  (void)ctx;
  bind_calls++;
  bound = t;
}
static void v2_ask(void *ctx, int64_t budget_ms,
                   unsigned char (*where)[COLL_TRANSPORT_WHERE_BYTES],
                   unsigned char *answered) {
  (void)ctx, (void)budget_ms;
  poison_calls++;
  /* Rank 1 answers bytes of no known layout. */
  memset(where[1], 0xff, COLL_TRANSPORT_WHERE_BYTES);
  answered[1] = 1;
}
static void v2_tell(void *ctx, const char *report) {
  (void)ctx, (void)report;
  poison_calls++;
}
/* What a peer's report says (NULL: no peer has reported). */
#define HEARD_DEFAULT "rank 1 said \x01\x7f"
static const char *heard_text = HEARD_DEFAULT;
static int v2_heard(void *ctx, char *buf, size_t n) {
  (void)ctx;
  poison_calls++;
  if (heard_text == NULL) return 0;
  snprintf(buf, n, "%s", heard_text);
  return 1;
}
static coll_status_t v2_link_send(void *ctx, int peer, const void *msg,
                                  size_t len, int64_t timeout_ms) {
  (void)ctx, (void)peer, (void)msg, (void)len, (void)timeout_ms;
  poison_calls++;
  return COLL_ERR_INTERNAL;
}
static coll_status_t v2_link_recv(void *ctx, int peer, void *buf, size_t cap,
                                  size_t *len, int64_t timeout_ms) {
  (void)ctx, (void)peer, (void)buf, (void)cap, (void)len, (void)timeout_ms;
  poison_calls++;
  return COLL_ERR_INTERNAL;
}
static coll_status_t v2_shrink(void *ctx, const int *members, int n,
                               int new_rank, int64_t timeout_ms,
                               void **new_ctx) {
  (void)ctx, (void)members, (void)n, (void)new_rank, (void)timeout_ms;
  (void)new_ctx;
  poison_calls++;
  return COLL_ERR_INTERNAL;
}
static void v2_leave(void *ctx) {
  (void)ctx;
  poison_calls++;
}

static coll_transport_ops_t full_ops(void) {
  coll_transport_ops_t o = {.size = sizeof o,
                            .version = 2,
                            .name = "v2",
                            .isend = nop_isend,
                            .irecv = nop_irecv,
                            .wait = nop_wait,
                            .abort = count_abort,
                            .destroy = count_destroy,
                            .fail = v2_fail,
                            .origin = v2_origin,
                            .bind = v2_bind,
                            .ask = v2_ask,
                            .tell = v2_tell,
                            .heard = v2_heard,
                            .link_send = v2_link_send,
                            .link_recv = v2_link_recv,
                            .shrink = v2_shrink,
                            .leave = v2_leave};
  return o;
}

static void reset(void) {
  destroy_calls = abort_calls = poison_calls = bind_calls = 0;
  junk_origin = 0;
  bound = NULL;
}

/* INVALID_ARG, the words in the sentence, *out NULL, no slot called. */
static void expect_refused(const coll_transport_ops_t *ops, const char *words) {
  coll_transport_t *t = (coll_transport_t *)&t;
  int ctx;
  reset();
  assert_int_equal(coll_transport_create(ops, &ctx, 0, 2, &t),
                   COLL_ERR_INVALID_ARG);
  assert_null(t);
  if (strstr(coll_last_error(), words) == NULL)
    fail_msg("expected '%s' in: %s", words, coll_last_error());
  assert_int_equal(destroy_calls + poison_calls + bind_calls, 0);
}

/* ---- refusals -------------------------------------------------------------
 */

static void test_unknown_version(void **state) {
  coll_transport_ops_t o = full_ops();
  (void)state;
  o.version = 3;
  expect_refused(&o, "ops->version 3; this libcoll knows versions 1..2");
  o.version = 0;
  expect_refused(&o, "ops->version 0");
  o.version = 0xffffffffu;
  expect_refused(&o, "COLL_TRANSPORT_OPS_VERSION");
}

static void test_size_too_small_for_v2(void **state) {
  coll_transport_ops_t o = full_ops();
  (void)state;
  /* A version 1 table's size with version 2: the groups lie past it. */
  o.size = COLL_TRANSPORT_OPS_V1_SIZE;
  expect_refused(&o, "too small for the version 2 slots");
  o.size = offsetof(coll_transport_ops_t, leave);
  expect_refused(&o, "too small for the version 2 slots");
  o.size = offsetof(coll_transport_ops_t, destroy);
  expect_refused(&o, "too small for the mandatory slots");
}

static void test_half_groups(void **state) {
  coll_transport_ops_t o;
  (void)state;
  o = full_ops();
  o.origin = NULL;
  expect_refused(&o, "sets fail but not origin: the slots fail, origin");
  o = full_ops();
  o.fail = NULL;
  expect_refused(&o, "sets origin but not fail");
  o = full_ops();
  o.bind = NULL;
  expect_refused(&o, "sets ask but not bind: the slots bind, ask, tell, heard");
  o = full_ops();
  o.ask = NULL;
  o.tell = NULL;
  o.heard = NULL;
  expect_refused(&o, "sets bind but not ask");
  o = full_ops();
  o.heard = NULL;
  expect_refused(&o, "sets bind but not heard");
  o = full_ops();
  o.leave = NULL;
  expect_refused(&o, "sets link_send but not leave");
  o = full_ops();
  o.link_send = NULL;
  o.link_recv = NULL;
  o.shrink = NULL;
  expect_refused(&o, "sets leave but not link_send");
  o = full_ops();
  o.shrink = NULL;
  expect_refused(&o, "sets link_send but not shrink");
}

/* ---- accepted tables ------------------------------------------------------
 */

static void test_bind_once_with_handle(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  int ctx;
  (void)state;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 1, 3, &t), COLL_OK);
  assert_int_equal(bind_calls, 1);
  assert_ptr_equal(bound, t);
  assert_int_equal(coll_transport_rank(t), 1);
  assert_int_equal(coll_transport_size(t), 3);
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
}

/* Drives every optional capability of t: an origin, a timeout (which asks
 * for the report and tells it), a shrink, a leave. */
static coll_status_t drive(coll_transport_t *t) {
  coll_transport_t *next = (coll_transport_t *)&next;
  coll_origin_t o;
  coll_status_t s;
  assert_int_equal(coll__t_origin(t, &o), 0);
  coll__t_fail(t, COLL_ERR_TIMEOUT);
  s = coll__t_shrink(t, coll__deadline(2000), &next);
  assert_null(next);
  coll__t_leave(t);
  return s;
}

/* A version 1 table exactly as long as version 1 made it, on the heap: a
 * read past its barrier slot is a heap overflow under ASan. */
static void test_v1_exact_size(void **state) {
  coll_transport_ops_t full = full_ops();
  void *o = malloc(COLL_TRANSPORT_OPS_V1_SIZE);
  coll_transport_t *t = NULL;
  int ctx;
  (void)state;
  assert_non_null(o);
  full.size = COLL_TRANSPORT_OPS_V1_SIZE;
  full.version = 1;
  memcpy(o, &full, COLL_TRANSPORT_OPS_V1_SIZE);
  reset();
  assert_int_equal(coll_transport_create(o, &ctx, 0, 2, &t), COLL_OK);
  free(o);
  assert_int_equal(drive(t), COLL_ERR_NOT_AVAILABLE);
  assert_non_null(strstr(coll_last_error(), "'v2' transport cannot shrink"));
  assert_int_equal(abort_calls, 1);
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
}

/* Version 1 with every version 2 slot set: none of them runs. */
static void test_v1_never_reads_v2_slots(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  int ctx;
  (void)state;
  o.version = 1;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 2, &t), COLL_OK);
  assert_int_equal(drive(t), COLL_ERR_NOT_AVAILABLE);
  assert_int_equal(abort_calls, 1);
  assert_int_equal(poison_calls + bind_calls, 0);
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
}

/* Version 2 without optional groups: a version 1 transport. */
static void test_v2_bare(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  int ctx;
  (void)state;
  o.fail = NULL, o.origin = NULL, o.bind = NULL, o.ask = NULL;
  o.tell = NULL, o.heard = NULL, o.link_send = NULL, o.link_recv = NULL;
  o.shrink = NULL, o.leave = NULL;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 2, &t), COLL_OK);
  assert_int_equal(drive(t), COLL_ERR_NOT_AVAILABLE);
  assert_int_equal(abort_calls, 1);
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
}

/* A table that can shrink but names no origins: shrink ends the old
 * endpoint with abort, then the agreement runs over its links (here a
 * peer whose link fails counts as gone) and the table makes the
 * survivors' endpoint (here it refuses, and that is the status). */
static void test_shrink_without_origins(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL, *next = (coll_transport_t *)&next;
  int ctx;
  (void)state;
  o.fail = NULL, o.origin = NULL, o.bind = NULL, o.ask = NULL;
  o.tell = NULL, o.heard = NULL;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 2, &t), COLL_OK);
  assert_int_equal(coll__t_shrink(t, coll__deadline(5000), &next),
                   COLL_ERR_INTERNAL);
  assert_null(next);
  assert_int_equal(abort_calls, 1);
  assert_true(poison_calls >= 2); /* links, then shrink */
  /* Once is all: a second shrink of the same endpoint is refused. */
  assert_int_equal(coll__t_shrink(t, coll__deadline(5000), &next),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "shrunk before"));
  coll_transport_destroy(t);
  assert_int_equal(destroy_calls, 1);
}

/* ---- what comes back is judged ---------------------------------------------
 */

static void test_junk_from_the_table(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  coll_origin_t got;
  char report[COLL_DESYNC_REPORT_MAX];
  int ctx;
  (void)state;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 2, &t), COLL_OK);
  /* An origin of rank 99 in a world of 2 is no origin. */
  junk_origin = 1;
  assert_int_equal(coll__t_origin(t, &got), 0);
  junk_origin = 0;
  /* Rank 1's answer is junk: the report says it did not answer. The
   * fail slot ran instead of abort. */
  coll__t_adopt(t, 1000);
  heard_text = NULL;
  coll__t_fail(t, COLL_ERR_TIMEOUT);
  heard_text = HEARD_DEFAULT;
  assert_int_equal(abort_calls, 0);
  assert_int_equal(coll__t_report(t, report, sizeof report), 1);
  if (strstr(report, "rank 1 did not answer") == NULL)
    fail_msg("report: %s", report);
  coll_transport_destroy(t);
}

/* This rank timed out late, on its own: a peer that timed out first had
 * asked while every rank was there and reported, then its report ended the
 * others' calls and they left, so they do not answer this rank. It shares
 * the peer's report instead of its own, which would name the ranks that
 * left as silent. */
static void test_late_timeout_shares_the_first_report(void **state) {
  static const char first[] =
      "allreduce #2 timed out after 1.0 s: rank 1 is in recv from rank 0 "
      "(tag 7); rank 0 is in it";
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  char report[COLL_DESYNC_REPORT_MAX];
  int ctx;
  (void)state;
  reset();
  assert_int_equal(coll_transport_create(&o, &ctx, 0, 2, &t), COLL_OK);
  coll__t_adopt(t, 1000);
  heard_text = first;
  coll__t_fail(t, COLL_ERR_TIMEOUT);
  heard_text = HEARD_DEFAULT;
  assert_int_equal(coll__t_report(t, report, sizeof report), 1);
  assert_string_equal(report, first);
  coll_transport_destroy(t);
}

static void test_heard_report_printable(void **state) {
  coll_transport_ops_t o = full_ops();
  coll_transport_t *t = NULL;
  char buf[64];
  int ctx, i;
  (void)state;
  reset();
  /* Rank 1 of 2: a report heard when the failure started at rank 0. */
  assert_int_equal(coll_transport_create(&o, &ctx, 1, 2, &t), COLL_OK);
  assert_int_equal(coll__t_report(t, buf, sizeof buf), 1);
  assert_non_null(strstr(buf, "rank 1 said"));
  for (i = 0; buf[i] != '\0'; i++)
    assert_true((unsigned char)buf[i] >= 0x20 && (unsigned char)buf[i] < 0x7f);
  coll_transport_destroy(t);
}

/* The answer's codec: what one rank writes, another reads back; bytes no
 * rank can be in are refused. */
static void test_where_codec(void **state) {
  coll_pos_snap_t p = {.seq = 41,
                       .count = 1000,
                       .kind = 1,
                       .op = 0,
                       .dtype = 7,
                       .root = -1,
                       .in_call = 1,
                       .p2p = COLL_POS_P2P_RECV,
                       .p2p_peer = 2,
                       .p2p_tag = 9};
  coll_pos_snap_t q;
  unsigned char b[COLL_TRANSPORT_WHERE_BYTES], bad[COLL_TRANSPORT_WHERE_BYTES];
  (void)state;
  coll__tops_where_encode(&p, b);
  assert_int_equal(coll__tops_where_decode(b, 4, &q), 1);
  assert_true(q.seq == 41 && q.count == 1000 && q.kind == 1 && q.dtype == 7);
  assert_true(q.root == -1 && q.in_call == 1 && q.p2p == COLL_POS_P2P_RECV);
  assert_true(q.p2p_peer == 2 && q.p2p_tag == 9);
  /* Peer 2 does not exist in a world of 2. */
  assert_int_equal(coll__tops_where_decode(b, 2, &q), 0);
  memset(bad, 0, sizeof bad);
  assert_int_equal(coll__tops_where_decode(bad, 4, &q), 0); /* no format */
  memcpy(bad, b, sizeof bad);
  bad[20] = 200; /* no such collective */
  assert_int_equal(coll__tops_where_decode(bad, 4, &q), 0);
  memcpy(bad, b, sizeof bad);
  bad[40] = 1; /* reserved */
  assert_int_equal(coll__tops_where_decode(bad, 4, &q), 0);
  memcpy(bad, b, sizeof bad);
  bad[16] = 9; /* root 8 of 4 */
  assert_int_equal(coll__tops_where_decode(bad, 4, &q), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_version),
      cmocka_unit_test(test_size_too_small_for_v2),
      cmocka_unit_test(test_half_groups),
      cmocka_unit_test(test_bind_once_with_handle),
      cmocka_unit_test(test_v1_exact_size),
      cmocka_unit_test(test_v1_never_reads_v2_slots),
      cmocka_unit_test(test_v2_bare),
      cmocka_unit_test(test_shrink_without_origins),
      cmocka_unit_test(test_junk_from_the_table),
      cmocka_unit_test(test_heard_report_printable),
      cmocka_unit_test(test_late_timeout_shares_the_first_report),
      cmocka_unit_test(test_where_codec),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
