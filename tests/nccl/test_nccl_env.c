/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_env.c: COLL_BACKEND against the host's local ranks and devices
 * (LOCAL_WORLD_SIZE, or mpirun's and srun's counts): auto picks the CPU ring
 * and says why at INFO, nccl refuses with both numbers, on the stand-in;
 * mpirun's local rank picks the device. */
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
  static const char *const vars[] = {"COLL_BACKEND",
                                     "LOCAL_WORLD_SIZE",
                                     "RANK",
                                     "WORLD_SIZE",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE",
                                     "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "OMPI_COMM_WORLD_LOCAL_SIZE",
                                     "SLURM_PROCID",
                                     "SLURM_NTASKS",
                                     "SLURM_NODEID",
                                     "SLURM_STEP_TASKS_PER_NODE"};
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

/* Under mpirun and srun their own local counts stand in for
 * LOCAL_WORLD_SIZE, and the refusal names the variable it read. */
static void test_launcher_local_counts(void **state) {
  (void)state;
  setenv("COLL_BACKEND", "nccl", 1);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  assert_non_null(strstr(coll_last_error(),
                         "COLL_BACKEND=nccl: 3 local ranks "
                         "(OMPI_COMM_WORLD_LOCAL_SIZE) share 1 CUDA device"));
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("SLURM_PROCID", "4", 1);
  setenv("SLURM_NTASKS", "6", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "4,2", 1);
  assert_int_equal(coll__nccl_env_selected(), -1);
  assert_non_null(
      strstr(coll_last_error(), "2 local ranks (SLURM_STEP_TASKS_PER_NODE)"));
  setenv("SLURM_STEP_TASKS_PER_NODE", "2,1", 1);
  assert_int_equal(coll__nccl_env_selected(), 1);
}

/* OMPI_COMM_WORLD_LOCAL_RANK picks the device under mpirun (6 % 4 = 2),
 * and the caller's current device stays. */
static void test_ompi_local_rank_device(void **state) {
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  float *on2;
  (void)state;
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "6", 1);
  nt_set_device(0);
  assert_int_equal(coll_unique_id_create(&id), COLL_OK);
  assert_int_equal(coll__nccl_comm_init_local(0, 1, &id, NULL, &c), COLL_OK);
  assert_int_equal(nt_current_device(), 0);
  on2 = standin_dev_alloc(2, sizeof(float));
  *on2 = 1.5f;
  assert_int_equal(coll_allreduce(c, on2, on2, 1, COLL_F32, COLL_SUM, NULL),
                   COLL_OK);
  assert_float_equal(*on2, 1.5f, 0);
  coll_comm_destroy(c);
  standin_dev_free(on2);
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_auto_crowded_picks_cpu, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_nccl_crowded_fails, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_enough_devices, nt_setup4, teardown),
      cmocka_unit_test_setup_teardown(test_launcher_local_counts, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_ompi_local_rank_device, nt_setup4,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
