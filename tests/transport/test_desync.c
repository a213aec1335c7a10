/* SPDX-License-Identifier: Apache-2.0 */
/* test_desync.c: "who is missing" when a collective times out, on the
 * in-process transport (ranks as threads) and on shared memory (ranks as
 * processes): a rank that skips a collective is named "never entered" on
 * every rank, one that waits in a recv is named with it, and the report
 * goes into the flight recorder's dump. The TCP transport's own cases are
 * in tests/tcp/test_tcp_desync.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "desync_rank.h"
#include "shm_test.h"
#include "test_util.h"

#define RUN_MS 120000

/* ---- in-process: ranks as threads --------------------------------------- */

typedef struct inproc_run {
  coll_comm_t *comms[DS_WORLD];
  ds_scenario_t sc;
  ds_shared_t sh;
} inproc_run_t;

static void inproc_rank(int rank, int world, void *arg) {
  inproc_run_t *run = arg;
  (void)world;
  (void)ds_rank(run->comms[rank], rank, run->sc, &run->sh);
}

static void run_inproc(ds_scenario_t sc) {
  inproc_run_t *run = calloc(1, sizeof *run);
  char msg[DS_TEXT + 128];
  int rc;
  assert_non_null(run);
  run->sc = sc;
  ds_shared_init(&run->sh);
  assert_int_equal(test_inproc_comms(DS_WORLD, DS_TIMEOUT_MS, run->comms), 0);
  test_run_ranks(DS_WORLD, inproc_rank, run, RUN_MS, "desync over inproc");
  test_destroy_comms(DS_WORLD, run->comms);
  rc = ds_check(&run->sh, sc, msg, sizeof msg);
  free(run);
  if (rc != 0) fail_msg("inproc: %s", msg);
}

static void test_inproc_skip(void **state) {
  (void)state;
  run_inproc(DS_SKIP);
}

static void test_inproc_recv(void **state) {
  (void)state;
  run_inproc(DS_RECV);
}

/* With COLL_TRACE_FILE set, the dump that the timeout writes on every rank
 * holds the report too. */
static void test_inproc_trace(void **state) {
  char dir[] = "/tmp/coll-desync-XXXXXX", pattern[96], path[128];
  static char doc[16384];
  int r;
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(pattern, sizeof pattern, "%s/trace.%%r.json", dir);
  setenv("COLL_TRACE_FILE", pattern, 1);
  run_inproc(DS_SKIP);
  unsetenv("COLL_TRACE_FILE");
  for (r = 0; r < DS_WORLD; r++) {
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "%s/trace.%d.json", dir, r);
    f = fopen(path, "r");
    if (f == NULL) fail_msg("rank %d wrote no %s", r, path);
    n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    unlink(path);
    if (strstr(doc, "\"desync\": \"allreduce #2 timed out after 1.0 s") ==
            NULL ||
        strstr(doc, "rank 3 never entered it") == NULL)
      fail_msg("rank %d's dump lacks the report: %.400s", r, doc);
  }
  rmdir(dir);
}

/* ---- shared memory: ranks as processes ---------------------------------- */

typedef struct shm_args {
  ds_scenario_t sc;
  ds_shared_t *sh; /* MAP_SHARED: the parent reads what the ranks wrote */
} shm_args_t;

static void shm_rank(coll_transport_t *t, int rank, int world, tt_result_t *res,
                     void *arg) {
  shm_args_t *a = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *c = NULL;
  (void)world;
  cfg.timeout_ms = DS_TIMEOUT_MS;
  /* The comm owns the endpoint from here (shm_test_fn_owns_transport). */
  if (coll_comm_create(t, &cfg, &c) != COLL_OK) {
    tt_fail(res, "comm_create: %s", coll_last_error());
    return;
  }
  if (ds_rank(c, rank, a->sc, a->sh) != 0)
    tt_fail(res, "allreduce #1: %s", a->sh->text[rank]);
  coll_comm_destroy(c);
}

static void run_shm(ds_scenario_t sc) {
  tt_result_t res[TT_MAX_RANKS];
  shm_args_t a = {sc, NULL};
  char msg[DS_TEXT + 128];
  int rc;
  a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a.sh != MAP_FAILED);
  ds_shared_init(a.sh);
  shm_test_fn_owns_transport = 1;
  rc = shm_run(DS_WORLD, shm_rank, &a, res, NULL, NULL);
  shm_test_fn_owns_transport = 0;
  TT_ASSERT_RANKS_OK(res, DS_WORLD);
  assert_int_equal(rc, 0);
  rc = ds_check(a.sh, sc, msg, sizeof msg);
  munmap(a.sh, sizeof *a.sh);
  if (rc != 0) fail_msg("shm: %s", msg);
}

static void test_shm_skip(void **state) {
  (void)state;
  run_shm(DS_SKIP);
}

static void test_shm_recv(void **state) {
  (void)state;
  run_shm(DS_RECV);
}

int main(void) {
  /* The shared-memory cases fork rank processes that start threads (the
   * heartbeat), so they run first: the flight recorder leaves its SIGUSR1
   * thread running, and ThreadSanitizer refuses new threads in a child
   * forked from a process with threads. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_skip),     cmocka_unit_test(test_shm_recv),
      cmocka_unit_test(test_inproc_skip),  cmocka_unit_test(test_inproc_recv),
      cmocka_unit_test(test_inproc_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
