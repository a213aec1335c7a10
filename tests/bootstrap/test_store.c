/* SPDX-License-Identifier: Apache-2.0 */
/* test_store.c: the rendezvous store: set/get/wait/add from threads and
 * processes, waiting for keys set later, timeouts that name the keys, caps
 * on keys and values, IPv6, ports in use, connecting before the server
 * starts, and stopping with clients waiting. Hostile clients are in
 * test_store_hostile.c. */
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
#include "bootstrap/store/store_auth.h"
#include "core/error.h"
#include "test_util.h"

#define T_MS 10000 /* generous bound for waits that should succeed */

typedef bt_store_t fixture_t;

static coll_store_t *client(const fixture_t *f) {
  coll_store_t *st = bt_client(f);
  if (st == NULL) fail_msg("connect: %s", coll_last_error());
  return st;
}

/* The handshake MAC depends on the token, the label and the order of the
 * nonces; without a token it is all zero. Nonces differ. */
static void test_store_mac(void **state) {
  uint8_t a[32], b[32], m1[32], m2[32], zero[32] = {0};
  (void)state;
  memset(a, 1, sizeof a);
  memset(b, 2, sizeof b);
  coll__store_mac(NULL, "x", a, b, m1);
  assert_memory_equal(m1, zero, 32);
  coll__store_mac("tok", "coll-store-client", a, b, m1);
  coll__store_mac("tok", "coll-store-client", b, a, m2);
  assert_memory_not_equal(m1, m2, 32); /* order matters */
  coll__store_mac("tok", "coll-store-server", a, b, m2);
  assert_memory_not_equal(m1, m2, 32); /* the label matters */
  coll__store_mac("tok2", "coll-store-client", a, b, m2);
  assert_memory_not_equal(m1, m2, 32); /* the token matters */
  assert_int_equal(coll__random_bytes(m1, 32), COLL_OK);
  assert_int_equal(coll__random_bytes(m2, 32), COLL_OK);
  assert_memory_not_equal(m1, m2, 32);
}

static void test_set_get(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  char buf[64];
  size_t len = 0;
  assert_int_equal(coll__store_set(st, "k1", "hello", 5), COLL_OK);
  assert_int_equal(coll__store_get(st, "k1", buf, sizeof buf, &len, 0),
                   COLL_OK);
  assert_int_equal(len, 5);
  assert_memory_equal(buf, "hello", 5);
  /* Overwrite, and an empty value. */
  assert_int_equal(coll__store_set(st, "k1", "bye", 3), COLL_OK);
  assert_int_equal(coll__store_get(st, "k1", buf, sizeof buf, &len, 0),
                   COLL_OK);
  assert_int_equal(len, 3);
  assert_int_equal(coll__store_set(st, "empty", NULL, 0), COLL_OK);
  assert_int_equal(coll__store_get(st, "empty", buf, sizeof buf, &len, 0),
                   COLL_OK);
  assert_int_equal(len, 0);
  /* A buffer too small: the length that exists, no overflow, and the
   * connection stays usable. */
  memset(buf, 0x5a, sizeof buf);
  assert_int_equal(coll__store_set(st, "long", "0123456789", 10), COLL_OK);
  assert_int_equal(coll__store_get(st, "long", buf, 4, &len, 0),
                   COLL_ERR_LENGTH_MISMATCH);
  assert_int_equal(len, 10);
  assert_int_equal((unsigned char)buf[0], 0x5a);
  assert_int_equal(coll__store_get(st, "k1", buf, sizeof buf, &len, 0),
                   COLL_OK);
  coll__store_close(st);
}

static void test_get_timeout_names_key(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  char buf[8];
  size_t len;
  int64_t t0 = test_now_ms();
  assert_int_equal(coll__store_get(st, "never/here", buf, sizeof buf, &len, 0),
                   COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "never/here"));
  assert_int_equal(
      coll__store_get(st, "never/here", buf, sizeof buf, &len, 150),
      COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "'never/here'"));
  assert_true(test_now_ms() - t0 < T_MS);
  /* Still usable after timeouts. */
  assert_int_equal(coll__store_set(st, "after", "x", 1), COLL_OK);
  coll__store_close(st);
}

