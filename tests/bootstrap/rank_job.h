/* SPDX-License-Identifier: Apache-2.0 */
/* rank_job.h: a job of forked rank processes on 127.0.0.1 for the
 * multi-process tests: one result record per rank in memory the test
 * process reads after the ranks exited, a bounded wait for each rank, and
 * the check that every rank exited 0 having recorded no failure. Rank
 * processes never call cmocka asserts; they record, the test asserts. */
#ifndef COLL_TEST_RANK_JOB_H
#define COLL_TEST_RANK_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "boot_test.h"

#define BT_MAX_RANKS 8

/* The start of every rank's record: its first failure and how many
 * collectives it checked. A test's record begins with one of these. */
typedef struct bt_rank_out {
  int status; /* coll_status_t of the step that failed; -1 a wrong result */
  char msg[400];
  int checked; /* collectives checked */
} bt_rank_out_t;

/* Records the rank's first failure in *o (a bt_rank_out_t *). */
#define bt_out_fail(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

typedef struct bt_job {
  int world, port, kase;
  int rank;             /* in a rank process: its own rank */
  void *out;            /* world records of out_size bytes, shared, zeroed */
  size_t out_size;      /* each begins with a bt_rank_out_t */
  int st[BT_MAX_RANKS]; /* each rank's exit status (bt_wait_child) */
} bt_job_t;

/* Forks `world` (1..BT_MAX_RANKS) rank processes, each running fn(j) with
 * j->rank its rank, on a port that was free a moment ago, then waits for
 * each in turn at most timeout_ms (a rank still running then is killed
 * and its status is -1). Fails the test when the records cannot be mapped
 * or a rank cannot be forked. */
void bt_job_run(bt_job_t *j, int world, int kase, size_t out_size,
                int (*fn)(void *), int64_t timeout_ms);
/* Rank r's record. */
bt_rank_out_t *bt_job_out(const bt_job_t *j, int r);
/* Fails the test unless every rank but `skip` (-1: none) recorded no
 * failure (its text is the message) and exited 0. */
void bt_job_expect_ok(const bt_job_t *j, int skip);
/* Unmaps the records. */
void bt_job_end(bt_job_t *j);

/* 1 when TEST_QUICK asks for the short variants. */
int bt_quick(void);
/* 1 if the n bytes at a and b are the same, else 0 with *at the first
 * that differs. */
int bt_same(const void *a, const void *b, size_t n, size_t *at);

#endif
