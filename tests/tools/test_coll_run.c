/* SPDX-License-Identifier: Apache-2.0 */
/* test_coll_run.c: coll-run as a user sees it: exit codes, stopping ranks
 * without leaving processes behind, signals, output prefixes, timeout. */
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "proc_util.h"
#include "test_util.h"

/* Bound on any single coll-run invocation in this file. */
#define RUN_MS 30000
/* Bound on processes dying once they were told to. */
#define DEAD_MS 5000

#define RUN COLL_RUN_PATH
#define HELPER RANK_HELPER_PATH

static int run(char **out, char **err, char *const argv[]) {
  return proc_run(argv, NULL, RUN_MS, out, err);
}

/* Asserts that every rank (and every rank's child, if `children`) whose pid
 * is in dir is dead. */
static void assert_all_dead(const char *dir, int world, int children) {
  int r;
  for (r = 0; r < world; r++) {
    pid_t pid = proc_read_pid(dir, "pid", r);
    assert_true(pid > 0);
    if (!proc_wait_dead(pid, DEAD_MS))
      fail_msg("rank %d (pid %d) outlived coll-run", r, (int)pid);
    if (!children) continue;
    pid = proc_read_pid(dir, "child", r);
    assert_true(pid > 0);
    if (!proc_wait_dead(pid, DEAD_MS))
      fail_msg("the child of rank %d (pid %d) outlived coll-run", r, (int)pid);
  }
}

static void test_exit_code_of_failing_rank(void **state) {
  char *const argv[] = {RUN, "-n", "3", HELPER, "exit-if", "1", "3", NULL};
  char *err = NULL;
  (void)state;
  assert_int_equal(run(NULL, &err, argv), 3);
  assert_non_null(strstr(err, "rank 1 exited with code 3"));
  free(err);
}

static void test_success_is_zero(void **state) {
  char *const argv[] = {RUN, "-n", "4", HELPER, "exit-if", "9", "1", NULL};
  (void)state;
  assert_int_equal(run(NULL, NULL, argv), 0);
}

static void test_killed_rank_is_128_plus_signal(void **state) {
  char sig[8];
  char *const argv[] = {RUN, "-n", "2", HELPER, "signal-if", "1", sig, NULL};
  char *err = NULL;
  (void)state;
  snprintf(sig, sizeof sig, "%d", SIGUSR1);
  assert_int_equal(run(NULL, &err, argv), 128 + SIGUSR1);
  assert_non_null(strstr(err, "rank 1 was killed by signal"));
  free(err);
}

/* --keep-going: a killed rank stops no one; every exit is reported and
 * the job's code is that of the ranks that exited on their own. */
static void test_keep_going(void **state) {
  char sig[8];
  char *const killed[] = {RUN, "-n", "3", "--keep-going", HELPER, "signal-if",
                          "1", sig,  NULL};
  char *const failed[] = {RUN, "-n", "3", "--keep-going", HELPER, "exit-if",
                          "2", "7",  NULL};
  char *err = NULL;
  (void)state;
  snprintf(sig, sizeof sig, "%d", SIGKILL);
  assert_int_equal(run(NULL, &err, killed), 0);
  assert_non_null(strstr(err, "rank 1 was killed by signal 9"));
  assert_non_null(strstr(err, "rank 0 exited with code 0"));
  assert_non_null(strstr(err, "rank 2 exited with code 0"));
  assert_null(strstr(err, "stopping"));
  free(err);
  err = NULL;
  assert_int_equal(run(NULL, &err, failed), 7);
  assert_non_null(strstr(err, "rank 2 exited with code 7"));
  assert_non_null(strstr(err, "rank 1 exited with code 0"));
  free(err);
}

/* One rank fails while the others sleep: they and the children they
 * started must be gone when coll-run returns. */
