/* SPDX-License-Identifier: Apache-2.0 */
/* test_coll_perf.c: coll-perf over every collective, dtype and op, with
 * ranks as threads ("threads") or as processes under coll-run over TCP
 * ("tcp", which also runs the ddp_tcp example). coll-perf checks results
 * against its own reference; these tests read its table and require zero
 * wrong elements in every row. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "coll.h"
#include "core/env.h"
#include "proc_util.h"

#define PERF COLL_PERF_PATH
#define RUN COLL_RUN_PATH
/* Bound on one coll-perf run (coll-run's own --timeout is below it). */
#define PERF_MS 120000

/* Failures surface as an error, not as a five-minute wait. A low ring
 * threshold and small pipeline segments let small sizes reach both
 * allreduce algorithms and a ring of several segments. */
static char timeout_env[] = "COLL_TIMEOUT_MS=30000";
static char threshold_env[] = "COLL_RING_THRESHOLD=4096";
static char segment_env[] = "COLL_SEGMENT_BYTES=4096";
/* --peer-protocol: a short timed loop per size. */
static char seconds_env[] = "BENCH_SECONDS=0.02";
static char *const perf_envs[] = {timeout_env, threshold_env, segment_env,
                                  seconds_env, NULL};

static const char *const colls[] = {"allreduce", "allgather", "reduce-scatter",
                                    "broadcast", "reduce",    "barrier"};

/* Splits a CSV line into at most max fields (in place); returns the count. */
static int split_csv(char *line, char **fields, int max) {
  int n = 0;
  char *p = line;
  while (n < max) {
    fields[n++] = p;
    p = strchr(p, ',');
    if (p == NULL) break;
    *p++ = '\0';
  }
  return n;
}

/* Asserts that coll-perf's CSV output holds `rows` rows of collective
 * `coll`, every checked variant with 0 wrong elements. */
static void check_csv(const char *out, const char *coll, int rows) {
  char *copy = strdup(out), *line, *save = NULL, *f[16] = {0};
  int n = 0;
  assert_non_null(copy);
  line = strtok_r(copy, "\n", &save);
  assert_non_null(line);
  assert_true(strncmp(line, "collective,ranks,size,count", 27) == 0);
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    if (split_csv(line, f, 16) != 15) fail_msg("bad CSV row: %s", line);
    assert_string_equal(f[0], coll);
    /* Out-of-place is empty where the collective has none. */
    if (f[10][0] != '\0') assert_string_equal(f[10], "0");
    assert_string_equal(f[14], "0");
    assert_true(atof(f[11]) >= 0);
    n++;
  }
  assert_int_equal(n, rows);
  free(copy);
}

/* The argument lists end with a NULL; the compiler checks that they do. */
static int run_perf(int ranks, int tcp, char **out, char **err, ...)
    __attribute__((sentinel));
static void expect_usage(const char *text, ...) __attribute__((sentinel));

/* Runs coll-perf with `ranks` ranks, processes over TCP under coll-run if
 * tcp, else threads, with the extra arguments that follow, up to a NULL;
 * returns its exit code and output. */
static int run_perf(int ranks, int tcp, char **out, char **err, ...) {
  char *argv[40], np[16];
  int n = 0;
  va_list ap;
  snprintf(np, sizeof np, "%d", ranks);
  if (tcp) {
    argv[n++] = RUN;
    argv[n++] = "-n";
    argv[n++] = np;
    argv[n++] = "--timeout";
    argv[n++] = "90";
    argv[n++] = PERF;
  } else {
    argv[n++] = PERF;
    argv[n++] = "--threads";
    argv[n++] = np;
  }
  va_start(ap, err);
  while (n < 39 && (argv[n] = va_arg(ap, char *)) != NULL) n++;
  va_end(ap);
  argv[n] = NULL;
  return proc_run(argv, perf_envs, PERF_MS, out, err);
}

