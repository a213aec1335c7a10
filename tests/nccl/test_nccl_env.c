/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_env.c: COLL_BACKEND against the host's local ranks and devices
 * (LOCAL_WORLD_SIZE): auto picks the CPU ring and says why at INFO, nccl
 * refuses with both numbers, on the stand-in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"
#include "nccl/nccl_env.h"
#include "nccl_test_util.h"

static int teardown(void **state) {
  static const char *const vars[] = {"COLL_BACKEND", "LOCAL_WORLD_SIZE",
                                     "RANK",         "WORLD_SIZE",
                                     "MASTER_ADDR",  "MASTER_PORT"};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  standin_uninstall();
  return 0;
}

/* coll__nccl_env_selected() with this thread's stderr caught in `log` (at
 * COLL_DEBUG=INFO), so a test can read what the selection said. */
static int selected_logging(char *log, size_t cap) {
  char path[] = "/tmp/coll_test_nccl_env_XXXXXX";
  int fd = mkstemp(path), saved, r;
  ssize_t n;
  assert_true(fd >= 0);
  unlink(path);
  setenv("COLL_DEBUG", "INFO", 1);
  atomic_store(&coll__log_level_cache, -1);
  fflush(stderr);
  saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  dup2(fd, STDERR_FILENO);
  r = coll__nccl_env_selected();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  unsetenv("COLL_DEBUG");
  atomic_store(&coll__log_level_cache, -1);
  n = pread(fd, log, cap - 1, 0);
  close(fd);
  log[n > 0 ? n : 0] = '\0';
  return r;
}

/* Four local ranks, one device: auto runs the CPU ring and says why, with
 * no error left behind; one local rank (or none said) keeps NCCL. */
static void test_auto_crowded_picks_cpu(void **state) {
  char log[4096];
  (void)state;
  setenv("COLL_BACKEND", "auto", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  coll_set_last_error(COLL_OK, NULL);
  assert_int_equal(selected_logging(log, sizeof log), 0);
  assert_non_null(strstr(log,
                         "COLL INFO INIT COLL_BACKEND=auto: 4 local "
                         "ranks share 1 CUDA device(s); NCCL needs one "
                         "device per rank: CPU ring with staging"));
  assert_string_equal(coll_last_error(), "");
  unsetenv("COLL_BACKEND"); /* unset is auto */
  assert_int_equal(coll__nccl_env_selected(), 0);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  assert_int_equal(selected_logging(log, sizeof log), 1);
  assert_null(strstr(log, "CPU ring"));
  unsetenv("LOCAL_WORLD_SIZE");
  assert_int_equal(coll__nccl_env_selected(), 1);
  setenv("LOCAL_WORLD_SIZE", "four", 1); /* warned about, then ignored */
  assert_int_equal(coll__nccl_env_selected(), 1);
}

/* COLL_BACKEND=nccl with four local ranks on one device fails at selection
 * with both numbers, not later with NCCL's "invalid usage". */
static void test_nccl_crowded_fails(void **state) {
  coll_comm_t *c = (coll_comm_t *)(uintptr_t)1;
  (void)state;
  setenv("COLL_BACKEND", "nccl", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  assert_non_null(strstr(coll_last_error(),
                         "COLL_BACKEND=nccl: 4 local ranks (LOCAL_WORLD_SIZE) "
                         "share 1 CUDA device(s); NCCL needs one device per "
                         "rank"));
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  assert_int_equal(coll__nccl_env_selected(), 1);
  /* Through coll_comm_init_env: refused before any rendezvous. */
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "1", 1);
  assert_int_equal(coll_comm_init_env(NULL, &c), COLL_ERR_NOT_AVAILABLE);
  assert_null(c);
  assert_non_null(strstr(coll_last_error(),
                         "comm_init_env: COLL_BACKEND=nccl: "
                         "2 local ranks"));
  assert_non_null(strstr(coll_last_error(), "share 1 CUDA device(s)"));
}

/* As many devices as local ranks: NCCL either way; more ranks: not. */
static void test_enough_devices(void **state) {
  (void)state;
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  assert_int_equal(coll__nccl_env_selected(), 1);
  setenv("COLL_BACKEND", "nccl", 1);
  assert_int_equal(coll__nccl_env_selected(), 1);
  setenv("LOCAL_WORLD_SIZE", "5", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  assert_non_null(strstr(coll_last_error(), "5 local ranks"));
  assert_non_null(strstr(coll_last_error(), "share 4 CUDA device(s)"));
  setenv("COLL_BACKEND", "auto", 1);
  assert_int_equal(coll__nccl_env_selected(), 0);
  setenv("COLL_BACKEND", "cpu", 1);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  assert_int_equal(coll__nccl_env_selected(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_auto_crowded_picks_cpu, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_nccl_crowded_fails, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_enough_devices, nt_setup4, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
