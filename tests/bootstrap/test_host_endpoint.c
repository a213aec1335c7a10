/* SPDX-License-Identifier: Apache-2.0 */
/* test_host_endpoint.c: the rendezvous of a host's shared-memory endpoint
 * (bootstrap/rendezvous/host_endpoint.c) when a rank of the host never
 * makes one. A rank whose own setup failed leaves "-" under its key: a
 * higher rank of its host, which dials it, and a lower one, which waits
 * for its dial, both fail at once with PEER_LOST naming it; a rank that
 * is only late is waited for until the deadline. A rank alone on its
 * host makes nothing. Ranks here are calls
 * on this thread against an in-memory store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bootstrap/rendezvous/host_id.h"
#include "core/clock.h"
#include "core/error.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 3
/* Ranks 0 and 1 share host 0; rank 2 is alone on host 1. */
static const int k_host_of[WORLD] = {0, 0, 1};

static void expect_text(const char *want) {
  if (strstr(coll_last_error(), want) == NULL)
    fail_msg("expected '%s' in the error, got: %s", want, coll_last_error());
}

/* Rank 0 failed before its endpoint: rank 1 dials it, finds the mark and
 * fails with PEER_LOST long before its 20 s deadline would end a wait.
 * The failure that made rank 0 skip stays rank 0's error text. */
static void test_failed_lower_rank_fails_its_host_at_once(void **state) {
  test_kv_t *kv = test_kv_new();
  test_kv_view_t view = {.kv = kv};
  coll_store_ops_t ops;
  coll_transport_t *t = NULL;
  char mark[8];
  coll_status_t s;
  (void)state;
  assert_non_null(kv);
  test_kv_ops(&view, &ops);
  (void)coll__err(COLL_ERR_TIMEOUT, "the mesh failed here");
  coll__transport_host_skip(&ops, 0);
  expect_text("the mesh failed here");
  assert_int_equal(test_kv_peek(kv, "coll/shmh/0", mark, sizeof mark), 1);
  assert_string_equal(mark, "-");

  s = coll__transport_host_create(&ops, 1, WORLD, k_host_of, "job", NULL,
                                  coll__deadline(20000), &t);
  assert_int_equal(s, COLL_ERR_PEER_LOST);
  assert_null(t);
  expect_text("this host's shared memory");
  expect_text(
      "rank 0 failed its setup before it joined this host's shared "
      "memory");
  test_kv_free(kv);
}

/* Rank 1 failed: rank 0, which waits for its dial, finds the mark while
 * it waits and fails with PEER_LOST naming it, long before its 20 s
 * deadline. */
static void test_failed_higher_rank_fails_its_host_at_once(void **state) {
  test_kv_t *kv = test_kv_new();
  test_kv_view_t view = {.kv = kv};
  coll_store_ops_t ops;
  coll_transport_t *t = NULL;
  coll_status_t s;
  (void)state;
  assert_non_null(kv);
  test_kv_ops(&view, &ops);
  coll__transport_host_skip(&ops, 1);
  s = coll__transport_host_create(&ops, 0, WORLD, k_host_of, "job", NULL,
                                  coll__deadline(20000), &t);
  assert_int_equal(s, COLL_ERR_PEER_LOST);
  assert_null(t);
  expect_text(
      "rank 1 failed its setup before it joined this host's shared "
      "memory");
  test_kv_free(kv);
}

/* Nobody gave up, rank 1 is only late: rank 0 waits until the deadline
 * and says how many did not come. */
static void test_late_higher_rank_ends_at_the_deadline(void **state) {
  test_kv_t *kv = test_kv_new();
  test_kv_view_t view = {.kv = kv};
  coll_store_ops_t ops;
  coll_transport_t *t = NULL;
  coll_status_t s;
  (void)state;
  assert_non_null(kv);
  test_kv_ops(&view, &ops);
  s = coll__transport_host_create(&ops, 0, WORLD, k_host_of, "job", NULL,
                                  coll__deadline(300), &t);
  assert_int_equal(s, COLL_ERR_TIMEOUT);
  assert_null(t);
  expect_text("1 higher rank(s) did not connect");
  test_kv_free(kv);
}

/* Alone on its host: no endpoint, nothing published, no wait. */
static void test_alone_on_its_host(void **state) {
  test_kv_t *kv = test_kv_new();
  test_kv_view_t view = {.kv = kv};
  coll_store_ops_t ops;
  coll_transport_t *t = NULL;
  (void)state;
  assert_non_null(kv);
  test_kv_ops(&view, &ops);
  assert_int_equal(coll__transport_host_create(&ops, 2, WORLD, k_host_of, "job",
                                               NULL, coll__deadline(20000), &t),
                   COLL_OK);
  assert_null(t);
  assert_int_equal(test_kv_count(kv), 0);
  test_kv_free(kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_lower_rank_fails_its_host_at_once),
      cmocka_unit_test(test_failed_higher_rank_fails_its_host_at_once),
      cmocka_unit_test(test_late_higher_rank_ends_at_the_deadline),
      cmocka_unit_test(test_alone_on_its_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