static void expect_ok(int rc, char *out, char *err) {
  if (rc != 0)
    fail_msg("coll-perf exit %d\nstdout:\n%s\nstderr:\n%s", rc, out ? out : "",
             err ? err : "");
}

/* Lines of text that are not comments ('#'). */
static int data_lines(const char *text) {
  const char *p = text;
  int n = 0;
  while (p != NULL && *p != '\0') {
    if (*p != '#' && *p != '\n') n++;
    p = strchr(p, '\n');
    if (p != NULL) p++;
  }
  return n;
}

/* The nccl-tests-style run from the README. */
static void test_smoke_table(void **state) {
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(run_perf(4, 0, &out, &err, "-b", "1K", "-e", "64K", "-f", "4", "-c",
                     "1", NULL),
            out, err);
  assert_int_equal(data_lines(out), 4); /* 1K 4K 16K 64K */
  assert_non_null(strstr(out, "# Wrong elements       : 0 OK"));
  assert_non_null(strstr(out, "# Avg bus bandwidth"));
  free(out);
  free(err);
}

/* Every collective with every dtype (-d all), two sizes each. */
static void test_every_collective(void **state) {
  size_t c;
  (void)state;
  for (c = 0; c < sizeof colls / sizeof colls[0]; c++) {
    char *out = NULL, *err = NULL;
    int barrier = strcmp(colls[c], "barrier") == 0;
    int rc =
        run_perf(4, 0, &out, &err, "-C", colls[c], "-d", "all", "-b", "1K",
                 "-e", "16K", "-f", "16", "-n", "1", "-w", "0", "--csv", NULL);
    expect_ok(rc, out, err);
    check_csv(out, colls[c], barrier ? 1 : COLL_DTYPE_COUNT * 2);
    free(out);
    free(err);
  }
}

/* Every dtype with every op (-d all -o all), through allreduce (4 ranks),
 * reduce-scatter and a reduce to a root other than 0 (3 ranks: an odd
 * world); two sizes each, one below and one above the ring threshold
 * (COLL_RING_THRESHOLD above). */
static void test_every_dtype_and_op(void **state) {
  static const char *const reducing[] = {"allreduce", "reduce-scatter",
                                         "reduce"};
  static const int ranks[] = {4, 3, 3};
  size_t c;
  (void)state;
  for (c = 0; c < sizeof reducing / sizeof reducing[0]; c++) {
    char *out = NULL, *err = NULL;
    int rc = run_perf(ranks[c], 0, &out, &err, "-C", reducing[c], "-d", "all",
                      "-o", "all", "-r", "2", "-b", "64", "-e", "32K", "-f",
                      "512", "-n", "1", "-w", "0", "--csv", NULL);
    expect_ok(rc, out, err);
    check_csv(out, reducing[c], COLL_DTYPE_COUNT * COLL_OP_COUNT * 2);
    free(out);
    free(err);
  }
}

static void test_json(void **state) {
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(run_perf(4, 0, &out, &err, "-C", "allgather", "-b", "4K", "-e",
                     "8K", "-n", "2", "--json", NULL),
            out, err);
  assert_int_equal(out[0], '{');
  assert_non_null(strstr(out, "\"collective\": \"allgather\""));
  assert_non_null(strstr(out, "\"ranks\": 4"));
  assert_non_null(strstr(out, "\"wrong\": 0, \"ok\": true}"));
  free(out);
  free(err);
}

/* coll-perf with the arguments that follow (up to a NULL) must fail with
 * exit code 2 and say `text`. */
static void expect_usage(const char *text, ...) {
  char *argv[16], *err = NULL;
  int n = 0;
  va_list ap;
  argv[n++] = PERF;
  va_start(ap, text);
  while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL) n++;
  va_end(ap);
  argv[n] = NULL;
  assert_int_equal(proc_run(argv, perf_envs, PERF_MS, NULL, &err), 2);
  if (strstr(err, text) == NULL)
    fail_msg("expected '%s' in coll-perf's error, got: %s", text, err);
  free(err);
}

