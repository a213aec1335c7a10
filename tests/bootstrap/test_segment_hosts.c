/* SPDX-License-Identifier: Apache-2.0 */
/* test_segment_hosts.c: ranks whose hosts would pick different pipeline
 * segments still cut the same ones. Over TCP a host whose ranks outnumber
 * its cores takes longer segments (tcp_transport.c), and the ring's
 * receiver posts one receive per segment of its own size, so ranks that
 * cut differently fail with a length mismatch. Ranks are threads of this
 * process over TCP on 127.0.0.1, placed by the host identity test hook:
 * one rank more than this host's cores on host A (crowded) and the last
 * rank alone on host B; a rank on each of three hosts; two ranks on one
 * host. Each rank checks what the transport alone would choose, what the
 * comm agreed on (the segment, and what it grows to: within a host only),
 * and a ring allreduce and a broadcast of several segments per rank
 * against the serial result, bit for bit. And rank processes: one that
 * dies before the agreement fails the others' creation, naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
  int world;
  size_t count;
  const char *hosts[WORLD_MAX];
  size_t own[WORLD_MAX]; /* the transport's answer each rank must see */
  coll_status_t s[WORLD_MAX];
  char why[WORLD_MAX][COLL_ERRMSG_MAX];
  char wrong[WORLD_MAX][160];
  size_t seg[WORLD_MAX], seg_max[WORLD_MAX]; /* what each comm cuts */
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
  own = coll__t_segment_bytes_for(t, coll__host_cores());
  if (own != j->own[rank])
    snprintf(j->wrong[rank], sizeof j->wrong[rank],
             "the transport chose %zu-byte segments on host %s, not %zu", own,
             j->hosts[rank], j->own[rank]);
  j->s[rank] = coll_comm_create(t, NULL, &c);
  if (j->s[rank] != COLL_OK) goto out;
  j->seg[rank] = ((coll_cpu_t *)c->be)->tune.seg_bytes;
  j->seg_max[rank] = ((coll_cpu_t *)c->be)->tune.seg_max_bytes;
  check_allreduce(j, rank, c);
  if (j->s[rank] == COLL_OK && j->wrong[rank][0] == '\0')
    check_broadcast(j, rank, c);
out:
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

/* Runs j's ranks (hosts, the transport's answers and the count set) and
 * checks that every comm cuts seg bytes, growing up to seg_max. */
static void run(job_t *j, size_t seg, size_t seg_max) {
  int r;
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, j->hosts, j->world};
  test_run_ranks(j->world, rank_main, j, 120000, "ranks on faked hosts");
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  for (r = 0; r < j->world; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    if (j->wrong[r][0] != '\0') fail_msg("rank %d: %s", r, j->wrong[r]);
  }
  for (r = 0; r < j->world; r++)
    if (j->seg[r] != seg || j->seg_max[r] != seg_max)
      fail_msg("rank %d cuts %zu-byte segments growing to %zu, not %zu to %zu",
               r, j->seg[r], j->seg_max[r], seg, seg_max);
}

/* Host A crowded (one rank more than the cores), B not: the longest any
 * rank chose, on every rank. */
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
  for (r = 0; r < j->world; r++) {
    j->hosts[r] = r < j->world - 1 ? "A/net:1/ipc:1" : "B/net:2/ipc:2";
    j->own[r] = r < j->world - 1 ? 1u << 20 : 256u << 10;
  }
  run(j, 1u << 20, 1u << 20);
  free(j);
}

/* A rank alone on each of 3 hosts: 256 KiB, and no growing across hosts
 * (cpu_comm.c: a slow link hides a message's own cost). */
static void test_no_growth_across_hosts(void **state) {
  static const char *const hosts[3] = {"A/net:1/ipc:1", "B/net:2/ipc:2",
                                       "C/net:3/ipc:3"};
  job_t *j = calloc(1, sizeof *j);
  int r;
  (void)state;
  assert_non_null(j);
  j->world = 3;
  j->count = (size_t)j->world * PER_RANK;
  for (r = 0; r < j->world; r++) {
    j->hosts[r] = hosts[r];
    j->own[r] = 256u << 10;
  }
  run(j, 256u << 10, 256u << 10);
  free(j);
}

