/* SPDX-License-Identifier: Apache-2.0 */
/* test_match.c: matching by (peer, tag) (transport/common/match.h), the
 * queues every provider keeps: oldest first within one key, other keys
 * passed over, the provider's filter honoured, removal from anywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transport/common/match.h"

typedef struct rec {
  int id;
  int busy; /* what a provider's filter looks at */
  coll_match_item_t m;
} rec_t;

static int idle(const coll_match_item_t *it) {
  return !COLL_MATCH_OWNER(it, rec_t, m)->busy;
}

static int id_of(const coll_match_item_t *it) {
  return it == NULL ? -1 : COLL_MATCH_OWNER(it, rec_t, m)->id;
}

/* Records 0..5 keyed (0,7) (1,7) (0,7) (0,8) (1,7) (0,7). */
static void fill(coll_match_q_t *q, rec_t *r) {
  static const int peer[] = {0, 1, 0, 0, 1, 0};
  static const uint32_t tag[] = {7, 7, 7, 8, 7, 7};
  coll__match_q_init(q);
  for (int i = 0; i < 6; i++) {
    r[i].id = i;
    r[i].busy = 0;
    coll__match_push(q, &r[i].m, peer[i], tag[i]);
  }
}

static void test_oldest_first_per_key(void **state) {
  coll_match_q_t q;
  rec_t r[6];
  (void)state;
  fill(&q, r);
  assert_int_equal(id_of(coll__match_take(&q, 0, 7)), 0);
  assert_int_equal(id_of(coll__match_take(&q, 0, 7)), 2);
  assert_int_equal(id_of(coll__match_take(&q, 1, 7)), 1);
  assert_int_equal(id_of(coll__match_take(&q, 0, 8)), 3);
  assert_int_equal(id_of(coll__match_take(&q, 0, 8)), -1);
  assert_int_equal(id_of(coll__match_take(&q, 2, 7)), -1);
  assert_int_equal(id_of(coll__match_take(&q, 0, 7)), 5);
  assert_int_equal(id_of(coll__match_take(&q, 1, 7)), 4);
  assert_true(coll__match_q_empty(&q));
  assert_null(q.tail);
}

static void test_filter_and_find_leave_it(void **state) {
  coll_match_q_t q;
  rec_t r[6];
  (void)state;
  fill(&q, r);
  r[0].busy = 1;
  assert_int_equal(id_of(coll__match_find(&q, 0, 7, idle)), 2);
  assert_int_equal(id_of(coll__match_find(&q, 0, 7, NULL)), 0);
  r[2].busy = r[5].busy = 1;
  assert_int_equal(id_of(coll__match_find(&q, 0, 7, idle)), -1);
  assert_ptr_equal(q.head, &r[0].m); /* nothing taken */
}

static void test_remove_anywhere(void **state) {
  coll_match_q_t q;
  rec_t r[6];
  (void)state;
  fill(&q, r);
  coll__match_remove(&q, &r[5].m); /* the tail */
  coll__match_remove(&q, &r[2].m); /* the middle */
  coll__match_remove(&q, &r[0].m); /* the head */
  assert_ptr_equal(q.head, &r[1].m);
  assert_ptr_equal(q.tail, &r[4].m);
  assert_null(r[5].m.next);
  assert_int_equal(id_of(coll__match_take(&q, 0, 7)), -1);
  coll__match_push(&q, &r[0].m, 0, 7); /* again, now the youngest */
  assert_ptr_equal(q.tail, &r[0].m);
  assert_ptr_equal(r[0].m.prev, &r[4].m);
  assert_int_equal(id_of(coll__match_take(&q, 0, 7)), 0);
  assert_ptr_equal(q.tail, &r[4].m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oldest_first_per_key),
      cmocka_unit_test(test_filter_and_find_leave_it),
      cmocka_unit_test(test_remove_anywhere),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
