/* SPDX-License-Identifier: Apache-2.0 */
/* test_exchange.c: gather, scatter, alltoall and alltoallv (blocking and
 * nonblocking, in place and not, every root, counts from 0 to large,
 * alltoallv with empty blocks, gaps and the allgatherv pattern) against
 * the serial reference of exchange_rank.c, at 1 to 4 ranks over every
 * transport: threads over the in-process transport, and forked processes
 * over TCP and over shared memory. Then counts that differ between two
 * ranks: a mismatch on every rank, and the comm keeps working. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "exchange_rank.h"
#include "rank_procs.h"

#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 240000

static void body(coll_comm_t *c, int rank, int world, void *out) {
  xr_opts_t o;
  (void)rank, (void)world;
  memset(&o, 0, sizeof o);
  o.quick = t_quick();
  o.mismatch = 1;
  xr_run(c, &o, out);
}

static void run(int world, const char *transport) {
  xr_out_t out[4];
  int r, bad = 0;
  bad = rp_run(world, transport, COMM_TIMEOUT_MS, RUN_TIMEOUT_MS, body, out,
               sizeof out[0]) != 0;
  for (r = 0; r < world; r++) {
    if (out[r].failed)
      fprintf(stderr, "%s, world %d: %s\n", transport, world, out[r].msg);
    else if (out[r].checked == 0)
      fprintf(stderr, "%s, world %d: rank %d checked nothing\n", transport,
              world, r);
    bad |= out[r].failed || out[r].checked == 0;
  }
  assert_int_equal(bad, 0);
}

#define WORLDS(t)                                      \
  static void t##_1(void **s) { (void)s, run(1, #t); } \
  static void t##_2(void **s) { (void)s, run(2, #t); } \
  static void t##_3(void **s) { (void)s, run(3, #t); } \
  static void t##_4(void **s) { (void)s, run(4, #t); }
WORLDS(inproc)
WORLDS(tcp)
WORLDS(shm)

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(inproc_1), cmocka_unit_test(inproc_2),
      cmocka_unit_test(inproc_3), cmocka_unit_test(inproc_4),
      cmocka_unit_test(tcp_1),    cmocka_unit_test(tcp_2),
      cmocka_unit_test(tcp_3),    cmocka_unit_test(tcp_4),
      cmocka_unit_test(shm_1),    cmocka_unit_test(shm_2),
      cmocka_unit_test(shm_3),    cmocka_unit_test(shm_4),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