static void test_failure_stops_the_rest(void **state) {
  char dir[64];
  (void)state;
  assert_int_equal(proc_temp_dir(dir), 0);
  {
    char *const argv[] = {RUN,          "-n", "3", "--grace", "5", HELPER,
                          "fail-sleep", "2",  "5", dir,       NULL};
    assert_int_equal(run(NULL, NULL, argv), 5);
  }
  assert_all_dead(dir, 3, 1);
  proc_remove_dir(dir);
}

/* A rank fails; the others learn of it a moment later, print (into stdio's
 * buffer: stdout is a pipe) and exit. What they printed reaches coll-run's
 * output: they are not stopped before they could flush it. With --drain 0
 * they are stopped at once, which is what loses it. */
static void test_failure_lets_the_others_drain(void **state) {
  char *const argv[] = {RUN, "-n", "3",   HELPER, "fail-report",
                        "1", "3",  "300", NULL};
  char *const now[] = {RUN,           "-n", "3", "--drain", "0", HELPER,
                       "fail-report", "1",  "3", "3000",    NULL};
  char *out = NULL, *err = NULL;
  (void)state;
  assert_int_equal(run(&out, &err, argv), 3);
  if (strstr(out, "[0] rank 0: saw rank 1 fail") == NULL ||
      strstr(out, "[2] rank 2: saw rank 1 fail") == NULL)
    fail_msg("the ranks' last lines were lost:\n%s\n%s", out, err);
  assert_non_null(strstr(err, "rank 1 exited with code 3"));
  assert_null(strstr(err, "SIGTERM"));
  free(out);
  free(err);
  out = err = NULL;
  /* --drain 0 stops them at once (their lines are lost then), and the
   * job's code is still the failing rank's. */
  assert_int_equal(run(&out, &err, now), 3);
  assert_null(strstr(out, "saw rank 1 fail"));
  free(out);
  free(err);
}

/* Ranks that ignore SIGTERM are killed after the grace period. */
static void test_sigterm_ignored_escalates(void **state) {
  char dir[64], *err = NULL;
  (void)state;
  assert_int_equal(proc_temp_dir(dir), 0);
  {
    char *const argv[] = {RUN,   "-n",   "3",           "--grace",
                          "0.3", HELPER, "fail-sleep",  "0",
                          "4",   dir,    "ignore-term", NULL};
    assert_int_equal(run(NULL, &err, argv), 4);
  }
  assert_non_null(strstr(err, "SIGKILL"));
  assert_all_dead(dir, 3, 1);
  free(err);
  proc_remove_dir(dir);
}

static void test_output_is_prefixed(void **state) {
  char *const argv[] = {RUN, "-n", "2", HELPER, "print", NULL};
  char *out = NULL, *err = NULL, *p, expect[64];
  long xs = 0;
  int r;
  (void)state;
  assert_int_equal(run(&out, &err, argv), 0);
  for (r = 0; r < 2; r++) {
    snprintf(expect, sizeof expect, "[%d] out %d line 1", r, r);
    assert_int_equal(proc_count_lines(out, expect), 1);
    snprintf(expect, sizeof expect, "[%d] out %d line 2", r, r);
    assert_int_equal(proc_count_lines(out, expect), 1);
    snprintf(expect, sizeof expect, "[%d] tail %d", r, r); /* partial line */
    assert_int_equal(proc_count_lines(out, expect), 1);
    snprintf(expect, sizeof expect, "[%d] err %d", r, r);
    assert_int_equal(proc_count_lines(err, expect), 1);
    assert_int_equal(proc_count_lines(out, expect), 0);
  }
  /* Every line carries a prefix, the long lines were cut, not lost. */
  for (p = out; *p != '\0'; p = strchr(p, '\n') + 1) {
    assert_true(strncmp(p, "[0] ", 4) == 0 || strncmp(p, "[1] ", 4) == 0);
    for (p += 4; *p == 'x'; p++) xs++;
    assert_non_null(strchr(p, '\n'));
  }
  assert_int_equal(xs, 2 * 40000);
  assert_int_equal(out[strlen(out) - 1], '\n');
  free(out);
  free(err);
}

