/* SPDX-License-Identifier: Apache-2.0 */
/* test_report_board.c: the tell and heard slots every provider answers
 * with (transport/common/liveness.h, coll_report_board_t): tell keeps the
 * first report in this rank's cell, cut to fit; heard reads the cell of
 * the rank where the failure started first, then the first that holds a
 * report, and skips cells it cannot read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/common/liveness.h"

#define CELLS 4

typedef struct cells {
  coll_report_cell_t c[CELLS];
  int unreadable; /* this cell's rank is not mapped */
} cells_t;

static coll_report_cell_t *cell_of(void *arg, int i) {
  cells_t *k = arg;
  return i == k->unreadable ? NULL : &k->c[i];
}

static void init(cells_t *k) {
  for (int i = 0; i < CELLS; i++) coll__report_cell_init(&k->c[i]);
  k->unreadable = -1;
}

static coll_report_board_t board(cells_t *k, int own) {
  return (coll_report_board_t){CELLS, own, cell_of, k};
}

static void test_tell_keeps_the_first(void **state) {
  cells_t k;
  coll_report_board_t b;
  char buf[COLL_DESYNC_REPORT_MAX];
  (void)state;
  init(&k);
  b = board(&k, 2);
  assert_int_equal(coll__board_heard(&b, -1, buf, sizeof buf), 0);
  coll__board_tell(&b, "rank 3 never entered it");
  coll__board_tell(&b, "a second report");
  assert_int_equal(coll__report_cell_get(&k.c[2], buf, sizeof buf), 1);
  assert_string_equal(buf, "rank 3 never entered it");
  assert_int_equal(coll__report_cell_get(&k.c[0], buf, sizeof buf), 0);
}

static void test_tell_cuts_to_fit(void **state) {
  cells_t k;
  coll_report_board_t b;
  char big[2 * COLL_DESYNC_REPORT_MAX], buf[2 * COLL_DESYNC_REPORT_MAX];
  (void)state;
  init(&k);
  b = board(&k, 0);
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  coll__board_tell(&b, big);
  assert_int_equal(coll__board_heard(&b, -1, buf, sizeof buf), 1);
  assert_int_equal(strlen(buf), COLL_DESYNC_REPORT_MAX - 1);
}

static void test_heard_prefers_the_origin(void **state) {
  cells_t k;
  coll_report_board_t mine;
  char buf[COLL_DESYNC_REPORT_MAX];
  (void)state;
  init(&k);
  mine = board(&k, 0);
  (void)coll__report_cell_keep(&k.c[1], "from rank 1", 11);
  (void)coll__report_cell_keep(&k.c[3], "from rank 3", 11);
  assert_int_equal(coll__board_heard(&mine, 3, buf, sizeof buf), 1);
  assert_string_equal(buf, "from rank 3");
  /* No origin, or one whose cell is empty: the first that holds one. */
  assert_int_equal(coll__board_heard(&mine, -1, buf, sizeof buf), 1);
  assert_string_equal(buf, "from rank 1");
  assert_int_equal(coll__board_heard(&mine, 2, buf, sizeof buf), 1);
  assert_string_equal(buf, "from rank 1");
  /* An origin out of range is no origin. */
  assert_int_equal(coll__board_heard(&mine, CELLS, buf, sizeof buf), 1);
  assert_string_equal(buf, "from rank 1");
  /* A cell that cannot be read is passed over. */
  k.unreadable = 1;
  assert_int_equal(coll__board_heard(&mine, 1, buf, sizeof buf), 1);
  assert_string_equal(buf, "from rank 3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tell_keeps_the_first),
      cmocka_unit_test(test_tell_cuts_to_fit),
      cmocka_unit_test(test_heard_prefers_the_origin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
