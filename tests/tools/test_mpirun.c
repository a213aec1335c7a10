/* SPDX-License-Identifier: Apache-2.0 */
/* test_mpirun.c: coll-perf launched by Open MPI's mpirun (4 ranks on this
 * host, coll_comm_init_env reading OMPI_COMM_WORLD_RANK/SIZE), its result
 * check on: it must exit 0 with no wrong element in any row. Skipped
 * (exit 77) when mpirun is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "boot_test.h"
#include "proc_util.h"

#define PERF COLL_PERF_PATH
/* Bound on the whole mpirun job. */
#define MPIRUN_MS 120000

static char mpirun[512];

/* mpirun's path from PATH into mpirun[]; 0 when there is none. */
static int find_mpirun(void) {
  const char *path = getenv("PATH"), *p = path, *end;
  size_t n;
  while (p != NULL && *p != '\0') {
    end = strchr(p, ':');
    n = end != NULL ? (size_t)(end - p) : strlen(p);
    if (n > 0 && n + 8 < sizeof mpirun) {
      snprintf(mpirun, sizeof mpirun, "%.*s/mpirun", (int)n, p);
      if (access(mpirun, X_OK) == 0) return 1;
    }
    p = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

/* Table rows: lines that are not comments. */
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

static void test_mpirun_coll_perf(void **state) {
  char port[32], *out = NULL, *err = NULL;
  static char addr_env[] = "MASTER_ADDR=127.0.0.1";
  static char timeout_env[] = "COLL_TIMEOUT_MS=30000";
  static char backend_env[] = "COLL_BACKEND=cpu";
  char *envs[] = {addr_env, port, timeout_env, backend_env, NULL};
  char *argv[40];
  int n = 0, rc;
  (void)state;
  snprintf(port, sizeof port, "MASTER_PORT=%d", bt_free_port("127.0.0.1"));
  argv[n++] = mpirun;
  /* Open MPI refuses to run as root unless told; CI containers are root. */
  if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
  argv[n++] = "--oversubscribe"; /* 4 ranks on fewer cores */
  /* Launch on this host only, without ssh or a resource manager. */
  argv[n++] = "--mca";
  argv[n++] = "plm";
  argv[n++] = "isolated";
  argv[n++] = "-np";
  argv[n++] = "4";
  argv[n++] = "-x";
  argv[n++] = "MASTER_ADDR";
  argv[n++] = "-x";
  argv[n++] = "MASTER_PORT";
  argv[n++] = "-x";
  argv[n++] = "COLL_TIMEOUT_MS";
  argv[n++] = "-x";
  argv[n++] = "COLL_BACKEND";
  argv[n++] = PERF;
  argv[n++] = "-b";
  argv[n++] = "1K";
  argv[n++] = "-e";
  argv[n++] = "64K";
  argv[n++] = "-f";
  argv[n++] = "4";
  argv[n++] = "-n";
  argv[n++] = "2";
  argv[n++] = "-w";
  argv[n++] = "1";
  argv[n++] = "-c";
  argv[n++] = "1";
  argv[n] = NULL;
  rc = proc_run(argv, envs, MPIRUN_MS, &out, &err);
  if (rc != 0 || strstr(out, "# Wrong elements       : 0 OK") == NULL ||
      strstr(out, ", 4 ranks (") == NULL || data_lines(out) != 4)
    fail_msg("mpirun exit %d\nstdout:\n%s\nstderr:\n%s", rc, out ? out : "",
             err ? err : "");
  free(out);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mpirun_coll_perf),
  };
  static const char *const torchrun_vars[] = {"RANK", "WORLD_SIZE",
                                              "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
  size_t i;
  if (!find_mpirun()) {
    printf(
        "SKIP: mpirun is not on PATH (Debian: apt-get install "
        "openmpi-bin)\n");
    return 77;
  }
  /* They would take precedence over mpirun's. */
  for (i = 0; i < sizeof torchrun_vars / sizeof torchrun_vars[0]; i++)
    unsetenv(torchrun_vars[i]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
