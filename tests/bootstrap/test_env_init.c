/* SPDX-License-Identifier: Apache-2.0 */
/* test_env_init.c: coll_comm_init_env's errors (each variable missing,
 * non-numeric, out of range; MASTER_ADDR that does not resolve; a bad
 * interface; MASTER_PORT in use; ranks that never arrive or arrive twice),
 * coll_tcp_create's config checks, and the local address choice. Cases
 * with several ranks fork one process per rank, since the environment is
 * per process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "test_util.h"

/* Sets the four torchrun variables; NULL unsets one. */
static void set_env(const char *rank, const char *world, const char *addr,
                    const char *port) {
  const char *names[4] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  const char *vals[4] = {rank, world, addr, port};
  int i;
  for (i = 0; i < 4; i++) {
    if (vals[i] != NULL)
      setenv(names[i], vals[i], 1);
    else
      unsetenv(names[i]);
  }
  unsetenv("COLL_SOCKET_IFNAME");
  unsetenv("COLL_AUTH_TOKEN");
  setenv("COLL_TIMEOUT_MS", "2000", 1);
}

/* Runs coll_comm_init_env here and expects it to fail with s and a message
 * containing `text`. */
static void expect_fail(coll_status_t s, const char *text) {
  coll_comm_t *c = (coll_comm_t *)0x1;
  coll_status_t got = coll_comm_init_env(NULL, &c);
  if (got != s || strstr(coll_last_error(), text) == NULL)
    fail_msg("expected %s with \"%s\", got %s: %s", coll_status_name(s), text,
             coll_status_name(got), coll_last_error());
  assert_null(c);
}

static void test_rank_errors(void **state) {
  (void)state;
  set_env(NULL, "4", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "RANK is not set");
  set_env("abc", "4", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "RANK='abc' is not a number");
  set_env("2x", "4", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "RANK='2x' is not a number");
  set_env("4", "4", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "RANK=4 is out of range (0..3");
  set_env("-1", "4", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "RANK=-1 is out of range");
}

static void test_world_errors(void **state) {
  (void)state;
  set_env("0", NULL, "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "WORLD_SIZE is not set");
  set_env("0", "four", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "WORLD_SIZE='four' is not a number");
  set_env("0", "0", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "WORLD_SIZE=0 is out of range");
  set_env("0", "99999999999999999999", "127.0.0.1", "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "WORLD_SIZE=99999999999999999999 is out");
}

static void test_master_errors(void **state) {
  (void)state;
  set_env("0", "2", NULL, "29500");
  expect_fail(COLL_ERR_INVALID_ARG, "MASTER_ADDR is not set");
  set_env("0", "2", "127.0.0.1", NULL);
  expect_fail(COLL_ERR_INVALID_ARG, "MASTER_PORT is not set");
  set_env("0", "2", "127.0.0.1", "http");
  expect_fail(COLL_ERR_INVALID_ARG, "MASTER_PORT='http' is not a number");
  set_env("0", "2", "127.0.0.1", "0");
  expect_fail(COLL_ERR_INVALID_ARG, "MASTER_PORT=0 is out of range (1..65535)");
  set_env("0", "2", "127.0.0.1", "65536");
  expect_fail(COLL_ERR_INVALID_ARG, "MASTER_PORT=65536 is out of range");
  set_env("1", "2", "no-such-host.invalid", "29500");
  expect_fail(COLL_ERR_INVALID_ARG,
              "MASTER_ADDR 'no-such-host.invalid' does not resolve");
}

/* Knobs with values libcoll does not know are refused at creation, naming
 * the variable, before any rank is waited for; the comm constructors over
 * a transport refuse them too (and free the transport they took). */
static void test_knob_errors(void **state) {
  coll_transport_t *t[1];
  coll_comm_t *c = (coll_comm_t *)0x1;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  int64_t t0;
  (void)state;
  set_env("1", "2", "127.0.0.1", "29500");
  setenv("COLL_BACKEND", "cpu", 1);
  setenv("COLL_TIMEOUT_MS", "2s", 1);
  t0 = test_now_ms();
  expect_fail(COLL_ERR_INVALID_ARG, "COLL_TIMEOUT_MS='2s' is not a number");
  assert_true(test_now_ms() - t0 < 1000);
  assert_int_equal(coll_inproc_create(1, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "COLL_TIMEOUT_MS='2s'"));
  assert_null(c);
  cfg.rank = 0;
  cfg.world = 2;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = 29500;
  assert_int_equal(coll_tcp_create(&cfg, &t[0]), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "COLL_TIMEOUT_MS='2s'"));
  setenv("COLL_TIMEOUT_MS", "2000", 1);
  setenv("COLL_ALGO", "bcube", 1);
  t0 = test_now_ms();
  expect_fail(COLL_ERR_INVALID_ARG,
              "COLL_ALGO='bcube' is not one of auto, ring, rd, rh, twolevel, "
              "shm, tree, chain");
  assert_true(test_now_ms() - t0 < 1000);
  c = (coll_comm_t *)0x1;
  assert_int_equal(coll_inproc_create(1, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "COLL_ALGO='bcube'"));
  assert_null(c);
  /* Known values, in any case, still work. */
  setenv("COLL_ALGO", "RING", 1);
  setenv("COLL_TIMEOUT_MS", "-1", 1);
  assert_int_equal(coll_inproc_create(1, t), COLL_OK);
  assert_int_equal(coll_comm_create(t[0], NULL, &c), COLL_OK);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  unsetenv("COLL_ALGO");
  unsetenv("COLL_BACKEND");
  setenv("COLL_TIMEOUT_MS", "2000", 1);
}

static void test_bad_ifname(void **state) {
  (void)state;
  set_env("1", "2", "127.0.0.1", "29500");
  setenv("COLL_SOCKET_IFNAME", "nosuchif0", 1);
  expect_fail(COLL_ERR_INVALID_ARG,
              "COLL_SOCKET_IFNAME=nosuchif0: no such network interface");
  assert_non_null(strstr(coll_last_error(), "lo")); /* lists what exists */
  unsetenv("COLL_SOCKET_IFNAME");
}

static void test_port_in_use(void **state) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  char port[16];
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  (void)state;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 1), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
  set_env("0", "2", "127.0.0.1", port);
  expect_fail(COLL_ERR_SYSTEM, "is already in use");
  assert_non_null(strstr(coll_last_error(), "MASTER_PORT="));
  close(fd);
}