static void test_bad_args(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  char key[COLL_STORE_KEY_MAX + 2];
  char *big = calloc(1, COLL_STORE_VALUE_MAX + 1);
  coll_store_stats_t before, after;
  int64_t r;
  assert_non_null(big);
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = '\0';
  assert_int_equal(coll__store_set(st, key, "v", 1), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "key of"));
  key[COLL_STORE_KEY_MAX] = '\0'; /* exactly the cap: allowed */
  assert_int_equal(coll__store_set(st, key, "v", 1), COLL_OK);
  assert_int_equal(coll__store_set(st, "", "v", 1), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__store_set(st, NULL, "v", 1), COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__store_set(st, "k", NULL, 3), COLL_ERR_INVALID_ARG);
  coll__store_server_stats(f->srv, &before);
  assert_int_equal(coll__store_set(st, "big", big, COLL_STORE_VALUE_MAX + 1),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "exceeds the cap"));
  coll__store_server_stats(f->srv, &after);
  assert_int_equal(before.requests, after.requests); /* never sent */
  assert_int_equal(coll__store_set(st, "big", big, COLL_STORE_VALUE_MAX),
                   COLL_OK);
  /* ADD on a value that is not a counter. */
  assert_int_equal(coll__store_set(st, "text", "abc", 3), COLL_OK);
  assert_int_equal(coll__store_add(st, "text", 1, &r), COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "not a counter"));
  assert_int_equal(coll__store_add(st, "ctr", -5, &r), COLL_OK);
  assert_int_equal(r, -5);
  assert_int_equal(coll__store_wait(NULL, NULL, 0, 0), COLL_ERR_INVALID_ARG);
  free(big);
  coll__store_close(st);
  assert_int_equal(coll__store_connect("127.0.0.1", 0, NULL, 10, &st),
                   COLL_ERR_INVALID_ARG);
  assert_int_equal(coll__store_server_start(NULL, 0, NULL, NULL),
                   COLL_ERR_INVALID_ARG);
}

/* ---- threads: add, get waiting for a later set, wait on several keys ---- */

#define NTHREADS 6
#define NADDS 50

typedef struct thr_arg {
  fixture_t *f;
  int failed[NTHREADS];
  char why[NTHREADS][COLL_ERRMSG_MAX];
  int64_t last[NTHREADS];
} thr_arg_t;

static void note(thr_arg_t *a, int rank, coll_status_t s) {
  if (s != COLL_OK && !a->failed[rank]) {
    a->failed[rank] = 1;
    snprintf(a->why[rank], sizeof a->why[rank], "%s", coll_last_error());
  }
}

static void adder(int rank, int world, void *arg) {
  thr_arg_t *a = arg;
  coll_store_t *st = NULL;
  char key[32], buf[64];
  const char *keys[NTHREADS];
  char names[NTHREADS][32];
  size_t len;
  int i;
  note(a, rank, coll__store_connect("127.0.0.1", a->f->port, NULL, T_MS, &st));
  if (st == NULL) return;
  for (i = 0; i < NADDS; i++)
    note(a, rank, coll__store_add(st, "counter", rank + 1, &a->last[rank]));
  snprintf(key, sizeof key, "done/%d", rank);
  note(a, rank, coll__store_set(st, key, key, strlen(key)));
  for (i = 0; i < world; i++) {
    snprintf(names[i], sizeof names[i], "done/%d", i);
    keys[i] = names[i];
  }
  /* Everyone waits for everyone, then reads the neighbour's value. */
  note(a, rank, coll__store_wait(st, keys, world, T_MS));
  note(a, rank,
       coll__store_get(st, names[(rank + 1) % world], buf, sizeof buf, &len,
                       T_MS));
  if (a->failed[rank] == 0 &&
      (len != strlen(names[(rank + 1) % world]) ||
       memcmp(buf, names[(rank + 1) % world], len) != 0)) {
    a->failed[rank] = 1;
    snprintf(a->why[rank], sizeof a->why[rank], "neighbour value wrong");
  }
  coll__store_close(st);
}

