/* SPDX-License-Identifier: Apache-2.0 */
/* test_cores.c: the cores a host gives its ranks come from the process's
 * cpuset cgroup, v1 or v2, not from its affinity mask. The cgroup files
 * are faked in a temporary folder laid out as /proc/self/cgroup and
 * /sys/fs/cgroup are; the last test binds this thread to one CPU, as a
 * launcher binds a rank, and the host's count must not follow. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cores.h"

static void test_cpu_lists(void **state) {
  (void)state;
  assert_int_equal(coll__cpu_list_count("0\n"), 1);
  assert_int_equal(coll__cpu_list_count("0-1\n"), 2);
  assert_int_equal(coll__cpu_list_count("0-3,8,10-11\n"), 7);
  assert_int_equal(coll__cpu_list_count("5-5"), 1);
  /* An empty set (a cgroup whose cpuset nobody wrote) and nonsense. */
  assert_int_equal(coll__cpu_list_count("\n"), 0);
  assert_int_equal(coll__cpu_list_count(""), 0);
  assert_int_equal(coll__cpu_list_count("3-1"), 0);
  assert_int_equal(coll__cpu_list_count("0-"), 0);
  assert_int_equal(coll__cpu_list_count("a"), 0);
  assert_int_equal(coll__cpu_list_count("0;1"), 0);
}

typedef struct fake {
  char root[64];
  char proc[96];
} fake_t;

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* mkdir -p of root/rel. */
static void dirs(const fake_t *fk, const char *rel) {
  char p[256];
  size_t i;
  snprintf(p, sizeof p, "%s/%s", fk->root, rel);
  for (i = strlen(fk->root) + 1; p[i] != '\0'; i++)
    if (p[i] == '/') {
      p[i] = '\0';
      (void)mkdir(p, 0700);
      p[i] = '/';
    }
  (void)mkdir(p, 0700);
}

static void put_in(const fake_t *fk, const char *rel, const char *text) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", fk->root, rel);
  put(p, text);
}

static int setup(void **state) {
  fake_t *fk = calloc(1, sizeof *fk);
  if (fk == NULL) return -1;
  snprintf(fk->root, sizeof fk->root, "/tmp/coll-cores-XXXXXX");
  if (mkdtemp(fk->root) == NULL) return -1;
  snprintf(fk->proc, sizeof fk->proc, "%s/self-cgroup", fk->root);
  *state = fk;
  return 0;
}

static int teardown(void **state) {
  fake_t *fk = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fk->root);
  if (system(cmd) != 0) return -1;
  free(fk);
  return 0;
}

/* cgroup v1 (this machine's kind): the cpuset line among the others, the
 * group's effective CPUs under root/cpuset. */
static void test_cgroup_v1(void **state) {
  fake_t *fk = *state;
  put(fk->proc,
      "4:memory:/job\n3:cpuset:/job/step\n1:cpu,cpuacct:/\n"
      "0::/\n");
  dirs(fk, "cpuset/job/step");
  put_in(fk, "cpuset/cpuset.effective_cpus", "0-63\n");
  put_in(fk, "cpuset/job/step/cpuset.effective_cpus", "4-7,12\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 5);
  /* At the hierarchy's root (a container's own namespace). */
  put(fk->proc, "3:cpuset:/\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 64);
}

/* cgroup v2: a group without the cpuset controller takes its nearest
 * parent's; only "0::" lines count, "cpuset" in no v1 line. */
static void test_cgroup_v2(void **state) {
  fake_t *fk = *state;
  put(fk->proc, "0::/a/b/c\n");
  dirs(fk, "a/b/c");
  put_in(fk, "cpuset.cpus.effective", "0-31\n");
  put_in(fk, "a/cpuset.cpus.effective", "0-3\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 4);
  put_in(fk, "a/b/c/cpuset.cpus.effective", "2\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 1);
  /* A v1 cpuset line wins where its hierarchy reads; a cpuset hierarchy
   * that does not read leaves the v2 answer. */
  put(fk->proc, "2:cpuset:/gone\n0::/a/b/c\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 1);
}

/* Nothing to read: 0, and the host's count falls back to the online
 * CPUs. */
static void test_cgroup_missing(void **state) {
  fake_t *fk = *state;
  char nowhere[128];
  snprintf(nowhere, sizeof nowhere, "%s/none", fk->root);
  assert_int_equal(coll__cgroup_cpus(nowhere, fk->root), 0);
  put(fk->proc, "garbage\n1:cpu:/\n");
  assert_int_equal(coll__cgroup_cpus(fk->proc, fk->root), 0);
}

/* A rank bound to one core still sees the host's cores. */
static void test_binding_is_not_the_host(void **state) {
  cpu_set_t all, one;
  unsigned host, bound_host, bound;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int r;
  (void)state;
  host = coll__host_cores();
  assert_true(host >= 1);
  assert_true(online < 1 || host <= (unsigned long)online);
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  CPU_ZERO(&one);
  for (r = 0; r < CPU_SETSIZE && !CPU_ISSET(r, &all); r++) {
  }
  CPU_SET(r, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  bound = coll__cores();
  bound_host = coll__host_cores();
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  assert_int_equal(bound, 1);
  assert_int_equal(bound_host, host);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_lists),
      cmocka_unit_test_setup_teardown(test_cgroup_v1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cgroup_v2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cgroup_missing, setup, teardown),
      cmocka_unit_test(test_binding_is_not_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
