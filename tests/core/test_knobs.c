/* SPDX-License-Identifier: Apache-2.0 */
/* test_knobs.c: one rule for every COLL_* variable (core/env.h). For each,
 * from a table that must cover exactly the variables env.h declares: a bad
 * value fails comm creation on every path (a comm over the in-process
 * transport, the TCP transport's constructor, coll_comm_init_env over
 * TCP or shared memory, coll_comm_init_store) with COLL_ERR_INVALID_ARG
 * and a text naming the variable, the value and what it accepts; a good
 * value makes a comm. Then the typed accessors: a value set between two
 * reads is seen, a refused one reads as the default, and the text the
 * rendezvous compares is the parsed value, not the spelling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/env.h"
#include "core/error.h"
#include "test_kv.h"
#include "test_util.h"

/* A bad and a good value of each variable. bad NULL: it takes any text
 * (a path, a secret), and the good one is odd on purpose. */
typedef struct row {
  const char *name, *bad, *good;
} row_t;

static const row_t k_rows[] = {
    {"COLL_DEBUG", "loud", "WARN"},
    {"COLL_SOCKET_IFNAME", "an-interface-name-too-long", "lo"},
    {"COLL_TIMEOUT_MS", "2s", "-1"},
    {"COLL_AUTH_TOKEN", NULL, "s3cret with spaces"},
    {"COLL_NCCL_LIBRARY", NULL, "/nonexistent/libnccl.so.2"},
    {"COLL_NCCL_SHRINKABLE", "yes", "1"},
    {"COLL_ALGO", "bcube", "Ring"},
    {"COLL_RING_THRESHOLD", "-1", "0"},
    {"COLL_LINK_PROBE", "sometimes", "0"},
    {"COLL_SEGMENT_BYTES", "32", "4096"},
    {"COLL_CHECK_MISMATCH", "2", "0"},
    {"COLL_SIMD", "sse", "scalar"},
    {"COLL_BACKEND", "gpu", "cpu"},
    {"COLL_TRACE_FILE", NULL, "/nonexistent/trace-%r.json"},
    {"COLL_TRACE_ENTRIES", "many", "0"},
    {"COLL_TRANSPORT", "udp", "tcp"},
    {"COLL_SHM_SPIN_US", "-1", "0"},
    {"COLL_SHM_SINGLE_COPY", "1M", "0"},
    {"COLL_HEARTBEAT_TIMEOUT_MS", "soon", "0"},
    {"COLL_TCP_SPIN_US", "20us", "0"},
    {"COLL_TCP_LOCAL_BUFFER_BYTES", "512K", "65536"},
    {"COLL_TCP_CONGESTION", "a-name-of-sixteen", "cubic"},
    /* The case of the report: accepted on one host, a comm that could not
     * shrink. */
    {"COLL_ELASTIC", "true", "1"},
};
#define NROWS (sizeof k_rows / sizeof k_rows[0])

static coll_env_t id_of(const char *name) {
  int i;
  for (i = 0; i < COLL_ENV_COUNT; i++)
    if (strcmp(coll__env_name((coll_env_t)i), name) == 0) return (coll_env_t)i;
  return COLL_ENV_COUNT;
}

/* The table and env.h name the same variables, every COLL_* one there. */
static void test_table_covers_every_variable(void **state) {
  size_t r;
  int i, knobs = 0;
  (void)state;
  for (r = 0; r < NROWS; r++) {
    coll_env_t id = id_of(k_rows[r].name);
    if (id == COLL_ENV_COUNT) fail_msg("%s is not in env.h", k_rows[r].name);
    assert_int_not_equal(coll__env_kind(id), COLL_KNOB_FOREIGN);
  }
  for (i = 0; i < COLL_ENV_COUNT; i++) {
    const char *name = coll__env_name((coll_env_t)i);
    int found = 0;
    if (coll__env_kind((coll_env_t)i) == COLL_KNOB_FOREIGN) {
      if (strncmp(name, "COLL_", 5) == 0)
        fail_msg("%s is a COLL_ variable declared as another program's", name);
      continue;
    }
    knobs++;
    for (r = 0; r < NROWS; r++) found |= strcmp(k_rows[r].name, name) == 0;
    if (!found) fail_msg("%s has no row in this test's table", name);
  }
  assert_int_equal(knobs, (int)NROWS);
}

/* "COLL_X='v'" and what X accepts are both in this thread's error text. */
static void expect_named(const char *path, const row_t *row, coll_status_t s) {
  char want[160], acc[160];
  coll__knob_accepted(id_of(row->name), acc, sizeof acc);
  snprintf(want, sizeof want, "%s='%s'", row->name, row->bad);
  if (s != COLL_ERR_INVALID_ARG || strstr(coll_last_error(), want) == NULL ||
      strstr(coll_last_error(), acc) == NULL)
    fail_msg("%s with %s=%s: %s: \"%s\" (want \"%s\" and \"%s\")", path,
             row->name, row->bad, coll_status_name(s), coll_last_error(), want,
             acc);
}

static coll_status_t inproc_comm(coll_comm_t **c) {
  coll_transport_t *t[1];
  coll_status_t s = coll_inproc_create(1, t);
  if (s != COLL_OK) return s;
  return coll_comm_create(t[0], NULL, c); /* takes t, also on failure */
}

/* The environment of a one-rank job launched by torchrun. */
static void launcher_env(int on) {
  if (on) {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29999", 1);
  } else {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
  }
}

/* coll_comm_init_env of one rank, with COLL_TRANSPORT=transport unless
 * the row is COLL_TRANSPORT's own. */