static void test_threads_add_wait(void **state) {
  fixture_t *f = *state;
  thr_arg_t a;
  coll_store_t *st;
  char buf[32];
  size_t len;
  int i, expect = 0, maxlast = 0;
  memset(&a, 0, sizeof a);
  a.f = f;
  test_run_ranks(NTHREADS, adder, &a, 30000, "store adders");
  for (i = 0; i < NTHREADS; i++) {
    if (a.failed[i]) fail_msg("rank %d: %s", i, a.why[i]);
    expect += (i + 1) * NADDS;
    if (a.last[i] > maxlast) maxlast = (int)a.last[i];
  }
  assert_int_equal(maxlast, expect); /* someone saw the final sum */
  st = client(f);
  assert_int_equal(coll__store_get(st, "counter", buf, sizeof buf - 1, &len, 0),
                   COLL_OK);
  buf[len] = '\0';
  assert_int_equal(atoi(buf), expect); /* a counter reads as decimal text */
  coll__store_close(st);
}

typedef struct later_arg {
  fixture_t *f;
  coll_status_t s[4];
  char val[4][16];
  char why[4][COLL_ERRMSG_MAX];
} later_arg_t;

/* Rank 0 sets the keys after a pause; the others are already waiting. */
static void later_rank(int rank, int world, void *arg) {
  later_arg_t *a = arg;
  coll_store_t *st = NULL;
  size_t len = 0;
  (void)world;
  a->s[rank] = coll__store_connect("127.0.0.1", a->f->port, NULL, T_MS, &st);
  if (st == NULL) return;
  if (rank == 0) {
    const char *keys[2] = {"late/a", "late/b"};
    test_sleep_ms(150);
    a->s[0] = coll__store_set(st, "late/a", "A", 1);
    if (a->s[0] == COLL_OK) a->s[0] = coll__store_set(st, "late/b", "B", 1);
    if (a->s[0] == COLL_OK) a->s[0] = coll__store_wait(st, keys, 2, T_MS);
  } else if (rank == 3) {
    const char *keys[2] = {"late/a", "late/b"};
    a->s[rank] = coll__store_wait(st, keys, 2, T_MS);
  } else {
    a->s[rank] =
        coll__store_get(st, rank == 1 ? "late/a" : "late/b", a->val[rank],
                        sizeof a->val[rank] - 1, &len, T_MS);
    a->val[rank][len] = '\0';
  }
  if (a->s[rank] != COLL_OK)
    snprintf(a->why[rank], sizeof a->why[rank], "%s", coll_last_error());
  coll__store_close(st);
}

static void test_get_waits_for_later_set(void **state) {
  later_arg_t a;
  int i;
  memset(&a, 0, sizeof a);
  a.f = *state;
  test_run_ranks(4, later_rank, &a, 30000, "late set");
  for (i = 0; i < 4; i++)
    if (a.s[i] != COLL_OK) fail_msg("rank %d: %s", i, a.why[i]);
  assert_string_equal(a.val[1], "A");
  assert_string_equal(a.val[2], "B");
}

static void test_wait_timeout_names_missing(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  const char *keys[4] = {"w/0", "w/1", "w/2", "w/3"};
  int missing[4], n = 0;
  assert_int_equal(coll__store_set(st, "w/0", "x", 1), COLL_OK);
  assert_int_equal(coll__store_set(st, "w/2", "x", 1), COLL_OK);
  assert_int_equal(coll__store_wait(st, keys, 4, 100), COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "w/1, w/3"));
  assert_null(strstr(coll_last_error(), "w/0"));
  assert_int_equal(coll__store_missing(st, keys, 4, missing, &n), COLL_OK);
  assert_int_equal(n, 2);
  assert_int_equal(missing[0], 1);
  assert_int_equal(missing[1], 3);
  assert_int_equal(coll__store_set(st, "w/1", "x", 1), COLL_OK);
  assert_int_equal(coll__store_set(st, "w/3", "x", 1), COLL_OK);
  assert_int_equal(coll__store_wait(st, keys, 4, 0), COLL_OK);
  coll__store_close(st);
}

