/* SPDX-License-Identifier: Apache-2.0 */
/* test_env_local.c: env:// jobs of real processes on this host: three
 * env_rank processes over IPv4 loopback, then over IPv6 loopback, each
 * checking its collective results; and a job whose ranks disagree on the
 * auth token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "test_util.h"

#ifndef ENV_RANK_PATH
#error "ENV_RANK_PATH must name the env_rank program"
#endif

#define WORLD 3

typedef struct rank_env {
  int rank;
  const char *addr;
  int port;
  const char *token;  /* NULL: unset */
  const char *expect; /* NULL: must succeed; else --expect-fail text */
} rank_env_t;

static int exec_rank(void *p) {
  rank_env_t *e = p;
  char v[32];
  snprintf(v, sizeof v, "%d", e->rank);
  setenv("RANK", v, 1);
  snprintf(v, sizeof v, "%d", WORLD);
  setenv("WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", e->addr, 1);
  snprintf(v, sizeof v, "%d", e->port);
  setenv("MASTER_PORT", v, 1);
  setenv("COLL_TIMEOUT_MS", e->expect ? "3000" : "30000", 1);
  unsetenv("COLL_SOCKET_IFNAME");
  if (e->token != NULL)
    setenv("COLL_AUTH_TOKEN", e->token, 1);
  else
    unsetenv("COLL_AUTH_TOKEN");
  if (e->expect != NULL)
    execl(ENV_RANK_PATH, "env_rank", "--expect-fail", e->expect, (char *)NULL);
  else
    execl(ENV_RANK_PATH, "env_rank", (char *)NULL);
  perror("execl " ENV_RANK_PATH);
  return 127;
}

static void run_job(rank_env_t *e) {
  pid_t pids[WORLD];
  int i, rc;
  for (i = 0; i < WORLD; i++) {
    pids[i] = bt_fork(exec_rank, &e[i]);
    assert_true(pids[i] > 0);
  }
  for (i = 0; i < WORLD; i++) {
    rc = bt_wait_child(pids[i], 60000);
    if (rc != 0) fail_msg("rank %d exited with %d (see its stderr)", i, rc);
  }
}

static void job_on(const char *addr) {
  rank_env_t e[WORLD];
  int port = bt_free_port(addr), i;
  assert_true(port > 0);
  for (i = 0; i < WORLD; i++) e[i] = (rank_env_t){i, addr, port, "tok", NULL};
  run_job(e);
}

static void test_ipv4_loopback(void **state) {
  (void)state;
  job_on("127.0.0.1");
}

static void test_ipv6_loopback(void **state) {
  (void)state;
  if (bt_free_port("::1") <= 0) {
    print_message("no IPv6 loopback here; skipped\n");
    skip();
  }
  job_on("::1");
}

/* Rank 2 has another token: the store refuses it, and ranks 0 and 1 time
 * out naming rank 2. */
static void test_token_mismatch(void **state) {
  rank_env_t e[WORLD];
  int port = bt_free_port("127.0.0.1");
  (void)state;
  e[0] = (rank_env_t){0, "127.0.0.1", port, "right", "rank 2"};
  e[1] = (rank_env_t){1, "127.0.0.1", port, "right", "rank 2"};
  e[2] = (rank_env_t){2, "127.0.0.1", port, "wrong", "token mismatch"};
  run_job(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_loopback),
      cmocka_unit_test(test_ipv6_loopback),
      cmocka_unit_test(test_token_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
