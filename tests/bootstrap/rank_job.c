/* SPDX-License-Identifier: Apache-2.0 */
/* rank_job.c: forked rank processes with shared result records and a
 * bounded wait (rank_job.h). */
#include "rank_job.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

static size_t records_bytes(const bt_job_t *j) {
  return j->out_size * BT_MAX_RANKS;
}

void bt_job_run(bt_job_t *j, int world, int kase, size_t out_size,
                int (*fn)(void *), int64_t timeout_ms) {
  pid_t pids[BT_MAX_RANKS];
  assert_true(world >= 1 && world <= BT_MAX_RANKS);
  memset(j, 0, sizeof *j);
  j->world = world;
  j->port = bt_free_port("127.0.0.1");
  j->kase = kase;
  j->out_size = out_size;
  j->out = mmap(NULL, records_bytes(j), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(j->out != MAP_FAILED);
  memset(j->out, 0, records_bytes(j));
  for (int r = 0; r < world; r++) {
    j->rank = r;
    pids[r] = bt_fork(fn, j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < world; r++) j->st[r] = bt_wait_child(pids[r], timeout_ms);
}

bt_rank_out_t *bt_job_out(const bt_job_t *j, int r) {
  return (bt_rank_out_t *)((char *)j->out + (size_t)r * j->out_size);
}

void bt_job_expect_ok(const bt_job_t *j, int skip) {
  for (int r = 0; r < j->world; r++) {
    const bt_rank_out_t *o = bt_job_out(j, r);
    if (r == skip) continue;
    if (o->status != 0) fail_msg("world %d rank %d: %s", j->world, r, o->msg);
    assert_int_equal(j->st[r], 0);
  }
}

void bt_job_end(bt_job_t *j) {
  if (j->out != NULL) munmap(j->out, records_bytes(j));
  j->out = NULL;
}

int bt_quick(void) {
  const char *q = getenv("TEST_QUICK");
  return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

int bt_same(const void *a, const void *b, size_t n, size_t *at) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) {
      *at = i;
      return 0;
    }
  return 1;
}