/* --peer-protocol prints the peer drivers' table: their header lines, then
 * one row per size of theirs within -b/-e, whose bandwidths follow from
 * the size and time as theirs do; no row failed verification. `prefix` is
 * what coll-run puts before rank 0's lines ("" for threads). */
static void check_peer_table(const char *out, const char *prefix, int ranks,
                             const size_t *sizes, int nsizes) {
  char head[64], line[256];
  const char *p = out;
  int rows = 0;
  snprintf(head, sizeof head, "%s# peer=coll n=%d target_s=0.02\n", prefix,
           ranks);
  if (strncmp(out, head, strlen(head)) != 0)
    fail_msg("expected '%s' first, got:\n%s", head, out);
  snprintf(line, sizeof line,
           "\n%s     bytes      time_us algbw_GBps "
           "busbw_GBps\n",
           prefix);
  if (strstr(out, line) == NULL) fail_msg("no column header in:\n%s", out);
  assert_null(strstr(out, "VERIFY-FAILED"));
  while ((p = strchr(p, '\n')) != NULL && p[1] != '\0') {
    unsigned long long bytes;
    double t, alg, bus;
    p++;
    if (strncmp(p, prefix, strlen(prefix)) != 0) continue;
    if (sscanf(p + strlen(prefix), "%llu %lf %lf %lf", &bytes, &t, &alg,
               &bus) != 4)
      continue;
    if (rows >= nsizes || bytes != sizes[rows])
      fail_msg("row %d is %llu bytes:\n%s", rows, bytes, out);
    assert_true(t > 0);
    /* algbw printed to 3 decimals, the time to 2: within both roundings
     * of bytes / time (a 2 us time is 0.25 % off by its own). */
    assert_true(fabs(alg - bytes / t / 1e3) <=
                0.0005 + alg * (0.005 / t + 1e-4));
    /* Both rounded from the unrounded algbw: up to 0.0005 each, scaled. */
    assert_true(fabs(bus - alg * 2.0 * (ranks - 1) / ranks) <= 0.0021);
    rows++;
  }
  assert_int_equal(rows, nsizes);
}

/* Buffers at a page offset: every dtype right at the last one allowed,
 * said in the header; the peers' loop too. */
static void test_offset(void **state) {
  static const size_t sizes[] = {4096, 65536};
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(
      run_perf(2, 0, &out, &err, "--offset", "4080", "-d", "all", "-b", "1K",
               "-e", "256K", "-f", "16", "-n", "2", "-c", "1", NULL),
      out, err);
  assert_non_null(strstr(out, "buffers start 4080 bytes into a page"));
  assert_non_null(strstr(out, "# Wrong elements       : 0 OK"));
  free(out);
  free(err);
  expect_ok(run_perf(2, 0, &out, &err, "--peer-protocol", "--offset", "48",
                     "-e", "64K", NULL),
            out, err);
  check_peer_table(out, "", 2, sizes, 2);
  free(out);
  free(err);
}

static void test_peer_protocol(void **state) {
  static const size_t sizes[] = {4096, 65536};
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(run_perf(3, 0, &out, &err, "--peer-protocol", "-e", "64K", NULL),
            out, err);
  check_peer_table(out, "", 3, sizes, 2);
  free(out);
  free(err);
}

static void test_tcp_peer_protocol(void **state) {
  static const size_t sizes[] = {65536, 1048576};
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(run_perf(2, 1, &out, &err, "--peer-protocol", "-b", "8K", "-e",
                     "1M", NULL),
            out, err);
  check_peer_table(out, "[0] ", 2, sizes, 2);
  free(out);
  free(err);
}

