/* SPDX-License-Identifier: Apache-2.0 */
/* test_store_init.c: coll_comm_init_store over TCP on this host, every rank
 * a thread of this process meeting through an in-memory store
 * (tests/common/test_kv.c): allreduce results against a serial reference,
 * two comms sharing one store through prefixes, the choice of the local
 * address, and every way the caller's table or store can fail, in each
 * step of the setup (compatibility records, addresses, outcomes). */
#include <dirent.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "bootstrap/rendezvous/host_id.h"
#include "core/error.h"
#include "test_kv.h"
#include "test_util.h"

#define MAXW 4
#define COUNT 4099 /* not a multiple of the world: uneven chunks */

typedef struct job {
  test_kv_t *kv;
  int world;
  int absent[MAXW]; /* 1: this rank never calls */
  int64_t timeout_ms;
  test_kv_view_t views[MAXW];
  coll_status_t s[MAXW];
  char why[MAXW][COLL_ERRMSG_MAX];
  int wrong[MAXW];
} job_t;

static const char *const env_vars[] = {"COLL_SOCKET_IFNAME", "MASTER_ADDR",
                                       "COLL_TIMEOUT_MS", "COLL_BACKEND",
                                       "COLL_AUTH_TOKEN"};

static int setup(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
    unsetenv(env_vars[i]);
  setenv("COLL_BACKEND", "cpu", 1); /* the stand-in is elsewhere */
  return 0;
}

static int teardown(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
    unsetenv(env_vars[i]);
  return 0;
}

/* Entries of a /proc/self folder: open descriptors, threads. */
static int count_entries(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* One rank: create the comm, run an f64 sum allreduce, compare it with the
 * serial sum (exact: small halves), destroy. */
static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  double *x;
  int i;
  if (j->absent[rank]) return;
  if (j->views[rank].kv == NULL) j->views[rank].kv = j->kv;
  test_kv_ops(&j->views[rank], &ops);
  cfg.timeout_ms = j->timeout_ms;
  j->s[rank] = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  x = malloc(COUNT * sizeof *x);
  if (j->s[rank] == COLL_OK && x != NULL) {
    for (i = 0; i < COUNT; i++) x[i] = rank + i * 0.5;
    j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_F64, COLL_SUM, NULL);
    for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
      if (x[i] != world * (world - 1) / 2.0 + world * i * 0.5) j->wrong[rank]++;
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  else if (c == NULL)
    j->s[rank] = COLL_ERR_INTERNAL; /* COLL_OK must come with a comm */
  free(x);
  coll_comm_destroy(c);
}

static job_t *new_job(int world, int64_t timeout_ms) {
  job_t *j = calloc(1, sizeof *j);
  assert_non_null(j);
  j->kv = test_kv_new();
  assert_non_null(j->kv);
  j->world = world;
  j->timeout_ms = timeout_ms;
  return j;
}

static void free_job(job_t *j) {
  test_kv_free(j->kv);
  free(j);
}

static void run(job_t *j) {
  test_run_ranks(j->world, rank_main, j, 60000, "comm_init_store ranks");
}

static void expect_all_ok(const job_t *j) {
  int r;
  for (r = 0; r < j->world; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    assert_int_equal(j->wrong[r], 0);
  }
}

/* Four ranks on the loopback interface: the sums are right, and the store
 * holds exactly the four addresses, under "coll/addr/<rank>", on lo, each
 * rank's compatibility record, its transport mode and host identity
 * (this host's, for all)
 * and its outcome, "ok". */
static void test_four_ranks(void **state) {
  job_t *j = new_job(4, 30000);
  char key[32], val[COLL_HOST_ID_MAX], host[COLL_HOST_ID_MAX];
  int r;
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  run(j);
  expect_all_ok(j);
  assert_int_equal(test_kv_count(j->kv), 16);
  coll__host_id(host);
  for (r = 0; r < 4; r++) {
    snprintf(key, sizeof key, "coll/host/%d", r);
    assert_true(test_kv_peek(j->kv, key, val, sizeof val));
    /* COLL_TRANSPORT's mode (0: auto), then the identity. */
    assert_true(strncmp(val, "0 ", 2) == 0);
    assert_string_equal(val + 2, host);
    snprintf(key, sizeof key, "coll/addr/%d", r);
    assert_true(test_kv_peek(j->kv, key, val, sizeof val));
    if (strncmp(val, "127.0.0.1:", 10) != 0) fail_msg("%s = %s", key, val);
    snprintf(key, sizeof key, "coll/compat/%d", r);
    assert_true(test_kv_peek(j->kv, key, val, sizeof val));
    if (strncmp(val, "libcoll ", 8) != 0) fail_msg("%s = %s", key, val);
    snprintf(key, sizeof key, "coll/outcome/%d", r);
    assert_true(test_kv_peek(j->kv, key, val, sizeof val));
    assert_string_equal(val, "ok");
  }
  free_job(j);
}