/* More keys than one request carries: the client splits them. */
static void test_wait_many_keys(void **state) {
  fixture_t *f = *state;
  coll_store_t *st = client(f);
  enum { N = 5000 };
  char(*names)[16] = calloc(N, sizeof *names);
  const char **keys = calloc(N, sizeof *keys);
  int *missing = calloc(N, sizeof *missing), n = 0, i;
  assert_non_null(names);
  assert_non_null(keys);
  assert_non_null(missing);
  for (i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "many/%d", i);
    keys[i] = names[i];
    if (i != 4321)
      assert_int_equal(coll__store_set(st, keys[i], "1", 1), COLL_OK);
  }
  assert_int_equal(coll__store_missing(st, keys, N, missing, &n), COLL_OK);
  assert_int_equal(n, 1);
  assert_int_equal(missing[0], 4321);
  assert_int_equal(coll__store_wait(st, keys, N, 50), COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "many/4321"));
  assert_int_equal(coll__store_set(st, keys[4321], "1", 1), COLL_OK);
  assert_int_equal(coll__store_wait(st, keys, N, T_MS), COLL_OK);
  free(names);
  free(keys);
  free(missing);
  coll__store_close(st);
}

/* ---- processes ---- */

#define NPROCS 4

typedef struct proc_arg {
  int port;
  int idx;
} proc_arg_t;

static int proc_main(void *p) {
  proc_arg_t *a = p;
  coll_store_t *st = NULL;
  const char *keys[NPROCS];
  char names[NPROCS][32], key[32], buf[32];
  int64_t r;
  size_t len;
  int i;
  if (coll__store_connect("127.0.0.1", a->port, NULL, T_MS, &st) != COLL_OK)
    return 10;
  if (coll__store_add(st, "procs", 1, &r) != COLL_OK) return 11;
  snprintf(key, sizeof key, "proc/%d", a->idx);
  if (coll__store_set(st, key, key, strlen(key)) != COLL_OK) return 12;
  for (i = 0; i < NPROCS; i++) {
    snprintf(names[i], sizeof names[i], "proc/%d", i);
    keys[i] = names[i];
  }
  if (coll__store_wait(st, keys, NPROCS, T_MS) != COLL_OK) return 13;
  if (coll__store_get(st, "procs", buf, sizeof buf - 1, &len, 0) != COLL_OK)
    return 14;
  buf[len] = '\0';
  coll__store_close(st);
  return atoi(buf) == NPROCS ? 0 : 15;
}

static void test_processes(void **state) {
  fixture_t *f = *state;
  proc_arg_t args[NPROCS];
  pid_t pids[NPROCS];
  int i;
  for (i = 0; i < NPROCS; i++) {
    args[i] = (proc_arg_t){f->port, i};
    pids[i] = bt_fork(proc_main, &args[i]);
    assert_true(pids[i] > 0);
  }
  for (i = 0; i < NPROCS; i++)
    assert_int_equal(bt_wait_child(pids[i], 30000), 0);
}

/* ---- connecting ---- */

static void test_ipv6(void **state) {
  coll_store_server_t *srv;
  coll_store_t *st;
  char buf[8];
  size_t len;
  (void)state;
  if (coll__store_server_start("::1", 0, "t", &srv) != COLL_OK) {
    print_message("no IPv6 loopback here (%s); skipped\n", coll_last_error());
    skip();
  }
  assert_int_equal(
      coll__store_connect("::1", coll__store_server_port(srv), "t", T_MS, &st),
      COLL_OK);
  assert_non_null(strstr(coll__store_peer(st), "[::1]:"));
  assert_int_equal(coll__store_set(st, "six", "6", 1), COLL_OK);
  assert_int_equal(coll__store_get(st, "six", buf, sizeof buf, &len, 0),
                   COLL_OK);
  coll__store_close(st);
  coll__store_server_stop(srv);
}

static void test_port_in_use(void **state) {
  fixture_t *f = *state;
  coll_store_server_t *srv = NULL;
  assert_int_equal(coll__store_server_start("127.0.0.1", f->port, NULL, &srv),
                   COLL_ERR_SYSTEM);
  assert_non_null(strstr(coll_last_error(), "already in use"));
  assert_null(srv);
  /* Not an address of this host. */
  assert_int_equal(coll__store_server_start("192.0.2.77", 0, NULL, &srv),
                   COLL_ERR_SYSTEM);
  assert_non_null(strstr(coll_last_error(), "not an address of this host"));
  assert_int_equal(coll__store_server_start("not-an-ip", 0, NULL, &srv),
                   COLL_ERR_INVALID_ARG);
}