/* Rank 0's host must own MASTER_ADDR: the store listens only there. */
static void test_master_not_local(void **state) {
  (void)state;
  set_env("0", "2", "192.0.2.1", "29500"); /* TEST-NET-1, never local */
  expect_fail(COLL_ERR_SYSTEM, "not an address of this host");
}

/* ---- several ranks, one process each ---- */

typedef struct child_result {
  coll_status_t s;
  char msg[COLL_ERRMSG_MAX];
} child_result_t;

typedef struct child_arg {
  const char *rank, *world, *port, *timeout;
  int fd; /* pipe to the parent */
} child_arg_t;

static int child_main(void *p) {
  child_arg_t *a = p;
  child_result_t r;
  coll_comm_t *c = NULL;
  set_env(a->rank, a->world, "127.0.0.1", a->port);
  setenv("COLL_TIMEOUT_MS", a->timeout, 1);
  memset(&r, 0, sizeof r);
  r.s = coll_comm_init_env(NULL, &c);
  snprintf(r.msg, sizeof r.msg, "%s", coll_last_error());
  if (write(a->fd, &r, sizeof r) != (ssize_t)sizeof r) return 3;
  coll_comm_destroy(c);
  return 0;
}

/* Forks one process per entry of ranks[] and collects their results. */
static void run_children(int n, const char *const *ranks, const char *world,
                         const char *timeout, child_result_t *out) {
  char port[16];
  child_arg_t args[8];
  pid_t pids[8];
  int fds[8][2], i;
  snprintf(port, sizeof port, "%d", bt_free_port("127.0.0.1"));
  for (i = 0; i < n; i++) {
    assert_int_equal(pipe(fds[i]), 0);
    args[i] = (child_arg_t){ranks[i], world, port, timeout, fds[i][1]};
    pids[i] = bt_fork(child_main, &args[i]);
    assert_true(pids[i] > 0);
    close(fds[i][1]);
  }
  for (i = 0; i < n; i++) {
    assert_int_equal(bt_wait_child(pids[i], 30000), 0);
    assert_int_equal(read(fds[i][0], &out[i], sizeof out[i]),
                     (ssize_t)sizeof out[i]);
    close(fds[i][0]);
  }
}

/* 1 if the rank list at the end of msg ("...: rank 2" or "...: ranks 1,
 * 2") names `rank`. */
static int names_rank(const char *msg, int rank) {
  const char *p = strrchr(msg, ':');
  char *end;
  if (p == NULL) return 0;
  p++;
  while (*p != '\0') {
    if (*p >= '0' && *p <= '9') {
      long v = strtol(p, &end, 10);
      if (v == rank) return 1;
      p = end;
    } else {
      p++;
    }
  }
  return 0;
}

/* The child failed with s, its message holds `text`, and (missing >= 0)
 * its closing rank list names rank `missing`. */
static void expect_child(const child_result_t *r, coll_status_t s,
                         const char *text, int missing) {
  if (r->s != s || strstr(r->msg, text) == NULL ||
      (missing >= 0 && !names_rank(r->msg, missing)))
    fail_msg("expected %s with \"%s\" (rank %d), got %s: %s",
             coll_status_name(s), text, missing, coll_status_name(r->s),
             r->msg);
}

