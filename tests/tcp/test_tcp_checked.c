/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_checked.c: the small allreduce with the mismatch check folded
 * into its first exchange, through public comms, with rank processes over
 * TCP on 127.0.0.1 (2, 3 and 4 ranks). Matching calls give the exact
 * result (f32 sum in place and out of place, f32 average, i8 sum through
 * the widened path); a rank that passes another count, a count large
 * enough for the ring (so it runs the standalone agreement), or another
 * collective makes every rank fail with COLL_ERR_LENGTH_MISMATCH naming
 * it, with the receive buffer untouched; and the comm keeps working. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcp_test_util.h"

#define COMM_TIMEOUT_MS 20000
#define JOB_MS 60000
#define SMALL 1024 /* 4 KiB of f32: the folded path */
#define BIG 100000 /* 400 KB of f32: the ring, standalone agreement */
#define SENTINEL -3.0f

/* Records the first wrong outcome for the parent; returns 1. */
static int wrong(tt_job_t *job, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int wrong(tt_job_t *job, int rank, const char *fmt, ...) {
  char text[TT_TEXT];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  tt_note(job, rank, COLL_ERR_INTERNAL, text);
  return 1;
}

/* A matching f32 sum of SMALL elements, out of place (send != recv) or in
 * place; checks every element. */
static int sum_ok(tt_job_t *job, coll_comm_t *c, float *a, float *b, int rank,
                  int world, int in_place, const char *when) {
  float *dst = in_place ? a : b;
  coll_status_t s;
  int i;
  for (i = 0; i < SMALL; i++) {
    a[i] = (float)(rank * 100 + i);
    b[i] = SENTINEL;
  }
  s = coll_allreduce(c, a, dst, SMALL, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_OK)
    return wrong(job, rank, "%s: sum: %s: %s", when, coll_status_name(s),
                 coll_last_error());
  for (i = 0; i < SMALL; i++)
    if (dst[i] != (float)(100 * world * (world - 1) / 2 + world * i))
      return wrong(job, rank, "%s: sum element %d is %g", when, i,
                   (double)dst[i]);
  return 0;
}

/* One mismatch case: `odd` calls what differs. Every rank must fail with
 * the text naming `want` (a strstr), and b must keep the sentinel. */
static int mismatch(tt_job_t *job, coll_comm_t *c, float *a, float *b, int rank,
                    int odd, int what, const char *want) {
  coll_status_t s;
  size_t count = SMALL, i;
  for (i = 0; i < BIG; i++) {
    a[i] = 1.0f;
    b[i] = SENTINEL;
  }
  if (rank == odd && what == 0) count = SMALL + 1;
  if (rank == odd && what == 1) count = BIG;
  if (rank == odd && what == 2)
    s = coll_broadcast(c, a, SMALL, COLL_F32, 0, NULL);
  else
    s = coll_allreduce(c, a, b, count, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_ERR_LENGTH_MISMATCH || strstr(coll_last_error(), want) == NULL)
    return wrong(job, rank, "case %d: %s: \"%s\", want \"%s\"", what,
                 coll_status_name(s), coll_last_error(), want);
  for (i = 0; i < BIG; i++)
    if (b[i] != SENTINEL)
      return wrong(job, rank, "case %d: the receive buffer was written", what);
  return 0;
}

static int rank_main(tt_job_t *job, int rank, int world, void *arg) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_transport_t *t;
  coll_comm_t *c;
  float *a = malloc(BIG * sizeof *a), *b = malloc(BIG * sizeof *b);
  int8_t v[64];
  char want[64];
  int rc = 0, what, odd, i;
  coll_status_t s;
  (void)arg;
  if (a == NULL || b == NULL) return wrong(job, rank, "out of memory");
  TRY(tt_create(job, rank, world, &t), "transport");
  cfg.timeout_ms = COMM_TIMEOUT_MS;
  TRY(coll_comm_create(t, &cfg, &c), "comm");
  rc = sum_ok(job, c, a, b, rank, world, 0, "first");
  for (odd = 0; odd < world && rc == 0; odd += world - 1)
    for (what = 0; what < 3 && rc == 0; what++) {
      if (what == 0)
        snprintf(want, sizeof want, "rank %d has count %d", odd, SMALL + 1);
      if (what == 1)
        snprintf(want, sizeof want, "rank %d has count %d", odd, BIG);
      if (what == 2) snprintf(want, sizeof want, "rank %d has collective", odd);
      rc = mismatch(job, c, a, b, rank, odd, what, want);
      if (rc == 0) rc = sum_ok(job, c, a, b, rank, world, what & 1, "after");
      if (odd == world - 1) break;
    }
  /* The average, in place, and an 8-bit sum (widened to i32 and back; the
   * sums stay within i8). */
  for (i = 0; i < SMALL && rc == 0; i++) a[i] = (float)(rank * world + i);
  if (rc == 0 &&
      (s = coll_allreduce(c, a, a, SMALL, COLL_F32, COLL_AVG, NULL)) != COLL_OK)
    rc =
        wrong(job, rank, "avg: %s: %s", coll_status_name(s), coll_last_error());
  for (i = 0; i < SMALL && rc == 0; i++)
    if (a[i] != (float)(world * (world - 1) / 2 + i))
      rc = wrong(job, rank, "avg element %d is %g", i, (double)a[i]);
  for (i = 0; i < 64; i++) v[i] = (int8_t)(rank - i % 32);
  if (rc == 0 &&
      (s = coll_allreduce(c, v, v, 64, COLL_I8, COLL_SUM, NULL)) != COLL_OK)
    rc = wrong(job, rank, "i8: %s: %s", coll_status_name(s), coll_last_error());
  for (i = 0; i < 64 && rc == 0; i++)
    if (v[i] != (int8_t)(world * (world - 1) / 2 - world * (i % 32)))
      rc = wrong(job, rank, "i8 element %d is %d", i, v[i]);
  coll_comm_destroy(c);
  free(a);
  free(b);
  return rc;
}

static void run_world(int world) {
  tt_job_t job;
  char msg[256];
  int r, rc;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  rc = tt_run(&job, world, rank_main, NULL, JOB_MS, msg, sizeof msg);
  for (r = 0; r < world; r++)
    if (job.sh->status[r] != COLL_OK)
      fprintf(stderr, "world %d rank %d: %s\n", world, r, job.sh->text[r]);
  tt_job_fini(&job);
  if (rc != 0) fail_msg("world %d: %s", world, msg);
}

static void test_two(void **state) {
  (void)state;
  run_world(2);
}
static void test_three(void **state) {
  (void)state;
  run_world(3);
}
static void test_four(void **state) {
  (void)state;
  run_world(4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two),
      cmocka_unit_test(test_three),
      cmocka_unit_test(test_four),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