static void test_one_rank(void **state) {
  job_t *j = new_job(1, 10000);
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  run(j);
  expect_all_ok(j);
  free_job(j);
}

/* Two comms of two ranks at once through one store, each rank's view with
 * its comm's prefix (as torch's PrefixStore gives each process group). */
static void two_comms_rank(int rank, int world, void *arg) {
  job_t **jobs = arg;
  (void)world;
  rank_main(rank % 2, 2, jobs[rank / 2]);
}

static void test_two_comms_one_store(void **state) {
  job_t *a = new_job(2, 30000), *b = new_job(2, 30000);
  job_t *jobs[2] = {a, b};
  char val[128];
  int r;
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  for (r = 0; r < 2; r++) {
    a->views[r] = (test_kv_view_t){.kv = a->kv, .prefix = "pg0/"};
    b->views[r] = (test_kv_view_t){.kv = a->kv, .prefix = "pg1/"};
  }
  test_run_ranks(4, two_comms_rank, jobs, 60000, "two comms, one store");
  expect_all_ok(a);
  expect_all_ok(b);
  assert_int_equal(test_kv_count(a->kv), 16);
  assert_true(test_kv_peek(a->kv, "pg0/coll/addr/1", val, sizeof val));
  assert_true(test_kv_peek(a->kv, "pg1/coll/outcome/1", val, sizeof val));
  assert_true(test_kv_peek(a->kv, "pg1/coll/addr/1", val, sizeof val));
  assert_int_equal(test_kv_count(b->kv), 0);
  free_job(a);
  free_job(b);
}

/* 1 if host (an address's text) is an address of one of this host's
 * interfaces. */
static int is_local_address(const char *host) {
  struct ifaddrs *all = NULL, *i;
  char text[NI_MAXHOST];
  int found = 0;
  if (getifaddrs(&all) != 0) return 0;
  for (i = all; i != NULL && !found; i = i->ifa_next) {
    if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                i->ifa_addr->sa_family != AF_INET6))
      continue;
    if (getnameinfo(i->ifa_addr,
                    i->ifa_addr->sa_family == AF_INET
                        ? sizeof(struct sockaddr_in)
                        : sizeof(struct sockaddr_in6),
                    text, sizeof text, NULL, 0, NI_NUMERICHOST) == 0)
      found = strcmp(text, host) == 0;
  }
  freeifaddrs(all);
  return found;
}

/* Without COLL_SOCKET_IFNAME: MASTER_ADDR's route (127.0.0.1 here picks
 * loopback); with neither, an address of one of this host's interfaces
 * (the host name's, or the default route's), and the comm works. */
static void test_listen_address(void **state) {
  job_t *j = new_job(2, 30000);
  char val[128], *colon;
  (void)state;
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  run(j);
  expect_all_ok(j);
  assert_true(test_kv_peek(j->kv, "coll/addr/0", val, sizeof val));
  if (strncmp(val, "127.0.0.1:", 10) != 0) fail_msg("addr/0 = %s", val);
  free_job(j);

  unsetenv("MASTER_ADDR");
  j = new_job(2, 30000);
  run(j);
  expect_all_ok(j);
  assert_true(test_kv_peek(j->kv, "coll/addr/1", val, sizeof val));
  colon = strrchr(val, ':');
  assert_non_null(colon);
  *colon = '\0';
  if (val[0] == '[') {
    memmove(val, val + 1, strlen(val));
    val[strlen(val) - 1] = '\0';
  }
  if (!is_local_address(val)) fail_msg("listened on %s: not local", val);
  free_job(j);
}