/* World 3, rank 2 never comes: ranks 0 and 1 both fail naming it. */
static void test_missing_rank_named(void **state) {
  const char *ranks[2] = {"0", "1"};
  child_result_t r[2];
  (void)state;
  run_children(2, ranks, "3", "2500", r);
  expect_child(&r[0], COLL_ERR_TIMEOUT, "ranks did not join", 2);
  expect_child(&r[1], COLL_ERR_TIMEOUT, "ranks did not join", 2);
}

/* Rank 0 never comes: the others say rank 0 is missing. */
static void test_missing_rank0(void **state) {
  const char *ranks[1] = {"1"};
  child_result_t r[1];
  (void)state;
  run_children(1, ranks, "2", "500", r);
  expect_child(&r[0], COLL_ERR_TIMEOUT, "rank 0 is missing", -1);
}

/* Two processes claim rank 1 and rank 2 is absent: one of the two is told
 * it joined twice; the others time out naming rank 2. */
static void test_duplicate_rank(void **state) {
  const char *ranks[3] = {"0", "1", "1"};
  child_result_t r[3];
  int dup;
  (void)state;
  run_children(3, ranks, "3", "2500", r);
  dup = strstr(r[1].msg, "joined twice") != NULL ? 1 : 2;
  expect_child(&r[dup], COLL_ERR_INVALID_ARG, "rank 1 joined twice", -1);
  expect_child(&r[0], COLL_ERR_TIMEOUT, "did not join", 2);
  expect_child(&r[3 - dup], COLL_ERR_TIMEOUT, "did not join", 2);
}

/* ---- coll_tcp_create's own checks ---- */

static void test_tcp_create_config(void **state) {
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = (coll_transport_t *)0x1;
  (void)state;
  assert_int_equal(coll_tcp_create(&cfg, NULL), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll_tcp_create(NULL, &t), COLL_ERR_INVALID_ARG);
  assert_null(t);
  cfg.rank = 0;
  cfg.world = 0;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = 29500;
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "world 0"));
  cfg.world = 2;
  cfg.rank = 2;
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "rank 2 is out of range"));
  cfg.rank = 1;
  cfg.master_port = 0;
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "master_port 0"));
  cfg.master_port = 29500;
  cfg.master_addr = NULL;
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "master_addr is NULL"));
  cfg.master_addr = "127.0.0.1";
  cfg.size = sizeof(size_t) + 2 * sizeof(int);
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "COLL_TCP_CONFIG_INIT"));
  cfg.size = sizeof cfg;
  cfg.ifname = "nosuchif0";
  assert_int_equal(coll_tcp_create(&cfg, &t), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "ifname=nosuchif0"));
  assert_null(t);
}

static void test_local_addr(void **state) {
  struct sockaddr_storage m;
  char ip[COLL_ADDR_TEXT_MAX], out[COLL_ADDR_TEXT_MAX];
  (void)state;
  assert_int_equal(coll__resolve_host("MASTER_ADDR", "127.0.0.1", &m, ip),
                   COLL_OK);
  assert_string_equal(ip, "127.0.0.1");
  assert_int_equal(coll__local_addr(&m, NULL, "x", out), COLL_OK);
  assert_string_equal(out, "127.0.0.1");
  assert_int_equal(coll__local_addr(&m, "lo", "x", out), COLL_OK);
  assert_string_equal(out, "127.0.0.1");
  assert_int_equal(coll__local_addr(&m, "nosuchif0", "COLL_SOCKET_IFNAME", out),
                   COLL_ERR_INVALID_ARG);
  if (coll__resolve_host("MASTER_ADDR", "::1", &m, ip) == COLL_OK) {
    assert_string_equal(ip, "::1");
    if (coll__local_addr(&m, NULL, "x", out) == COLL_OK)
      assert_string_equal(out, "::1");
  }
  assert_int_equal(
      coll__resolve_host("MASTER_ADDR", "no-such-host.invalid", &m, ip),
      COLL_ERR_INVALID_ARG);
}

static void test_format_ranks(void **state) {
  int r[200], i;
  char out[64];
  (void)state;
  for (i = 0; i < 200; i++) r[i] = i;
  coll__format_ranks(out, sizeof out, r, 3);
  assert_string_equal(out, "0, 1, 2");
  coll__format_ranks(out, sizeof out, r, 200);
  assert_non_null(strstr(out, "more"));
  assert_true(strlen(out) < sizeof out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_errors),
      cmocka_unit_test(test_world_errors),
      cmocka_unit_test(test_master_errors),
      cmocka_unit_test(test_knob_errors),
      cmocka_unit_test(test_bad_ifname),
      cmocka_unit_test(test_port_in_use),
      cmocka_unit_test(test_master_not_local),
      cmocka_unit_test(test_missing_rank_named),
      cmocka_unit_test(test_missing_rank0),
      cmocka_unit_test(test_duplicate_rank),
      cmocka_unit_test(test_tcp_create_config),
      cmocka_unit_test(test_local_addr),
      cmocka_unit_test(test_format_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