static void test_bad_arguments(void **state) {
  (void)state;
  expect_usage("-d: 'f8'", "-d", "f8", NULL);
  expect_usage("-o: 'mean'", "-o", "mean", NULL);
  expect_usage("-C: 'alltoall'", "-C", "alltoall", NULL);
  expect_usage("-b: '0'", "-b", "0", NULL);
  expect_usage("-b: '1X'", "-b", "1X", NULL);
  expect_usage("-f: '1'", "-f", "1", NULL);
  expect_usage("-c: '2'", "-c", "2", NULL);
  expect_usage("larger than -e", "-b", "1M", "-e", "1K", NULL);
  expect_usage("exclude each other", "--csv", "--json", NULL);
  expect_usage("excludes --csv and --json", "--peer-protocol", "--csv", NULL);
  expect_usage("larger than -e", "--peer-protocol", "-b", "1M", "-e", "4K",
               NULL);
  expect_usage("the root must be below", "--threads", "4", "-C", "broadcast",
               "-r", "4", NULL);
  expect_usage("unknown option", "--bogus", NULL);
  expect_usage("a multiple of 16 in 0..4080", "--offset", "8", NULL);
  expect_usage("a multiple of 16 in 0..4080", "--offset", "4096", NULL);
  expect_usage("unexpected argument", "extra", NULL);
  expect_usage("--cost prints its own table", "--cost", "--csv", NULL);
  expect_usage("--nccl takes --threads N and --cost", "--nccl", NULL);
}

/* --cost on CPU comms: a row per size, times that are numbers, issue no
 * later than done, no raw columns (no NCCL of its own here). */
static void test_cost(void **state) {
  char *out = NULL, *err = NULL, *p;
  size_t size = 0, count = 0;
  double issue = -1, done = -1;
  int rows = 0;
  (void)state;
  expect_ok(run_perf(2, 0, &out, &err, "--cost", "-b", "8", "-e", "64K", "-f",
                     "8192", "-n", "20", "-w", "2", NULL),
            out, err);
  assert_non_null(
      strstr(out, "# coll-perf --cost: f32 sum allreduce, 2 ranks"));
  for (p = out; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
    if (*p == '\n') p++;
    if (sscanf(p, " %zu %zu %lf %lf", &size, &count, &issue, &done) == 4) {
      assert_true(issue >= 0 && done >= issue);
      assert_int_equal(count * 4, size);
      rows++;
    }
  }
  assert_int_equal(rows, 2); /* 8 B and 64 KiB */
  free(out);
  free(err);
}

/* --env lists exactly the variables declared in src/core/env.h. */
static void test_env_list(void **state) {
  static const char *const names[] = {
#define NAME_(id, name, kind, lo, hi, words, dflt, agree, meaning) name,
      COLL_ENV_MAP(NAME_)
#undef NAME_
  };
  char *const argv[] = {PERF, "--env", NULL};
  char *out = NULL, *p, line[64];
  size_t i, width = 0;
  int listed = 0;
  (void)state;
  assert_int_equal(proc_run(argv, NULL, PERF_MS, &out, NULL), 0);
  for (i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(line, sizeof line, "\n%s ", names[i]);
    if (strstr(out, line) == NULL)
      fail_msg("coll-perf --env does not list %s", names[i]);
  }
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) > width) width = strlen(names[i]);
  for (p = strchr(out, '\n'); p != NULL && p[1] != '\0';
       p = strchr(p + 1, '\n')) {
    if (p[1] == '#') continue;
    listed++;
    /* One column of names as wide as the longest, then the values. */
    if (p[1 + width] != ' ' || p[2 + width] == ' ')
      fail_msg("coll-perf --env: the value is not at column %zu: %.60s",
               width + 1, p + 1);
  }
  assert_int_equal(listed, (int)(sizeof names / sizeof names[0]));
  free(out);
}

/* A failed init says why; the hint to use a launcher comes only where no
 * launcher gave a rank (under one, it would send the user the wrong way). */