/* One call on this thread that must fail with `want` and a text holding
 * `text`, leave *out NULL, and set no key. */
static void expect_refused(const coll_store_ops_t *ops, int rank, int world,
                           const coll_comm_config_t *cfg, coll_status_t want,
                           const char *text) {
  coll_comm_t *c = (coll_comm_t *)(uintptr_t)1;
  coll_status_t s = coll_comm_init_store(ops, rank, world, cfg, &c);
  if (s != want || strstr(coll_last_error(), text) == NULL)
    fail_msg("want %s with '%s', got %s: %s", coll_status_name(want), text,
             coll_status_name(s), coll_last_error());
  assert_null(c);
}

static coll_status_t never_called_set(void *ctx, const char *key,
                                      const void *value, size_t len) {
  (void)key;
  (void)value;
  (void)len;
  ++*(int *)ctx;
  return COLL_ERR_INTERNAL;
}

static coll_status_t never_called_get(void *ctx, const char *key, void *value,
                                      size_t cap, size_t *len,
                                      int64_t timeout_ms) {
  (void)key;
  (void)value;
  (void)cap;
  (void)len;
  (void)timeout_ms;
  ++*(int *)ctx;
  return COLL_ERR_INTERNAL;
}

/* Bad tables, ranks, worlds, configs and variables are refused before any
 * slot runs, each naming what is wrong. */
static void test_bad_arguments(void **state) {
  int calls = 0;
  coll_store_ops_t ops = {sizeof ops, &calls, never_called_set,
                          never_called_get};
  coll_store_ops_t t = ops;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  char want[160];
  (void)state;
  expect_refused(NULL, 0, 1, NULL, COLL_ERR_INVALID_ARG,
                 "comm_init_store: store is NULL");
  assert_int_equal(coll_comm_init_store(&ops, 0, 1, NULL, NULL),
                   COLL_ERR_INVALID_ARG);
  assert_non_null(strstr(coll_last_error(), "comm_init_store: out is NULL"));
  t.size = offsetof(coll_store_ops_t, get);
  snprintf(want, sizeof want,
           "store->size is %zu, too small for the set and get slots (%zu); "
           "set it to sizeof(coll_store_ops_t)",
           offsetof(coll_store_ops_t, get),
           offsetof(coll_store_ops_t, get) + sizeof ops.get);
  expect_refused(&t, 0, 1, NULL, COLL_ERR_INVALID_ARG, want);
  t.size = 0;
  expect_refused(&t, 0, 1, NULL, COLL_ERR_INVALID_ARG, "store->size is 0");
  t = ops;
  t.set = NULL;
  expect_refused(&t, 0, 1, NULL, COLL_ERR_INVALID_ARG,
                 "store->set is NULL; both set and get are mandatory");
  t = ops;
  t.get = NULL;
  expect_refused(&t, 0, 1, NULL, COLL_ERR_INVALID_ARG, "store->get is NULL");
  expect_refused(&ops, 0, 0, NULL, COLL_ERR_INVALID_ARG,
                 "comm_init_store: world 0 is out of range (1..1048576)");
  expect_refused(&ops, 0, (1 << 20) + 1, NULL, COLL_ERR_INVALID_ARG,
                 "world 1048577 is out of range");
  expect_refused(&ops, -1, 2, NULL, COLL_ERR_INVALID_ARG,
                 "rank -1 is out of range for world 2 (0..1)");
  expect_refused(&ops, 2, 2, NULL, COLL_ERR_INVALID_ARG,
                 "rank 2 is out of range for world 2 (0..1)");
  cfg.magic = 0;
  expect_refused(&ops, 0, 1, &cfg, COLL_ERR_INVALID_ARG,
                 "COLL_COMM_CONFIG_INIT");
  setenv("COLL_TIMEOUT_MS", "soon", 1);
  expect_refused(&ops, 0, 1, NULL, COLL_ERR_INVALID_ARG,
                 "COLL_TIMEOUT_MS='soon' is not a number");
  unsetenv("COLL_TIMEOUT_MS");
  setenv("COLL_SOCKET_IFNAME", "nosuchif0", 1);
  expect_refused(&ops, 0, 2, NULL, COLL_ERR_INVALID_ARG,
                 "COLL_SOCKET_IFNAME=nosuchif0: no such network interface");
  unsetenv("COLL_SOCKET_IFNAME");
  setenv("MASTER_ADDR", "no-such-host.invalid", 1);
  expect_refused(&ops, 0, 2, NULL, COLL_ERR_INVALID_ARG,
                 "MASTER_ADDR 'no-such-host.invalid' does not resolve");
  assert_int_equal(calls, 0);
}

