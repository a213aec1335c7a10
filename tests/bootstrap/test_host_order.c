/* SPDX-License-Identifier: Apache-2.0 */
/* test_host_order.c: the host identities the ranks publish at setup reach
 * the comm, through coll_tcp_create and coll_comm_init_store alike. Ranks
 * are threads of this process; the test hook gives each a host of its own
 * choosing ("A", "B", "A", "B": an interleaved numbering). Each rank checks
 * the host table its transport holds, its comm's walk order, and an
 * allreduce large enough for the two-level algorithm against the serial
 * sum. */
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
#include "test_kv.h"
#include "test_util.h"

#define WORLD 4
#define COUNT 100003 /* f64: above the ring threshold; uneven slices */

static const char *const k_hosts[WORLD] = {"A/net:1/ipc:1", "B/net:2/ipc:2",
                                           "A/net:1/ipc:1", "B/net:2/ipc:2"};
static const int k_host_of[WORLD] = {0, 1, 0, 1};
static const int k_order[WORLD] = {0, 2, 1, 3};

typedef struct job {
  int port;
  int by_store;
  test_kv_t *kv;
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  char wrong[WORLD][160];
} job_t;

/* What the comm learnt: every rank's host and the order by host. */
static void check_comm(job_t *j, int rank, coll_comm_t *c) {
  coll_cpu_t *cpu = c->be;
  const int *host_of = coll__t_hosts(cpu->t);
  int r;
  if (host_of == NULL) {
    snprintf(j->wrong[rank], sizeof j->wrong[rank], "no host table");
    return;
  }
  for (r = 0; r < WORLD; r++)
    if (host_of[r] != k_host_of[r]) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "rank %d is on host %d, not %d", r, host_of[r], k_host_of[r]);
      return;
    }
  if (cpu->topo.nhosts != 2 || cpu->topo.local != 2 ||
      cpu->topo.order == NULL) {
    snprintf(j->wrong[rank], sizeof j->wrong[rank],
             "topology: %d hosts of %d ranks", cpu->topo.nhosts,
             cpu->topo.local);
    return;
  }
  for (r = 0; r < WORLD; r++)
    if (cpu->topo.order[r] != k_order[r])
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "position %d is rank %d, not %d", r, cpu->topo.order[r],
               k_order[r]);
}

static void allreduce(job_t *j, int rank, coll_comm_t *c) {
  double *x = malloc(COUNT * sizeof *x);
  int i;
  if (x == NULL) {
    j->s[rank] = COLL_ERR_NO_MEMORY;
    return;
  }
  for (i = 0; i < COUNT; i++) x[i] = rank * 3 + i * 0.5;
  j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
  for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
    if (x[i] != 3.0 * WORLD * (WORLD - 1) / 2 + WORLD * i * 0.5) {
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "element %d is %g, not %g", i, x[i],
               3.0 * WORLD * (WORLD - 1) / 2 + WORLD * i * 0.5);
      break;
    }
  free(x);
}

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_t *c = NULL;
  if (j->by_store) {
    coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
    test_kv_view_t view = {.kv = j->kv};
    coll_store_ops_t ops;
    test_kv_ops(&view, &ops);
    cfg.timeout_ms = 30000;
    j->s[rank] = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  } else {
    coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
    coll_transport_t *t = NULL;
    cfg.rank = rank;
    cfg.world = world;
    cfg.master_addr = "127.0.0.1";
    cfg.master_port = j->port;
    cfg.timeout_ms = 30000;
    cfg.ifname = "lo";
    j->s[rank] = coll_tcp_create(&cfg, &t);
    /* Two ranks per host: crowded on one core, not on two (1 MiB against
     * 256 KiB segments, tcp_transport.c). */
    if (j->s[rank] == COLL_OK &&
        (coll__t_segment_bytes_for(t, 1) != 1u << 20 ||
         coll__t_segment_bytes_for(t, 2) != 256u << 10))
      snprintf(j->wrong[rank], sizeof j->wrong[rank],
               "segments %zu (1 core), %zu (2 cores)",
               coll__t_segment_bytes_for(t, 1),
               coll__t_segment_bytes_for(t, 2));
    if (j->s[rank] == COLL_OK) j->s[rank] = coll_comm_create(t, NULL, &c);
  }
  if (j->s[rank] == COLL_OK) {
    check_comm(j, rank, c);
    allreduce(j, rank, c);
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

static void run(int by_store) {
  job_t *j = calloc(1, sizeof *j);
  int r;
  assert_non_null(j);
  j->by_store = by_store;
  if (by_store) {
    j->kv = test_kv_new();
    assert_non_null(j->kv);
    setenv("COLL_SOCKET_IFNAME", "lo", 1);
  } else {
    j->port = bt_free_port("127.0.0.1");
    assert_true(j->port > 0);
  }
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, k_hosts, WORLD};
  test_run_ranks(WORLD, rank_main, j, 60000,
                 by_store ? "comm_init_store ranks" : "tcp_create ranks");
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  unsetenv("COLL_SOCKET_IFNAME");
  for (r = 0; r < WORLD; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    if (j->wrong[r][0] != '\0') fail_msg("rank %d: %s", r, j->wrong[r]);
  }
  if (j->kv != NULL) test_kv_free(j->kv);
  free(j);
}

static void test_tcp_create_hosts(void **state) {
  (void)state;
  run(0);
}

static void test_comm_init_store_hosts(void **state) {
  (void)state;
  run(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_create_hosts),
      cmocka_unit_test(test_comm_init_store_hosts),
  };
  unsetenv("COLL_ALGO");
  setenv("COLL_BACKEND", "cpu", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