typedef struct late_server {
  int port;
  coll_store_server_t *srv;
  coll_status_t s[2];
  char why[COLL_ERRMSG_MAX];
} late_server_t;

/* Rank 0 starts the server 200 ms after rank 1 began connecting. */
static void late_rank(int rank, int world, void *arg) {
  late_server_t *l = arg;
  coll_store_t *st = NULL;
  (void)world;
  if (rank == 0) {
    test_sleep_ms(200);
    l->s[0] = coll__store_server_start("127.0.0.1", l->port, NULL, &l->srv);
    return;
  }
  l->s[1] = coll__store_connect("127.0.0.1", l->port, NULL, T_MS, &st);
  if (l->s[1] == COLL_OK) l->s[1] = coll__store_set(st, "late", "v", 1);
  if (l->s[1] != COLL_OK)
    snprintf(l->why, sizeof l->why, "%s", coll_last_error());
  coll__store_close(st);
}

static void test_connect_retries_until_server_starts(void **state) {
  late_server_t l;
  (void)state;
  memset(&l, 0, sizeof l);
  l.port = bt_free_port("127.0.0.1");
  assert_true(l.port > 0);
  test_run_ranks(2, late_rank, &l, 30000, "late server");
  assert_int_equal(l.s[0], COLL_OK);
  if (l.s[1] != COLL_OK) fail_msg("client: %s", l.why);
  coll__store_server_stop(l.srv);
}

static void test_connect_errors(void **state) {
  coll_store_t *st = NULL;
  int port = bt_free_port("127.0.0.1");
  (void)state;
  assert_int_equal(coll__store_connect("127.0.0.1", port, NULL, 200, &st),
                   COLL_ERR_TIMEOUT);
  assert_non_null(strstr(coll_last_error(), "could not reach"));
  assert_non_null(strstr(coll_last_error(), "refused"));
  assert_int_equal(
      coll__store_connect("no-such-host.invalid", port, NULL, 200, &st),
      COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "does not resolve"));
  assert_null(st);
}

/* Stopping the server fails a client's pending GET instead of hanging it. */
typedef struct stop_arg {
  fixture_t f;
  coll_status_t s;
} stop_arg_t;

static void stop_rank(int rank, int world, void *arg) {
  stop_arg_t *a = arg;
  coll_store_t *st = NULL;
  char buf[4];
  size_t len;
  (void)world;
  if (rank == 0) {
    test_sleep_ms(150);
    coll__store_server_stop(a->f.srv);
    return;
  }
  a->s = coll__store_connect("127.0.0.1", a->f.port, NULL, T_MS, &st);
  if (a->s == COLL_OK)
    a->s = coll__store_get(st, "never", buf, sizeof buf, &len, -1);
  coll__store_close(st);
}

static void test_stop_fails_waiters(void **state) {
  stop_arg_t a;
  (void)state;
  memset(&a, 0, sizeof a);
  assert_int_equal(coll__store_server_start("127.0.0.1", 0, NULL, &a.f.srv),
                   COLL_OK);
  a.f.port = coll__store_server_port(a.f.srv);
  test_run_ranks(2, stop_rank, &a, 30000, "stop with waiters");
  assert_int_equal(a.s, COLL_ERR_PEER_LOST);
}

#define WITH_SERVER(t) \
  cmocka_unit_test_setup_teardown(t, bt_store_setup, bt_store_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_mac),
      WITH_SERVER(test_set_get),
      WITH_SERVER(test_get_timeout_names_key),
      WITH_SERVER(test_bad_args),
      WITH_SERVER(test_threads_add_wait),
      WITH_SERVER(test_get_waits_for_later_set),
      WITH_SERVER(test_wait_timeout_names_missing),
      WITH_SERVER(test_wait_many_keys),
      WITH_SERVER(test_processes),
      cmocka_unit_test(test_ipv6),
      WITH_SERVER(test_port_in_use),
      cmocka_unit_test(test_connect_retries_until_server_starts),
      cmocka_unit_test(test_connect_errors),
      cmocka_unit_test(test_stop_fails_waiters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