/* Two ranks on one host with a core each: 256 KiB growing to 1 MiB. */
static void test_growth_within_a_host(void **state) {
  job_t *j;
  (void)state;
  if (coll__host_cores() < 2) {
    print_message("two ranks crowd a host of one core\n");
    skip();
    return;
  }
  j = calloc(1, sizeof *j);
  assert_non_null(j);
  j->world = 2;
  j->count = (size_t)j->world * PER_RANK;
  j->hosts[0] = j->hosts[1] = "A/net:1/ipc:1";
  j->own[0] = j->own[1] = 256u << 10;
  run(j, 256u << 10, 1u << 20);
  free(j);
}

/* ---- a rank that dies before the agreement -------------------------------
 * Rank processes over TCP; rank 2 builds its transport and exits before
 * coll_comm_create: the others' creation, which agrees on the segment
 * through rank 2, must fail naming it, promptly (not at the comm's 20 s
 * timeout), and leave no comm. */

#define DIE_WORLD 3
#define DIE_VICTIM 2

typedef struct die_out {
  int status[DIE_WORLD];
  char msg[DIE_WORLD][COLL_ERRMSG_MAX];
  int64_t took_ms[DIE_WORLD];
} die_out_t;

typedef struct die_arg {
  die_out_t *out; /* MAP_SHARED */
  int port, rank;
} die_arg_t;

static int die_rank(void *p) {
  die_arg_t *a = p;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL;
  coll_comm_config_t cc = COLL_COMM_CONFIG_INIT;
  coll_status_t s;
  int64_t t0;
  cfg.rank = a->rank;
  cfg.world = DIE_WORLD;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = a->port;
  cfg.timeout_ms = 20000;
  cfg.ifname = "lo";
  s = coll_tcp_create(&cfg, &t);
  if (s != COLL_OK) {
    a->out->status[a->rank] = s;
    snprintf(a->out->msg[a->rank], COLL_ERRMSG_MAX, "tcp_create: %s",
             coll_last_error());
    return 1;
  }
  if (a->rank == DIE_VICTIM) _exit(0);
  cc.timeout_ms = 20000;
  t0 = test_now_ms();
  s = coll_comm_create(t, &cc, &c);
  a->out->took_ms[a->rank] = test_now_ms() - t0;
  a->out->status[a->rank] = s;
  snprintf(a->out->msg[a->rank], COLL_ERRMSG_MAX, "%s",
           s == COLL_OK ? "" : coll_last_error());
  if (c != NULL) coll_comm_destroy(c);
  return 0;
}

static void test_rank_dies_before_the_agreement(void **state) {
  die_out_t *out = mmap(NULL, sizeof *out, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  die_arg_t args[DIE_WORLD];
  pid_t pids[DIE_WORLD];
  int port = bt_free_port("127.0.0.1"), r;
  (void)state;
  assert_true(out != MAP_FAILED);
  assert_true(port > 0);
  memset(out, 0, sizeof *out);
  for (r = 0; r < DIE_WORLD; r++) {
    args[r] = (die_arg_t){out, port, r};
    pids[r] = bt_fork(die_rank, &args[r]);
    assert_true(pids[r] > 0);
  }
  for (r = 0; r < DIE_WORLD; r++)
    if (bt_wait_child(pids[r], 60000) != 0)
      fail_msg("rank %d did not end well: %s", r, out->msg[r]);
  for (r = 0; r < DIE_WORLD; r++) {
    if (r == DIE_VICTIM) continue;
    if (out->status[r] != COLL_ERR_PEER_LOST ||
        strstr(out->msg[r], "rank 2") == NULL)
      fail_msg("rank %d: want ERR_PEER_LOST naming rank 2, got %s: %s", r,
               coll_status_name((coll_status_t)out->status[r]), out->msg[r]);
    if (out->took_ms[r] > 10000)
      fail_msg("rank %d took %lld ms to fail", r, (long long)out->took_ms[r]);
  }
  munmap(out, sizeof *out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_segment_across_hosts),
      cmocka_unit_test(test_no_growth_across_hosts),
      cmocka_unit_test(test_growth_within_a_host),
      cmocka_unit_test(test_rank_dies_before_the_agreement),
  };
  setenv("COLL_ALGO", "ring", 1);
  setenv("COLL_TRANSPORT", "tcp", 1); /* also for ranks of one host */
  unsetenv("COLL_SEGMENT_BYTES");
  setenv("COLL_BACKEND", "cpu", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
