/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_open.c: a job without a token says what that exposes. Ranks
 * are threads of this process on hosts of the test's choosing (the host
 * hook); this process's log is read back from a file:
 *   - ranks on two hosts without a token: every rank WARNs what anyone
 *     who reaches the store (or a listener) can do, through
 *     coll_tcp_create and coll_comm_init_store alike;
 *   - with a token, or on one host: no such warning;
 *   - clients of the store that the job did not expect (one that names no
 *     rank, one too many) are logged with their address. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/host_id.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 4

static const char *const k_two_hosts[WORLD] = {
    "A/net:1/ipc:1", "B/net:2/ipc:2", "A/net:1/ipc:1", "B/net:2/ipc:2"};
static const char *const k_one_host[WORLD] = {"A/net:1/ipc:1", "A/net:1/ipc:1",
                                              "A/net:1/ipc:1", "A/net:1/ipc:1"};

typedef struct job {
  int port;
  const char *token;
  test_kv_t *kv; /* NULL: coll_tcp_create */
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
} job_t;

/* ---- this process's log into a file ------------------------------------ */

static char log_path[64];
static int saved_stderr = -1;

static void log_capture(void) {
  int fd;
  snprintf(log_path, sizeof log_path, "/tmp/coll_open.%d", (int)getpid());
  fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  fflush(stderr);
  saved_stderr = dup(STDERR_FILENO);
  assert_true(saved_stderr >= 0);
  assert_true(dup2(fd, STDERR_FILENO) >= 0);
  close(fd);
}

/* Restores stderr and returns what was logged meanwhile (malloc'd). */
static char *log_release(void) {
  FILE *f;
  char *buf = calloc(1, 1 << 20);
  size_t n;
  fflush(stderr);
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  f = fopen(log_path, "r");
  assert_non_null(f);
  assert_non_null(buf);
  n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  unlink(log_path);
  fputs(buf, stderr);
  return buf;
}

/* ---- ranks ------------------------------------------------------------- */

static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_t *c = NULL;
  if (j->kv != NULL) {
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
    cfg.auth_token = j->token;
    j->s[rank] = coll_tcp_create(&cfg, &t);
    if (t != NULL) coll_transport_destroy(t);
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

/* Runs WORLD ranks on `hosts`; returns what they logged. */
static char *run(const char *const *hosts, const char *token, int by_store) {
  job_t j;
  char *log;
  int r;
  memset(&j, 0, sizeof j);
  j.port = bt_free_port("127.0.0.1");
  j.token = token;
  if (by_store) {
    j.kv = test_kv_new();
    assert_non_null(j.kv);
    setenv("COLL_SOCKET_IFNAME", "lo", 1);
    if (token != NULL) setenv("COLL_AUTH_TOKEN", token, 1);
  }
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, hosts, WORLD};
  log_capture();
  test_run_ranks(WORLD, rank_main, &j, 60000, "ranks");
  log = log_release();
  coll__host_id_test_hook = (coll_host_id_test_hook_t){-1, NULL, NULL, 0};
  unsetenv("COLL_SOCKET_IFNAME");
  unsetenv("COLL_AUTH_TOKEN");
  if (j.kv != NULL) test_kv_free(j.kv);
  for (r = 0; r < WORLD; r++)
    if (j.s[r] != COLL_OK) fail_msg("rank %d: %s", r, j.why[r]);
  return log;
}

static void every_rank_warns(const char *log, const char *what) {
  char want[160];
  int r;
  for (r = 0; r < WORLD; r++) {
    snprintf(want, sizeof want, "rank %d: the 4 ranks of this %s span 2 hosts",
             r, what);
    bt_must_contain(log, want);
  }
}

static void test_two_hosts_no_token(void **state) {
  char *log = run(k_two_hosts, NULL, 0);
  (void)state;
  every_rank_warns(log, "job");
  bt_must_contain(log,
                  "run without COLL_AUTH_TOKEN: anyone who can reach the "
                  "store at 127.0.0.1:");
  bt_must_contain(log,
                  "can read every rank's address, join as a rank and write "
                  "up to 1280 KiB into it, and anyone who reaches a rank's "
                  "listener can connect as a rank");
  free(log);
}

static void test_two_hosts_with_token(void **state) {
  char *log = run(k_two_hosts, "open-token", 0);
  (void)state;
  bt_must_not_contain(log, "without COLL_AUTH_TOKEN");
  free(log);
}

static void test_one_host_no_token(void **state) {
  char *log = run(k_one_host, NULL, 0);
  (void)state;
  bt_must_not_contain(log, "without COLL_AUTH_TOKEN");
  free(log);
}

static void test_store_init_two_hosts(void **state) {
  char *log = run(k_two_hosts, NULL, 1);
  (void)state;
  every_rank_warns(log, "comm");
  bt_must_contain(log,
                  "anyone who reaches a rank's listener can connect as a "
                  "rank");
  free(log);
  log = run(k_two_hosts, "open-token", 1);
  bt_must_not_contain(log, "without COLL_AUTH_TOKEN");
  free(log);
}

/* ---- clients the job did not expect ------------------------------------ */

typedef struct lone {
  int port;
  coll_status_t s;
} lone_t;

/* Rank 0 of 2, alone: its store stays up until its timeout. */
static void lone_rank0(void *arg) {
  lone_t *l = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  cfg.rank = 0;
  cfg.world = 2;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = l->port;
  cfg.timeout_ms = 3000;
  l->s = coll_tcp_create(&cfg, &t);
}

static coll_store_t *dial(int port, int rank) {
  coll_store_dial_t d;
  coll_store_t *st = NULL;
  memset(&d, 0, sizeof d);
  d.host = "127.0.0.1";
  d.port = port;
  d.rank = rank;
  d.timeout_ms = 10000;
  if (coll__store_dial(&d, &st) != COLL_OK)
    fail_msg("dial as rank %d: %s", rank, coll_last_error());
  return st;
}

static void test_unexpected_clients(void **state) {
  lone_t l = {bt_free_port("127.0.0.1"), COLL_OK};
  coll_store_t *a, *b, *c;
  uv_thread_t th;
  char *log;
  (void)state;
  log_capture();
  assert_int_equal(uv_thread_create(&th, lone_rank0, &l), 0);
  a = dial(l.port, -1); /* names no rank */
  b = dial(l.port, 1);  /* says it is the missing rank 1 */
  c = dial(l.port, 1);  /* and again: one too many */
  uv_thread_join(&th);
  coll__store_close(a);
  coll__store_close(b);
  coll__store_close(c);
  log = log_release();
  assert_int_equal(l.s, COLL_ERR_TIMEOUT);
  bt_must_contain(log, "a client at 127.0.0.1:");
  bt_must_contain(log,
                  "that is no rank of this job of 2 (it names no rank) "
                  "connected; without a token (COLL_AUTH_TOKEN) anyone who "
                  "reaches the store can join");
  /* Rank 0's own client may come before or after the first stranger. */
  bt_must_contain(log, "that says it is rank 1 makes ");
  bt_must_contain(log,
                  " clients for the 2 ranks of this job: two processes have "
                  "one rank, or a process from outside the job connected");
  free(log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_hosts_no_token),
      cmocka_unit_test(test_two_hosts_with_token),
      cmocka_unit_test(test_one_host_no_token),
      cmocka_unit_test(test_store_init_two_hosts),
      cmocka_unit_test(test_unexpected_clients),
  };
  setenv("COLL_BACKEND", "cpu", 1);
  unsetenv("COLL_AUTH_TOKEN");
  return cmocka_run_group_tests(tests, NULL, NULL);
}