static void env_init_refused(const row_t *row, const coll_comm_config_t *cfg,
                             const char *transport) {
  coll_comm_t *c = (coll_comm_t *)0x1;
  char path[64];
  int own = strcmp(row->name, "COLL_TRANSPORT") == 0;
  if (!own) setenv("COLL_TRANSPORT", transport, 1);
  snprintf(path, sizeof path, "coll_comm_init_env (%s)", transport);
  expect_named(path, row, coll_comm_init_env(cfg, &c));
  assert_null(c);
  if (!own) unsetenv("COLL_TRANSPORT");
}

static void test_bad_values_refused_everywhere(void **state) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_tcp_config_t tcfg = COLL_TCP_CONFIG_INIT;
  test_kv_view_t v = {0};
  coll_store_ops_t ops;
  size_t r;
  (void)state;
  cfg.timeout_ms = 5000; /* a path that went past the check ends soon */
  tcfg.rank = 0;
  tcfg.world = 1;
  tcfg.master_addr = "127.0.0.1";
  tcfg.master_port = 29999;
  tcfg.timeout_ms = 5000;
  v.kv = test_kv_new();
  assert_non_null(v.kv);
  test_kv_ops(&v, &ops);
  for (r = 0; r < NROWS; r++) {
    const row_t *row = &k_rows[r];
    coll_comm_t *c = (coll_comm_t *)0x1;
    coll_transport_t *t = (coll_transport_t *)0x1;
    if (row->bad == NULL) continue;
    setenv(row->name, row->bad, 1);
    expect_named("coll_comm_create (in-process)", row, inproc_comm(&c));
    assert_null(c);
    expect_named("coll_tcp_create", row, coll_tcp_create(&tcfg, &t));
    assert_null(t);
    launcher_env(1);
    env_init_refused(row, &cfg, "shm");
    env_init_refused(row, &cfg, "tcp");
    launcher_env(0);
    c = (coll_comm_t *)0x1;
    expect_named("coll_comm_init_store", row,
                 coll_comm_init_store(&ops, 0, 1, &cfg, &c));
    assert_null(c);
    assert_int_equal(test_kv_count(v.kv), 0); /* refused before the store */
    unsetenv(row->name);
  }
  test_kv_free(v.kv);
}

static void test_good_values_accepted(void **state) {
  size_t r;
  (void)state;
  for (r = 0; r < NROWS; r++) {
    coll_comm_t *c = NULL;
    coll_status_t s;
    setenv(k_rows[r].name, k_rows[r].good, 1);
    s = inproc_comm(&c);
    if (s != COLL_OK)
      fail_msg("%s=%s: %s: %s", k_rows[r].name, k_rows[r].good,
               coll_status_name(s), coll_last_error());
    assert_int_equal(coll_comm_destroy(c), COLL_OK);
    /* Empty is unset. */
    setenv(k_rows[r].name, "", 1);
    assert_int_equal(inproc_comm(&c), COLL_OK);
    assert_int_equal(coll_comm_destroy(c), COLL_OK);
    unsetenv(k_rows[r].name);
  }
}

/* The typed values follow the environment, parsed once per text. */
static void test_accessors(void **state) {
  char a[200], b[200];
  (void)state;
  assert_int_equal(coll__knob(COLL_ENV_ALGO), COLL_ALGO_AUTO);
  setenv("COLL_ALGO", "RD", 1);
  assert_int_equal(coll__knob(COLL_ENV_ALGO), COLL_ALGO_RD);
  assert_string_equal(coll__knob_word(COLL_ENV_ALGO), "rd");
  assert_int_equal(coll__knob_set(COLL_ENV_ALGO), 1);
  setenv("COLL_ALGO", "bcube", 1);
  coll__err_clear();
  assert_int_equal(coll__knob(COLL_ENV_ALGO), COLL_ALGO_AUTO); /* default */
  assert_int_equal(coll__knob_set(COLL_ENV_ALGO), 0);
  assert_string_equal(coll_last_error(), ""); /* a reader records nothing */
  unsetenv("COLL_ALGO");
  assert_int_equal(coll__knob(COLL_ENV_HEARTBEAT_TIMEOUT_MS),
                   COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS);
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", "250", 1);
  assert_int_equal(coll__knob(COLL_ENV_HEARTBEAT_TIMEOUT_MS), 250);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  assert_null(coll__knob_text(COLL_ENV_AUTH_TOKEN));
  setenv("COLL_AUTH_TOKEN", "t0k", 1);
  assert_string_equal(coll__knob_text(COLL_ENV_AUTH_TOKEN), "t0k");
  unsetenv("COLL_AUTH_TOKEN");
  /* What the rendezvous compares: unset and the explicit default read the
   * same, and so do two spellings of one word. */
  coll__knobs_agreed_text(a, sizeof a);
  assert_string_equal(a,
                      "algo=auto ring_threshold=default link_probe=auto "
                      "segment_bytes=default check_mismatch=default");
  setenv("COLL_ALGO", "AUTO", 1);
  setenv("COLL_LINK_PROBE", "Auto", 1);
  coll__knobs_agreed_text(b, sizeof b);
  assert_string_equal(a, b);
  setenv("COLL_ALGO", "Ring", 1);
  setenv("COLL_RING_THRESHOLD", "4096", 1);
  coll__knobs_agreed_text(b, sizeof b);
  assert_string_equal(b,
                      "algo=ring ring_threshold=4096 link_probe=auto "
                      "segment_bytes=default check_mismatch=default");
  unsetenv("COLL_ALGO");
  unsetenv("COLL_LINK_PROBE");
  unsetenv("COLL_RING_THRESHOLD");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_covers_every_variable),
      cmocka_unit_test(test_bad_values_refused_everywhere),
      cmocka_unit_test(test_good_values_accepted),
      cmocka_unit_test(test_accessors),
  };
  unsetenv("COLL_ALGO");
  return cmocka_run_group_tests(tests, NULL, NULL);
}