/* Rank 2 of 3 alone: its wait for the others' compatibility records ends
 * at the comm's timeout, naming both missing ranks (found by asking the
 * store without waiting), with no socket or thread left behind; then the
 * same bounded by COLL_TIMEOUT_MS. */
static void test_absent_ranks_named(void **state) {
  job_t *j = new_job(3, 500);
  int fds, threads;
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  j->absent[0] = j->absent[1] = 1;
  fds = count_entries("/proc/self/fd");
  threads = count_entries("/proc/self/task");
  run(j);
  assert_int_equal(j->s[2], COLL_ERR_TIMEOUT);
  if (strstr(j->why[2],
             "comm_init_store: store bootstrap: 2 of 3 ranks did not arrive "
             "within 500 ms (no coll/compat/<rank> in the store): ranks 0, "
             "1") == NULL)
    fail_msg("%s", j->why[2]);
  assert_true(j->views[2].zero_gets >= 2);
  assert_int_equal(count_entries("/proc/self/fd"), fds);
  assert_int_equal(count_entries("/proc/self/task"), threads);
  free_job(j);

  /* Without a timeout in the config, COLL_TIMEOUT_MS bounds the wait. */
  j = new_job(2, 0);
  j->absent[0] = 1;
  setenv("COLL_TIMEOUT_MS", "300", 1);
  run(j);
  assert_int_equal(j->s[1], COLL_ERR_TIMEOUT);
  if (strstr(j->why[1],
             "store bootstrap: 1 of 2 ranks did not arrive within 300 ms (no "
             "coll/compat/<rank> in the store): rank 0") == NULL)
    fail_msg("%s", j->why[1]);
  free_job(j);
}

/* Ranks 0 and 1 of 3 arrived (their records are there) but never set an
 * address: rank 2's lookup names the key and both ranks, and the outcome
 * names them as silent. */
static void test_absent_addresses_named(void **state) {
  job_t *j = new_job(3, 500);
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  j->absent[0] = j->absent[1] = 1;
  test_kv_plant_peers(j->kv, 2, 3, 0);
  run(j);
  assert_int_equal(j->s[2], COLL_ERR_TIMEOUT);
  if (strstr(j->why[2],
             "comm_init_store: setup failed on 3 of 3 ranks (ranks 0, 1, "
             "2); rank 0: it did not report its setup outcome") == NULL ||
      strstr(j->why[2],
             "rank 2: tcp: looking up a peer's address: 'coll/addr/0' did "
             "not appear in the store within 500 ms: 2 of 3 ranks never set "
             "their address (coll/addr/<rank>): ranks 0, 1") == NULL)
    fail_msg("%s", j->why[2]);
  free_job(j);
}

/* Rank 0 of 2 alone, rank 1's record there: the mesh names rank 1. */
static void test_rank0_alone(void **state) {
  job_t *j = new_job(2, 500);
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  j->absent[1] = 1;
  test_kv_plant_peers(j->kv, 0, 2, 0);
  run(j);
  assert_int_equal(j->s[0], COLL_ERR_TIMEOUT);
  if (strstr(j->why[0], "no connection from rank 1 (") == NULL ||
      strstr(j->why[0], "none") != NULL)
    fail_msg("%s", j->why[0]);
  free_job(j);
}

/* Runs rank `rank` of `world` alone on view v (after planting the other
 * ranks' records and "ok" outcomes, and `addr0` as rank 0's address when
 * not NULL); returns its status, its text in why. */
static coll_status_t alone(test_kv_view_t *v, int rank, int world,
                           const char *addr0, size_t addr0_len, char *why) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  coll_status_t s;
  int fds = count_entries("/proc/self/fd");
  test_kv_plant_peers(v->kv, rank, world, 1);
  if (addr0 != NULL) test_kv_put(v->kv, "coll/addr/0", addr0, addr0_len);
  test_kv_ops(v, &ops);
  cfg.timeout_ms = 2000;
  s = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  snprintf(why, COLL_ERRMSG_MAX, "%s", coll_last_error());
  if (s == COLL_OK) coll_comm_destroy(c);
  assert_null(c);
  assert_int_equal(count_entries("/proc/self/fd"), fds);
  return s;
}