static void test_environment(void **state) {
  char *const fixed[] = {
      RUN,    "-n",  "2", "--master-addr", "10.1.2.3", "--master-port", "12345",
      HELPER, "env", NULL};
  char *const picked[] = {RUN, "-n", "2", HELPER, "env", NULL};
  char *out = NULL, *p;
  int port0 = 0, port1 = 0;
  (void)state;
  assert_int_equal(run(&out, NULL, fixed), 0);
  assert_int_equal(proc_count_lines(out, "[0] env 0 2 0 2 10.1.2.3 12345"), 1);
  assert_int_equal(proc_count_lines(out, "[1] env 1 2 1 2 10.1.2.3 12345"), 1);
  free(out);
  assert_int_equal(run(&out, NULL, picked), 0);
  p = strstr(out, "[0] env 0 2 0 2 127.0.0.1 ");
  assert_non_null(p);
  port0 = atoi(p + strlen("[0] env 0 2 0 2 127.0.0.1 "));
  p = strstr(out, "[1] env 1 2 1 2 127.0.0.1 ");
  assert_non_null(p);
  port1 = atoi(p + strlen("[1] env 1 2 1 2 127.0.0.1 "));
  assert_true(port0 > 0 && port0 < 65536);
  assert_int_equal(port0, port1);
  free(out);
}

/* The token every rank of one run got ("[r] token <hex>"), in tok (65
 * bytes); fails unless all n ranks print the same one. */
static void job_token(const char *out, int n, char *tok) {
  char want[96];
  const char *p = strstr(out, "[0] token ");
  int r;
  assert_non_null(p);
  assert_int_equal(sscanf(p + strlen("[0] token "), "%64s", tok), 1);
  for (r = 0; r < n; r++) {
    snprintf(want, sizeof want, "[%d] token %s", r, tok);
    if (proc_count_lines(out, want) != 1)
      fail_msg("rank %d did not get the token '%s': %s", r, tok, out);
  }
}

/* Every rank of a job gets one fresh random COLL_AUTH_TOKEN (64 hex
 * digits), another job another one; a token set already is passed on. */
static void test_token(void **state) {
  char *const argv[] = {RUN, "-n", "3", HELPER, "token", NULL};
  char *const mine[] = {"COLL_AUTH_TOKEN=the-users-own", NULL};
  char t1[65], t2[65], *out = NULL;
  size_t i;
  (void)state;
  assert_int_equal(run(&out, NULL, argv), 0);
  job_token(out, 3, t1);
  free(out);
  assert_int_equal(strlen(t1), 64);
  for (i = 0; i < 64; i++)
    if (strchr("0123456789abcdef", t1[i]) == NULL) fail_msg("token %s", t1);
  assert_int_equal(run(&out, NULL, argv), 0);
  job_token(out, 3, t2);
  free(out);
  assert_string_not_equal(t1, t2);
  assert_int_equal(proc_run(argv, mine, RUN_MS, &out, NULL), 0);
  job_token(out, 3, t1);
  assert_string_equal(t1, "the-users-own");
  free(out);
}

/* "[rank] cpus ..." as rank_helper's affinity mode prints the set. */
static void cpus_line(char *buf, size_t cap, int rank, const cpu_set_t *set) {
  int cpu, n = snprintf(buf, cap, "[%d] cpus", rank);
  for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, set))
      n += snprintf(buf + n, cap - (size_t)n, " %d", cpu);
}

/* The CPUs in positions [lo, hi) of `all`, in order. */
static void cpus_between(const cpu_set_t *all, int lo, int hi, cpu_set_t *out) {
  int cpu, k = 0;
  CPU_ZERO(out);
  for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, all)) {
      if (k >= lo && k < hi) CPU_SET(cpu, out);
      k++;
    }
}

