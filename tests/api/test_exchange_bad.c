/* SPDX-License-Identifier: Apache-2.0 */
/* test_exchange_bad.c: gather, scatter, alltoall and alltoallv refuse bad
 * arguments with COLL_ERR_INVALID_ARG and a sentence naming the call,
 * before anything is sent (one rank of two calls them alone, and the comm
 * then still works for both); a refused i-form leaves no request. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"

static float g_a[64], g_b[64];

/* This comm is rank 0 of 2: the root's checks apply when root is 0. */
static void gather_scatter(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  coll_request_t *req;
  BAD(coll_gather(NULL, a, b, 4, COLL_F32, 0, NULL), "gather");
  BAD(coll_gather(c, NULL, b, 4, COLL_F32, 0, NULL), "gather: send");
  BAD(coll_gather(c, a, NULL, 4, COLL_F32, 0, NULL), "gather: recv");
  BAD(coll_gather(c, a, b, 4, COLL_DTYPE_COUNT, 0, NULL), "gather");
  BAD(coll_gather(c, a, b, 4, COLL_F32, -1, NULL), "root");
  BAD(coll_gather(c, a, b, 4, COLL_F32, 2, NULL), "root");
  BAD(coll_gather(c, a, b, SIZE_MAX / 4, COLL_F32, 0, NULL), "gather");
  /* send overlaps recv without being the root's own block */
  BAD(coll_gather(c, a + 2, a, 4, COLL_F32, 0, NULL), "overlap");
  BAD(coll_igather(c, a, b, 4, COLL_F32, 0, NULL, NULL), "igather");
  req = (coll_request_t *)a;
  BAD(coll_igather(c, a, b, 4, COLL_F32, 9, NULL, &req), "gather");
  CHECK(req == NULL);

  BAD(coll_scatter(NULL, a, b, 4, COLL_F32, 0, NULL), "scatter");
  BAD(coll_scatter(c, NULL, b, 4, COLL_F32, 0, NULL), "scatter: send");
  BAD(coll_scatter(c, a, NULL, 4, COLL_F32, 0, NULL), "scatter: recv");
  BAD(coll_scatter(c, a, b, 4, (coll_dtype_t)-1, 0, NULL), "scatter");
  BAD(coll_scatter(c, a, b, 4, COLL_F32, INT_MAX, NULL), "root");
  BAD(coll_scatter(c, a, b, SIZE_MAX / 2, COLL_F32, 0, NULL), "scatter");
  BAD(coll_scatter(c, a, a + 3, 4, COLL_F32, 0, NULL), "overlap");
  BAD(coll_iscatter(c, a, b, 4, COLL_F32, 0, NULL, NULL), "iscatter");
  req = (coll_request_t *)a;
  BAD(coll_iscatter(c, NULL, b, 4, COLL_F32, 0, NULL, &req), "scatter");
  CHECK(req == NULL);
}

static void alltoall(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  coll_request_t *req;
  BAD(coll_alltoall(NULL, a, b, 4, COLL_F32, NULL), "alltoall");
  BAD(coll_alltoall(c, NULL, b, 4, COLL_F32, NULL), "alltoall: send");
  BAD(coll_alltoall(c, a, NULL, 4, COLL_F32, NULL), "alltoall: recv");
  BAD(coll_alltoall(c, a, b, 4, COLL_DTYPE_COUNT, NULL), "alltoall");
  BAD(coll_alltoall(c, a, b, SIZE_MAX / 8, COLL_F32, NULL), "alltoall");
  BAD(coll_alltoall(c, a, a, 4, COLL_F32, NULL), "in-place");
  BAD(coll_alltoall(c, a, a + 7, 4, COLL_F32, NULL), "in-place");
  BAD(coll_ialltoall(c, a, b, 4, COLL_F32, NULL, NULL), "ialltoall");
  req = (coll_request_t *)a;
  BAD(coll_ialltoall(c, a, a, 4, COLL_F32, NULL, &req), "alltoall");
  CHECK(req == NULL);
}

