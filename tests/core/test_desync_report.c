/* SPDX-License-Identifier: Apache-2.0 */
/* test_desync_report.c: the sentence of a desync report from given
 * positions (core/desync.c), and the position seqlock (core/position.c):
 * each rank's place in the text, the groups, a report cut at its buffer,
 * and a snapshot read while another thread writes is never torn. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/desync.h"
#include "core/work.h"

#define W 6

/* Rank r inside collective (kind, seq). */
static void in_call(coll_pos_snap_t *p, int kind, uint64_t seq) {
  memset(p, 0, sizeof *p);
  p->seq = seq;
  p->kind = kind;
  p->in_call = 1;
  p->root = -1;
}

static void in_user_code(coll_pos_snap_t *p, int kind, uint64_t seq) {
  in_call(p, kind, seq);
  p->in_call = 0;
}

static void test_every_place(void **state) {
  coll_pos_snap_t pos[W];
  unsigned char answered[W] = {1, 1, 1, 1, 1, 0};
  char buf[COLL_DESYNC_REPORT_MAX];
  (void)state;
  in_call(&pos[0], COLL_WORK_ALLREDUCE, 41);      /* self */
  in_call(&pos[1], COLL_WORK_BROADCAST, 40);      /* behind */
  in_call(&pos[2], COLL_WORK_ALLREDUCE, 41);      /* with us */
  in_user_code(&pos[3], COLL_WORK_ALLREDUCE, 40); /* skipped */
  in_user_code(&pos[4], COLL_WORK_ALLREDUCE, 40); /* in a recv */
  pos[4].p2p = COLL_POS_P2P_RECV;
  pos[4].p2p_peer = 2;
  pos[4].p2p_tag = 9;
  memset(&pos[5], 0, sizeof pos[5]); /* silent */
  coll__desync_report(0, W, pos, answered, 10000, buf, sizeof buf);
  assert_string_equal(buf,
                      "allreduce #41 timed out after 10.0 s: rank 1 is still "
                      "in broadcast #40; rank 3 never entered it (last "
                      "finished allreduce #40); rank 4 is in recv from rank "
                      "2 (tag 9); rank 5 did not answer; ranks 0,2 are in it");
}

static void test_ahead_left_and_fresh(void **state) {
  coll_pos_snap_t pos[3];
  unsigned char answered[3] = {1, 1, 1};
  char buf[COLL_DESYNC_REPORT_MAX];
  (void)state;
  in_call(&pos[0], COLL_WORK_BARRIER, 2);
  in_user_code(&pos[1], COLL_WORK_BARRIER, 2); /* finished it */
  memset(&pos[2], 0, sizeof pos[2]);           /* no collective yet */
  coll__desync_report(0, 3, pos, answered, -1, buf, sizeof buf);
  assert_string_equal(buf,
                      "barrier #2 timed out: rank 1 has left it (last "
                      "finished barrier #2); rank 2 never entered it (no "
                      "collective yet); rank 0 is in it");
  in_call(&pos[1], COLL_WORK_BROADCAST, 3); /* ahead */
  coll__desync_report(0, 3, pos, answered, 500, buf, sizeof buf);
  assert_non_null(strstr(buf,
                         "barrier #2 timed out after 0.5 s: rank 1 is in "
                         "broadcast #3;"));
}

/* A rank whose own point-to-point call timed out. */
static void test_p2p_self(void **state) {
  coll_pos_snap_t pos[2];
  unsigned char answered[2] = {1, 1};
  char buf[COLL_DESYNC_REPORT_MAX];
  (void)state;
  in_user_code(&pos[0], COLL_WORK_ALLREDUCE, 1);
  pos[0].p2p = COLL_POS_P2P_SEND;
  pos[0].p2p_peer = 1;
  pos[0].p2p_tag = 3;
  in_call(&pos[1], COLL_WORK_ALLREDUCE, 2);
  coll__desync_report(0, 2, pos, answered, 1000, buf, sizeof buf);
  assert_string_equal(buf,
                      "send to rank 1 (tag 3) timed out after 1.0 s: rank 1 "
                      "is in allreduce #2");
}

/* Many ranks: the text is cut at the buffer, always terminated. */
static void test_cut(void **state) {
  enum { N = 200 };
  static coll_pos_snap_t pos[N];
  static unsigned char answered[N];
  char buf[64];
  int r;
  (void)state;
  for (r = 0; r < N; r++) {
    in_call(&pos[r], COLL_WORK_BROADCAST, 1);
    answered[r] = 1;
  }
  in_call(&pos[0], COLL_WORK_ALLREDUCE, 7);
  memset(buf, 'x', sizeof buf);
  coll__desync_report(0, N, pos, answered, 1000, buf, sizeof buf);
  assert_int_equal(strlen(buf), sizeof buf - 1);
  assert_memory_equal(buf, "allreduce #7 timed out after 1.0 s: rank 1", 42);
}

/* ---- the seqlock ------------------------------------------------------- */

static coll_pos_t g_pos;
static atomic_int g_stop;

/* Enters collectives whose fields all derive from seq, so a torn read
 * shows as fields that disagree. A short pause between two collectives
 * (a real one takes microseconds): a reader facing a writer that never
 * stops gives up after a bounded number of tries (position.c), which only
 * a writer that died mid-write could make it do in earnest. */
static void *writer(void *arg) {
  volatile unsigned spin;
  uint64_t k;
  (void)arg;
  for (k = 1; !atomic_load(&g_stop) && k < 2000000; k++) {
    coll__pos_enter(&g_pos, (int)(k % 11) + 1, (int)(k % 5), (int)(k % 7),
                    k * 3, (int)(k % 4));
    coll__pos_leave(&g_pos);
    for (spin = 0; spin < 64; spin++) {
    }
  }
  atomic_store(&g_stop, 1);
  return NULL;
}

static void test_seqlock_never_torn(void **state) {
  pthread_t th;
  long reads = 0, torn = 0, unsettled = 0;
  (void)state;
  coll__pos_init(&g_pos);
  atomic_init(&g_stop, 0);
  assert_int_equal(pthread_create(&th, NULL, writer, NULL), 0);
  while (!atomic_load(&g_stop) && reads < 200000) {
    coll_pos_snap_t s;
    coll__pos_read(&g_pos, &s);
    reads++;
    /* A read that outlasted a descheduled writer says so; it is not
     * torn unless it claims to be settled. */
    if (s.seq == 0 || s.unsettled) {
      unsettled += s.unsettled;
      continue;
    }
    if (s.kind != (int)(s.seq % 11) + 1 || s.op != (int)(s.seq % 5) ||
        s.dtype != (int)(s.seq % 7) || s.count != s.seq * 3 ||
        s.root != (int)(s.seq % 4))
      torn++;
  }
  atomic_store(&g_stop, 1);
  pthread_join(th, NULL);
  assert_int_equal(torn, 0);
  /* Most reads settle: a reader that always gave up would test nothing. */
  assert_true(unsettled * 10 < reads);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_place),
      cmocka_unit_test(test_ahead_left_and_fresh),
      cmocka_unit_test(test_p2p_self),
      cmocka_unit_test(test_cut),
      cmocka_unit_test(test_seqlock_never_torn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