/* Runs n ranks printing their CPUs; checks rank r's against want(r). */
static void expect_cpus(int n, int loose, const cpu_set_t *all) {
  char nbuf[8], line[8192], *out = NULL;
  char *const bound[] = {RUN, "-n", nbuf, HELPER, "affinity", NULL};
  char *const floating[] = {RUN,    "-n",   nbuf,       "--bind",
                            "none", HELPER, "affinity", NULL};
  int c = CPU_COUNT(all), r;
  cpu_set_t want;
  snprintf(nbuf, sizeof nbuf, "%d", n);
  assert_int_equal(run(&out, NULL, loose ? floating : bound), 0);
  for (r = 0; r < n; r++) {
    if (loose)
      want = *all;
    else if (n <= c)
      cpus_between(all, r * c / n, (r + 1) * c / n, &want);
    else
      cpus_between(all, r % c, r % c + 1, &want);
    cpus_line(line, sizeof line, r, &want);
    if (proc_count_lines(out, line) != 1)
      fail_msg("%d ranks%s: expected '%s' in coll-run's output, got: %s", n,
               loose ? " (--bind none)" : "", line, out);
  }
  free(out);
}

/* By default the C CPUs coll-run was given are cut into one block per
 * rank, in order, so ranks do not pile onto one core and each keeps C/N
 * of them for its own threads; with more ranks than CPUs rank r gets CPU
 * r mod C; --bind none leaves every rank the whole set. One rank, as many
 * as CPUs, and one more than CPUs cover the three cases on any host. */
static void test_bind(void **state) {
  cpu_set_t all;
  int c;
  (void)state;
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  c = CPU_COUNT(&all);
  expect_cpus(1, 0, &all);
  if (c <= 64) expect_cpus(c, 0, &all);
  expect_cpus(c < 64 ? c + 1 : 3, 0, &all);
  expect_cpus(3, 1, &all);
}

/* The ranks sleep far longer than --timeout: coll-run must stop them and
 * exit 124. They are started first, so that their pids are known. */
static void test_timeout(void **state) {
  char dir[64], *err = NULL;
  char *const argv[] = {RUN,    "-n",        "2", "--timeout", "3",
                        HELPER, "sleep-pid", dir, NULL};
  proc_t p;
  (void)state;
  assert_int_equal(proc_temp_dir(dir), 0);
  assert_int_equal(proc_start(&p, argv, NULL), 0);
  assert_true(proc_wait_pid_files(dir, "pid", 2, RUN_MS));
  assert_int_equal(proc_wait(&p, RUN_MS, NULL, &err), 124);
  assert_non_null(strstr(err, "timeout"));
  assert_all_dead(dir, 2, 0);
  free(err);
  proc_remove_dir(dir);
}