static void alltoallv(coll_comm_t *c) {
  float *a = g_a, *b = g_b;
  size_t cnt[2] = {2, 3}, dsp[2] = {0, 2}, far[2] = {0, SIZE_MAX / 8};
  size_t zero[2] = {0, 0}, big[2] = {SIZE_MAX / 2, 1};
  coll_request_t *req;
  BAD(coll_alltoallv(NULL, a, cnt, dsp, b, cnt, dsp, COLL_F32, NULL),
      "alltoallv");
  BAD(coll_alltoallv(c, a, NULL, dsp, b, cnt, dsp, COLL_F32, NULL),
      "send_counts");
  BAD(coll_alltoallv(c, a, cnt, NULL, b, cnt, dsp, COLL_F32, NULL),
      "send_displs");
  BAD(coll_alltoallv(c, a, cnt, dsp, b, NULL, dsp, COLL_F32, NULL),
      "recv_counts");
  BAD(coll_alltoallv(c, a, cnt, dsp, b, cnt, NULL, COLL_F32, NULL),
      "recv_displs");
  BAD(coll_alltoallv(c, a, cnt, dsp, b, cnt, dsp, COLL_DTYPE_COUNT, NULL),
      "alltoallv");
  BAD(coll_alltoallv(c, NULL, cnt, dsp, b, cnt, dsp, COLL_F32, NULL),
      "send buffer is NULL");
  BAD(coll_alltoallv(c, a, cnt, dsp, NULL, cnt, dsp, COLL_F32, NULL),
      "recv buffer is NULL");
  BAD(coll_alltoallv(c, a, cnt, far, b, cnt, dsp, COLL_F32, NULL),
      "address space");
  BAD(coll_alltoallv(c, a, big, dsp, b, cnt, dsp, COLL_F32, NULL),
      "address space");
  /* Receive blocks that share bytes, with each other or with a send. */
  {
    size_t rd[2] = {0, 1};
    BAD(coll_alltoallv(c, a, cnt, dsp, b, cnt, rd, COLL_F32, NULL),
        "recv block of rank 1 overlaps the recv block of rank 0");
    BAD(coll_alltoallv(c, a, cnt, dsp, a + 4, cnt, dsp, COLL_F32, NULL),
        "overlaps");
  }
  /* Sends may share bytes (one block to several ranks): accepted, so it
   * is not called here alone; empty blocks need no buffer. The overlap of
   * sends is exercised by the allgatherv cases of test_exchange. */
  BAD(coll_ialltoallv(c, a, cnt, dsp, b, cnt, dsp, COLL_F32, NULL, NULL),
      "ialltoallv");
  req = (coll_request_t *)a;
  BAD(coll_ialltoallv(c, NULL, cnt, dsp, NULL, zero, zero, COLL_F32, NULL,
                      &req),
      "send buffer is NULL");
  CHECK(req == NULL);
}

/* After the refusals: both ranks gather, scatter and exchange. */
typedef struct after {
  coll_comm_t **c;
  coll_status_t s[2];
} after_t;

static void after_rank(int rank, int world, void *p) {
  after_t *x = p;
  int32_t mine = rank + 10, all[2] = {0, 0}, back = -1, to[2], from[2];
  size_t cnt[2] = {1, 1}, dsp[2] = {0, 1};
  coll_status_t s;
  (void)world;
  s = coll_gather(x->c[rank], &mine, rank == 1 ? all : NULL, 1, COLL_I32, 1,
                  NULL);
  if (s == COLL_OK && rank == 1 && (all[0] != 10 || all[1] != 11))
    s = COLL_ERR_INTERNAL;
  if (s == COLL_OK)
    s = coll_scatter(x->c[rank], rank == 1 ? all : NULL, &back, 1, COLL_I32, 1,
                     NULL);
  if (s == COLL_OK && back != rank + 10) s = COLL_ERR_INTERNAL;
  to[0] = rank * 2;
  to[1] = rank * 2 + 1;
  if (s == COLL_OK)
    s = coll_alltoallv(x->c[rank], to, cnt, dsp, from, cnt, dsp, COLL_I32,
                       NULL);
  if (s == COLL_OK && (from[0] != rank || from[1] != 2 + rank))
    s = COLL_ERR_INTERNAL;
  x->s[rank] = s;
}

static void test_refusals(void **state) {
  coll_comm_t *c[2];
  after_t x;
  (void)state;
  bi_begin();
  assert_int_equal(test_inproc_comms(2, SHORT_TIMEOUT_MS, c), 0);
  gather_scatter(c[0]);
  alltoall(c[0]);
  alltoallv(c[0]);
  x.c = c;
  test_run_ranks(2, after_rank, &x, RUN_TIMEOUT_MS, "after the refusals");
  CHECK(x.s[0] == COLL_OK);
  CHECK(x.s[1] == COLL_OK);
  test_destroy_comms(2, c);
  bi_end("exchange refusals");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
