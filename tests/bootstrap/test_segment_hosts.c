/* SPDX-License-Identifier: Apache-2.0 */
/* test_segment_hosts.c: ranks whose hosts would pick different pipeline
 * segments still cut the same ones. Over TCP a host whose ranks outnumber
 * its cores takes longer segments (tcp_transport.c), and the ring's
 * receiver posts one receive per segment of its own size, so ranks that
 * cut differently fail with a length mismatch. Ranks are threads of this
 * process over TCP on 127.0.0.1, confined to one core (the core count a
 * rank reads is its own affinity); the host identity test hook puts ranks
 * 0 and 1 on host A (crowded: 2 ranks, 1 core) and rank 2 alone on host B.
 * Each rank checks that the transport alone would have split them, that
 * the comm agreed on one segment, and a ring allreduce and a broadcast of
 * several segments per rank against the serial result, bit for bit. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/host_id.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "test_util.h"

#define WORLD 3
/* f32 elements: 2 MiB per rank's block of the ring, 6 MiB broadcast. */
#define COUNT (WORLD * (512u << 10))

static const char *const k_hosts[WORLD] = {"A/net:1/ipc:1", "A/net:1/ipc:1",
                                           "B/net:2/ipc:2"};

typedef struct job {
  int port;
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  char wrong[WORLD][160];
  size_t seg[WORLD];
} job_t;

/* Whole numbers well inside f32's exact range: any summation order gives
 * the serial sum exactly. */
static float value(int rank, size_t i) {
  return (float)((i * 7u + (size_t)rank * 13u) % 1000u);
}

static void check_allreduce(job_t *j, int rank, coll_comm_t *c) {
  float *x = malloc(COUNT * sizeof *x);
  size_t i;
  if (x == NULL) {
    j->s[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  for (i = 0; i < COUNT; i++) x[i] = value(rank, i);
  j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_F32, COLL_SUM, NULL);
  for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++) {
    float want = 0;
    for (int r = 0; r < WORLD; r++) want += value(r, i);
    if (x[i] != want) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "allreduce: element %zu is %g, not %g", i, x[i], want);
      break;
    }
  }
  free(x);
}

static void check_broadcast(job_t *j, int rank, coll_comm_t *c) {
  float *x = malloc(COUNT * sizeof *x);
  size_t i;
  if (x == NULL) {
    j->s[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  for (i = 0; i < COUNT; i++) x[i] = value(rank, i);
  /* Rooted on the uncrowded host: its segments go to the crowded one. */
  j->s[rank] = coll_broadcast(c, x, COUNT, COLL_F32, 2, NULL);
  for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
    if (x[i] != value(2, i)) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "broadcast: element %zu is %g, not %g", i, x[i], value(2, i));
      break;
    }
  free(x);
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_t *c = NULL;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  size_t own;
  cfg.rank = rank;
  cfg.world = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = j->port;
  cfg.timeout_ms = 60000;
  cfg.ifname = "lo";
  j->s[rank] = coll_tcp_create(&cfg, &t);
  if (j->s[rank] != COLL_OK) goto out;
  /* The transport's own choice: 1 MiB on crowded A, 256 KiB on B. */
  own = coll__t_segment_bytes_for(t, 1);
  if (own != (rank < 2 ? 1u << 20 : 256u << 10))
    snprintf(j->wrong[rank], sizeof j->wrong[rank],
             "the transport chose %zu-byte segments on host %c", own,
             rank < 2 ? 'A' : 'B');
  j->s[rank] = coll_comm_create(t, NULL, &c);
  if (j->s[rank] != COLL_OK) goto out;
  j->seg[rank] = ((coll_cpu_t *)c->be)->seg_bytes;
  check_allreduce(j, rank, c);
  if (j->s[rank] == COLL_OK && j->wrong[rank][0] == '\0')
    check_broadcast(j, rank, c);
out:
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static void test_one_segment_across_hosts(void **state) {
  job_t *j = calloc(1, sizeof *j);
  cpu_set_t all, one;
  int r;
  (void)state;
  assert_non_null(j);
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  /* The rank threads inherit this thread's single core. */
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  CPU_ZERO(&one);
  for (r = 0; r < CPU_SETSIZE; r++)
    if (CPU_ISSET(r, &all)) {
      CPU_SET(r, &one);
      break;
    }
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, k_hosts, WORLD};
  test_run_ranks(WORLD, rank_main, j, 120000, "ranks on hosts A, A, B");
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  for (r = 0; r < WORLD; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    if (j->wrong[r][0] != '\0') fail_msg("rank %d: %s", r, j->wrong[r]);
  }
  /* The longest any rank chose. */
  for (r = 0; r < WORLD; r++)
    if (j->seg[r] != 1u << 20)
      fail_msg("rank %d cuts %zu-byte segments, not 1 MiB", r, j->seg[r]);
  free(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_segment_across_hosts),
  };
  setenv("COLL_ALGO", "ring", 1);
  unsetenv("COLL_SEGMENT_BYTES");
  setenv("COLL_BACKEND", "cpu", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