static void test_program_not_executable(void **state) {
  char dir[64], path[128], *err = NULL;
  FILE *f;
  (void)state;
  {
    char *const argv[] = {RUN, "-n", "2", "/nonexistent/program", NULL};
    assert_int_equal(run(NULL, &err, argv), 127);
    assert_non_null(strstr(err, "cannot execute '/nonexistent/program'"));
    free(err);
  }
  assert_int_equal(proc_temp_dir(dir), 0);
  snprintf(path, sizeof path, "%s/not-executable", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\nexit 0\n", f);
  fclose(f);
  chmod(path, 0644);
  {
    char *const argv[] = {RUN, "-n", "1", path, NULL};
    assert_int_equal(run(NULL, &err, argv), 127);
    assert_non_null(strstr(err, "cannot execute"));
    free(err);
  }
  proc_remove_dir(dir);
}

static void expect_usage_error(char *const argv[], const char *text) {
  char *err = NULL;
  assert_int_equal(run(NULL, &err, argv), 2);
  if (strstr(err, text) == NULL)
    fail_msg("expected '%s' in coll-run's error, got: %s", text, err);
  free(err);
}

static void test_bad_arguments(void **state) {
  char *const none[] = {RUN, NULL};
  char *const zero[] = {RUN, "-n", "0", "true", NULL};
  char *const word[] = {RUN, "-n", "four", "true", NULL};
  char *const noprog[] = {RUN, "-n", "2", NULL};
  char *const port[] = {RUN, "-n", "2", "--master-port", "70000", "true", NULL};
  char *const tmo[] = {RUN, "-n", "2", "--timeout", "-1", "true", NULL};
  char *const unknown[] = {RUN, "--bogus", "-n", "2", "true", NULL};
  char *const missing[] = {RUN, "-n", "2", "--timeout", NULL};
  char *const bind[] = {RUN, "-n", "2", "--bind", "core", "true", NULL};
  (void)state;
  expect_usage_error(none, "-n N is required");
  expect_usage_error(zero, "'0' is not a rank count");
  expect_usage_error(word, "'four' is not a rank count");
  expect_usage_error(noprog, "no program to run");
  expect_usage_error(port, "'70000' is not a port");
  expect_usage_error(tmo, "--timeout: '-1'");
  expect_usage_error(unknown, "unknown option '--bogus'");
  expect_usage_error(missing, "needs a value");
  expect_usage_error(bind, "--bind: 'core' is not block or none");
}

/* Options after PROGRAM belong to it, not to coll-run. */
static void test_program_options_left_alone(void **state) {
  char *const argv[] = {RUN, "-n", "1", HELPER, "exit-if", "0", "-n", NULL};
  char *const help[] = {RUN, "--help", NULL};
  char *out = NULL;
  (void)state;
  /* The helper sees "-n" as its exit code (atoi gives 0). */
  assert_int_equal(run(NULL, NULL, argv), 0);
  assert_int_equal(run(&out, NULL, help), 0);
  assert_non_null(strstr(out, "usage: coll-run"));
  free(out);
}

/* Starts a job of sleeping ranks and waits until they all wrote their pid. */
static void start_sleepers(proc_t *p, const char *dir, int world) {
  char n[8];
  char *const argv[] = {RUN, "-n", n, HELPER, "sleep-pid", (char *)dir, NULL};
  snprintf(n, sizeof n, "%d", world);
  assert_int_equal(proc_start(p, argv, NULL), 0);
  if (!proc_wait_pid_files(dir, "pid", world, RUN_MS)) {
    kill(p->pid, SIGKILL);
    proc_wait(p, RUN_MS, NULL, NULL);
    fail_msg("the ranks did not start");
  }
}

static void test_sigint_is_forwarded(void **state) {
  char dir[64];
  proc_t p;
  (void)state;
  assert_int_equal(proc_temp_dir(dir), 0);
  start_sleepers(&p, dir, 3);
  kill(p.pid, SIGINT);
  assert_int_equal(proc_wait(&p, RUN_MS, NULL, NULL), 128 + SIGINT);
  assert_all_dead(dir, 3, 0);
  proc_remove_dir(dir);
}

/* coll-run killed with SIGKILL cannot stop anything: the ranks must die on
 * their own (parent-death signal). */
static void test_launcher_killed(void **state) {
  char dir[64];
  proc_t p;
  (void)state;
  assert_int_equal(proc_temp_dir(dir), 0);
  start_sleepers(&p, dir, 2);
  kill(p.pid, SIGKILL);
  assert_int_equal(proc_wait(&p, RUN_MS, NULL, NULL), 128 + SIGKILL);
  assert_all_dead(dir, 2, 0);
  proc_remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exit_code_of_failing_rank),
      cmocka_unit_test(test_success_is_zero),
      cmocka_unit_test(test_killed_rank_is_128_plus_signal),
      cmocka_unit_test(test_failure_stops_the_rest),
      cmocka_unit_test(test_failure_lets_the_others_drain),
      cmocka_unit_test(test_keep_going),
      cmocka_unit_test(test_sigterm_ignored_escalates),
      cmocka_unit_test(test_output_is_prefixed),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_token),
      cmocka_unit_test(test_bind),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_program_not_executable),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_program_options_left_alone),
      cmocka_unit_test(test_sigint_is_forwarded),
      cmocka_unit_test(test_launcher_killed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