static void test_init_failure_text(void **state) {
  static char rank[] = "RANK=1", world[] = "WORLD_SIZE=2",
              addr[] = "MASTER_ADDR=127.0.0.1", port[] = "MASTER_PORT=1",
              timeout[] = "COLL_TIMEOUT_MS=300";
  char *const launched[] = {rank, world, addr, port, timeout, NULL};
  char *const argv[] = {PERF, "-b", "4K", "-e", "4K", NULL};
  char *err = NULL;
  (void)state;
  /* Rank 1 of 2, and nobody serves the rendezvous on port 1. */
  assert_int_equal(proc_run(argv, launched, PERF_MS, NULL, &err), 1);
  if (strstr(err, "coll_comm_init_env failed: ERR_") == NULL ||
      strstr(err, "127.0.0.1:1") == NULL || strstr(err, "launcher") != NULL)
    fail_msg("under a launcher, coll-perf said: %s", err);
  free(err);
  err = NULL;
  assert_int_equal(proc_run(argv, NULL, PERF_MS, NULL, &err), 1);
  if (strstr(err, "no rank in the environment") == NULL ||
      strstr(err, "run it under a launcher") == NULL)
    fail_msg("without a launcher, coll-perf said: %s", err);
  free(err);
}

static void test_tcp_allreduce(void **state) {
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(run_perf(2, 1, &out, &err, "-b", "1K", "-e", "64K", "-f", "8", "-c",
                     "1", "--csv", NULL),
            out, err);
  /* coll-run prefixes rank 0's lines; strip "[0] " for the CSV check. */
  {
    char *clean = calloc(strlen(out) + 1, 1), *s = out, *d = clean;
    assert_non_null(clean);
    while (*s != '\0') {
      if (strncmp(s, "[0] ", 4) == 0) s += 4;
      while (*s != '\0' && (*d++ = *s++) != '\n') {
      }
    }
    check_csv(clean, "allreduce", 3); /* 1K 8K 64K */
    free(clean);
  }
  free(out);
  free(err);
}

static void test_tcp_every_collective(void **state) {
  size_t c;
  (void)state;
  for (c = 0; c < sizeof colls / sizeof colls[0]; c++) {
    char *out = NULL, *err = NULL;
    expect_ok(run_perf(3, 1, &out, &err, "-C", colls[c], "-d", "bf16", "-b",
                       "4K", "-e", "16K", "-f", "4", NULL),
              out, err);
    assert_non_null(strstr(out, "[0] # Wrong elements       : 0 OK"));
    free(out);
    free(err);
  }
}

static void test_ddp_example(void **state) {
#ifdef DDP_TCP_PATH
  char *const argv[] = {RUN, "-n", "4", "--timeout", "90", DDP_TCP_PATH, NULL};
  char *out = NULL, *err = NULL;
  (void)state;
  expect_ok(proc_run(argv, perf_envs, PERF_MS, &out, &err), out, err);
  assert_non_null(strstr(out, "[0] weights identical on all ranks: yes"));
  free(out);
  free(err);
#else
  (void)state;
  skip();
#endif
}

int main(int argc, char **argv) {
  const struct CMUnitTest threads[] = {
      cmocka_unit_test(test_smoke_table),
      cmocka_unit_test(test_every_collective),
      cmocka_unit_test(test_every_dtype_and_op),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_cost),
      cmocka_unit_test(test_env_list),
      cmocka_unit_test(test_init_failure_text),
      cmocka_unit_test(test_peer_protocol),
      cmocka_unit_test(test_offset),
  };
  const struct CMUnitTest tcp[] = {
      cmocka_unit_test(test_tcp_allreduce),
      cmocka_unit_test(test_tcp_every_collective),
      cmocka_unit_test(test_ddp_example),
      cmocka_unit_test(test_tcp_peer_protocol),
  };
  /* The children must see no launcher but the ones a test gives them. */
  unsetenv("RANK");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("PMI_RANK");
  unsetenv("SLURM_PROCID");
  if (argc > 1 && strcmp(argv[1], "tcp") == 0)
    return cmocka_run_group_tests_name("tcp", tcp, NULL, NULL);
  return cmocka_run_group_tests_name("threads", threads, NULL, NULL);
}