#define EXPECT_ALONE(v, rank, world, a0, a0len, want, text)                   \
  do {                                                                        \
    char why_[COLL_ERRMSG_MAX];                                               \
    coll_status_t s_ = alone(v, rank, world, a0, a0len, why_);                \
    if (s_ != (want) || strstr(why_, text) == NULL)                           \
      fail_msg("want %s with '%s', got %s: %s", coll_status_name(want), text, \
               coll_status_name(s_), why_);                                   \
  } while (0)

/* A set that fails keeps its status and carries the slot's text (or the
 * status's when the slot gave none). */
static void test_set_fails(void **state) {
  test_kv_view_t v = {0};
  char val[8];
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  v.fail_set = COLL_ERR_SYSTEM;
  v.fail_text = "kv service down";
  v.only = "addr/";
  EXPECT_ALONE(&v, 0, 2, NULL, 0, COLL_ERR_SYSTEM,
               "rank 0: tcp: publishing this rank's address: the "
               "store's set of 'coll/addr/0' failed: kv service down");
  v.fail_text = NULL;
  EXPECT_ALONE(&v, 0, 2, NULL, 0, COLL_ERR_SYSTEM,
               "the store's set of 'coll/addr/0' failed: system error");
  assert_false(test_kv_peek(v.kv, "coll/addr/0", val, sizeof val));
  test_kv_free(v.kv);
}

/* A get that fails, answers with a status outside the list, or says
 * COLL_OK without a length. */
static void test_get_fails(void **state) {
  test_kv_view_t v = {0};
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  v.only = "addr/";
  v.fail_get = COLL_ERR_PEER_LOST;
  v.fail_text = "kv connection reset";
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PEER_LOST,
               "the store's get of 'coll/addr/0' failed: kv connection reset");
  v.fail_get = (coll_status_t)99;
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PROTOCOL,
               "the store's get of 'coll/addr/0' returned 99, which is not "
               "a coll_status_t");
  v.fail_get = COLL_OK;
  v.forget_len = 1;
  EXPECT_ALONE(&v, 1, 2, "127.0.0.1:9", 11, COLL_ERR_PROTOCOL,
               "the store's get of 'coll/addr/0' returned COLL_OK without "
               "setting the value's length");
  test_kv_free(v.kv);
}

/* The questions asked after a timeout: a store that fails them reports
 * that failure; one that has every address by then says it came late. */
static void test_probe_after_timeout(void **state) {
  test_kv_view_t v = {0};
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  v.only = "addr/";
  v.late = 1;
  v.fail_probe = COLL_ERR_PEER_LOST;
  v.fail_text = "kv gone";
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PEER_LOST,
               "the store's get of 'coll/addr/0' failed: kv gone");
  v.fail_probe = COLL_OK;
  EXPECT_ALONE(&v, 1, 2, "127.0.0.1:9", 11, COLL_ERR_TIMEOUT,
               "'coll/addr/0' did not appear in the store within 2000 ms "
               "(every address is there now: too late)");
  test_kv_free(v.kv);
}

/* The store failing in the compatibility check: a set, a get, a get
 * without a length, a wait and then the question after it; and every
 * record there after the wait timed out. */
static void test_compat_store_fails(void **state) {
  test_kv_view_t v = {0};
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  v.only = "compat/";
  v.fail_text = "kv service down";
  v.fail_set = COLL_ERR_SYSTEM;
  EXPECT_ALONE(&v, 0, 2, NULL, 0, COLL_ERR_SYSTEM,
               "comm_init_store: the store's set of 'coll/compat/0' failed: "
               "kv service down");
  v.fail_set = COLL_OK;
  v.fail_get = COLL_ERR_PEER_LOST;
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PEER_LOST,
               "comm_init_store: the store's get of 'coll/compat/0' failed: "
               "kv service down");
  v.fail_get = COLL_OK;
  v.forget_len = 1;
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PROTOCOL,
               "the store's get of 'coll/compat/0' returned COLL_OK without "
               "setting the value's length");
  v.forget_len = 0;
  v.late = 1;
  v.fail_probe = COLL_ERR_PEER_LOST;
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_PEER_LOST,
               "the store's get of 'coll/compat/0' failed: kv service down");
  v.fail_probe = COLL_OK;
  EXPECT_ALONE(&v, 1, 2, NULL, 0, COLL_ERR_TIMEOUT,
               "comm_init_store: store bootstrap: not every rank arrived "
               "within 2000 ms (every rank's coll/compat/<rank> is there "
               "now: too late)");
  test_kv_free(v.kv);
}

