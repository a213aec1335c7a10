/* SPDX-License-Identifier: Apache-2.0 */
/* test_segment_hosts.c: ranks whose hosts would pick different pipeline
 * segments still cut the same ones. Over TCP a host whose ranks outnumber
 * its cores takes longer segments (tcp_transport.c), and the ring's
 * receiver posts one receive per segment of its own size, so ranks that
 * cut differently fail with a length mismatch. Ranks are threads of this
 * process over TCP on 127.0.0.1; the host identity test hook puts one rank
 * more than this host's cores on host A (crowded) and the last rank alone
 * on host B. Each rank checks that the transport alone would have split
 * them, that the comm agreed on one segment, and a ring allreduce and a
 * broadcast of several segments per rank against the serial result, bit
 * for bit. */
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
#include "core/cores.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "test_util.h"

/* Ranks on A: one more than the cores; with B's, at most this many. */
#define WORLD_MAX 9
/* f32 elements per rank: 2 MiB of each rank's block of the ring. */
#define PER_RANK (512u << 10)

typedef struct job {
  int port;
  int world; /* ranks 0..world-2 on A, world-1 on B */
  size_t count;
  const char *hosts[WORLD_MAX];
  coll_status_t s[WORLD_MAX];
  char why[WORLD_MAX][COLL_ERRMSG_MAX];
  char wrong[WORLD_MAX][160];
  size_t seg[WORLD_MAX];
} job_t;

/* Whole numbers well inside f32's exact range: any summation order gives
 * the serial sum exactly. */
static float value(int rank, size_t i) {
  return (float)((i * 7u + (size_t)rank * 13u) % 1000u);
}

static void check_allreduce(job_t *j, int rank, coll_comm_t *c) {
  float *x = malloc(j->count * sizeof *x);
  size_t i;
  if (x == NULL) {
    j->s[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  for (i = 0; i < j->count; i++) x[i] = value(rank, i);
  j->s[rank] = coll_allreduce(c, x, x, j->count, COLL_F32, COLL_SUM, NULL);
  for (i = 0; j->s[rank] == COLL_OK && i < j->count; i++) {
    float want = 0;
    for (int r = 0; r < j->world; r++) want += value(r, i);
    if (x[i] != want) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "allreduce: element %zu is %g, not %g", i, x[i], want);
      break;
    }
  }
  free(x);
}

static void check_broadcast(job_t *j, int rank, coll_comm_t *c) {
  float *x = malloc(j->count * sizeof *x);
  int root = j->world - 1;
  size_t i;
  if (x == NULL) {
    j->s[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  for (i = 0; i < j->count; i++) x[i] = value(rank, i);
  /* Rooted on the uncrowded host: its segments go to the crowded one. */
  j->s[rank] = coll_broadcast(c, x, j->count, COLL_F32, root, NULL);
  for (i = 0; j->s[rank] == COLL_OK && i < j->count; i++)
    if (x[i] != value(root, i)) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "broadcast: element %zu is %g, not %g", i, x[i], value(root, i));
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
  own = coll__t_segment_bytes_for(t, coll__host_cores());
  if (own != (rank < world - 1 ? 1u << 20 : 256u << 10))
    snprintf(j->wrong[rank], sizeof j->wrong[rank],
             "the transport chose %zu-byte segments on host %c", own,
             rank < world - 1 ? 'A' : 'B');
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
  unsigned cores = coll__host_cores();
  job_t *j;
  int r;
  (void)state;
  if (cores + 2 > WORLD_MAX) {
    print_message("a crowded host needs %u rank threads here\n", cores + 1);
    skip();
    return;
  }
  j = calloc(1, sizeof *j);
  assert_non_null(j);
  j->world = (int)cores + 2;
  j->count = (size_t)j->world * PER_RANK;
  for (r = 0; r < j->world; r++)
    j->hosts[r] = r < j->world - 1 ? "A/net:1/ipc:1" : "B/net:2/ipc:2";
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, j->hosts, j->world};
  test_run_ranks(j->world, rank_main, j, 120000, "ranks on hosts A and B");
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  for (r = 0; r < j->world; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    if (j->wrong[r][0] != '\0') fail_msg("rank %d: %s", r, j->wrong[r]);
  }
  /* The longest any rank chose. */
  for (r = 0; r < j->world; r++)
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