/* Rank 1 of 2 alone, rank 0's record being `record` (len bytes): rank 1
 * fails at once with PROTOCOL, its text in why. */
static void foreign(const void *record, size_t len, char *why) {
  test_kv_view_t v = {0};
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  v.kv = test_kv_new();
  assert_non_null(v.kv);
  test_kv_put(v.kv, "coll/compat/0", record, len);
  test_kv_ops(&v, &ops);
  cfg.timeout_ms = 60000; /* a wait for it would fail as TIMEOUT */
  assert_int_equal(coll_comm_init_store(&ops, 1, 2, &cfg, &c),
                   COLL_ERR_PROTOCOL);
  snprintf(why, COLL_ERRMSG_MAX, "%s", coll_last_error());
  assert_null(c);
  test_kv_free(v.kv);
}

/* Records this build cannot have written: another build's, and one longer
 * than any this build writes. */
static void test_foreign_records(void **state) {
  char why[COLL_ERRMSG_MAX], big[300];
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  foreign("libcoll 9.0.0 wire 7 (x)", 24, why);
  if (strstr(why,
             "comm_init_store: store bootstrap: ranks built or "
             "configured incompatibly: rank 1 runs libcoll ") == NULL ||
      strstr(why, ", rank 0 runs libcoll 9.0.0 wire 7 (x)") == NULL)
    fail_msg("%s", why);
  memset(big, 'x', sizeof big);
  foreign(big, sizeof big, why);
  if (strstr(why,
             "rank 0 runs a build with a longer compatibility "
             "record") == NULL)
    fail_msg("%s", why);
}

/* The store failing while the ranks agree on the outcome (one rank: no
 * mesh to build). */
static void test_outcome_store_fails(void **state) {
  test_kv_view_t v = {0};
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  v.only = "outcome/";
  v.fail_text = "kv gone";
  v.fail_set = COLL_ERR_SYSTEM;
  EXPECT_ALONE(&v, 0, 1, NULL, 0, COLL_ERR_SYSTEM,
               "comm_init_store: setup: the store failed while the ranks "
               "agreed on the outcome: the store's set of 'coll/outcome/0' "
               "failed: kv gone");
  v.fail_set = COLL_OK;
  v.fail_get = COLL_ERR_PEER_LOST;
  EXPECT_ALONE(&v, 0, 1, NULL, 0, COLL_ERR_PEER_LOST,
               "setup: the store failed while the ranks agreed on the "
               "outcome: the store's get of 'coll/outcome/0' failed: kv gone");
  test_kv_free(v.kv);
}

/* Values that cannot be an address: empty, too long, malformed. */
static void test_wrong_values(void **state) {
  test_kv_view_t v = {0};
  char long_value[300];
  (void)state;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  v.kv = test_kv_new();
  memset(long_value, '7', sizeof long_value);
  EXPECT_ALONE(&v, 1, 2, "", 0, COLL_ERR_PROTOCOL,
               "the value of 'coll/addr/0' is 0 bytes; an address is 1 to 95");
  EXPECT_ALONE(&v, 1, 2, long_value, sizeof long_value, COLL_ERR_PROTOCOL,
               "the value of 'coll/addr/0' is 300 bytes");
  EXPECT_ALONE(&v, 1, 2, "garbage", 7, COLL_ERR_INVALID_ARG,
               "malformed address 'garbage'");
  test_kv_free(v.kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_four_ranks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_rank, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_comms_one_store, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_listen_address, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absent_ranks_named, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absent_addresses_named, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_rank0_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_get_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_probe_after_timeout, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_wrong_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_compat_store_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outcome_store_fails, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
