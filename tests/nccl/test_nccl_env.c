/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_env.c: COLL_BACKEND against the host's local ranks and devices
 * (LOCAL_WORLD_SIZE, or mpirun's and srun's counts): auto leaves the choice
 * to a comparison of the ranks' GPUs (test_nccl_auto), whatever the counts,
 * and each rank names its GPU by PCI bus id; nccl leaves the decision to
 * NCCL, which works when each rank sees only its own GPU; mpirun's local
 * rank picks the device; NCCL_COMM_BLOCKING=1, which would make every NCCL
 * comm blocking, is refused (N7). */
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
#include "test_util.h"

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
                                     "SLURM_STEP_TASKS_PER_NODE",
                                     "NCCL_COMM_BLOCKING",
                                     "LOCAL_RANK"};
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

/* auto with NCCL usable asks the ranks (COLL_NCCL_PICK_ASK) whatever the
 * local counts say: four local ranks (LOCAL_WORLD_SIZE, mpirun's or
 * srun's count) on a process that sees one device may each have a GPU of
 * their own (per-rank binding), which only a comparison of their GPUs can
 * tell (test_nccl_auto). It says nothing of the CPU ring and leaves no
 * error behind. Before, it counted devices and picked the CPU ring. */
static void test_auto_asks_the_ranks(void **state) {
  char log[4096];
  (void)state;
  setenv("COLL_BACKEND", "auto", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  coll_set_last_error(COLL_OK, NULL);
  assert_int_equal(selected_logging(log, sizeof log), COLL_NCCL_PICK_ASK);
  assert_null(strstr(log, "CPU ring"));
  assert_string_equal(coll_last_error(), "");
  unsetenv("COLL_BACKEND"); /* unset is auto */
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_ASK);
  unsetenv("LOCAL_WORLD_SIZE");
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  assert_int_equal(selected_logging(log, sizeof log), COLL_NCCL_PICK_ASK);
  assert_null(strstr(log, "CPU ring"));
  setenv("COLL_BACKEND", "cpu", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_CPU);
}

/* COLL_BACKEND=nccl with more local ranks than this process sees devices
 * is what per-rank binding looks like (srun --gpus-per-task=1, a
 * CUDA_VISIBLE_DEVICES per rank): each rank sees one GPU, its own. NCCL is
 * selected, and NCCL's own duplicate check decides (test_nccl_promises
 * shows how its refusal reads). */
static void test_nccl_lets_nccl_decide(void **state) {
  (void)state;
  setenv("COLL_BACKEND", "nccl", 1);
  setenv("LOCAL_WORLD_SIZE", "8", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_NCCL);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  assert_int_equal(coll__nccl_env_selected(), COLL_NCCL_PICK_NCCL);
}

/* The GPU a rank names for the comparison: the PCI bus id of the device
 * its local rank picks (LOCAL_RANK 6 of 4 devices: device 2), else of the
 * current device; as a rank with one visible GPU of its own sees it; and
 * a clear error where CUDA has no driver. */
static void test_env_gpu_names_bus_id(void **state) {
  standin_config_t cfg;
  char id[64];
  (void)state;
  setenv("LOCAL_RANK", "6", 1);
  assert_int_equal(coll__nccl_env_gpu(id, sizeof id), COLL_OK);
  assert_string_equal(id, "0000:28:00.0");
  unsetenv("LOCAL_RANK");
  nt_set_device(1);
  assert_int_equal(coll__nccl_env_gpu(id, sizeof id), COLL_OK);
  assert_string_equal(id, "0000:20:00.0");
  standin_bus_id(1, "0000:9A:00.0");
  assert_int_equal(coll__nccl_env_gpu(id, sizeof id), COLL_OK);
  assert_string_equal(id, "0000:9A:00.0");
  nt_set_device(0);
  standin_uninstall();
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 1;
  cfg.no_driver = 1;
  standin_install(&cfg);
  assert_int_not_equal(coll__nccl_env_gpu(id, sizeof id), COLL_OK);
  assert_true(coll_last_error()[0] != '\0');
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

struct blocking_init {
  coll_unique_id_t id;
  coll_status_t s;
  int64_t took_ms;
  char err[512];
};

static void blocking_rank0(int rank, int world, void *p) {
  struct blocking_init *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *c = NULL;
  int64_t t0 = test_now_ms();
  (void)rank, (void)world;
  cfg.timeout_ms = 200;
  a->s = coll_comm_init_rank(0, 2, &a->id, &cfg, &c);
  a->took_ms = test_now_ms() - t0;
  snprintf(a->err, sizeof a->err, "%s", coll_last_error());
  coll_comm_destroy(c);
}

/* N7: NCCL_COMM_BLOCKING=1 overrides the config NCCL is given: the init
 * of a rank whose peer never comes would block in NCCL past every timeout.
 * Refused at once, naming the variable; =0 changes nothing. */
static void test_comm_blocking_refused(void **state) {
  struct blocking_init a;
  coll_comm_t *c = NULL;
  standin_stats_t st;
  (void)state;
  memset(&a, 0, sizeof a);
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  assert_int_equal(coll_unique_id_create(&a.id), COLL_OK);
  test_run_ranks(1, blocking_rank0, &a, 60000, "init with NCCL_COMM_BLOCKING");
  print_message("NCCL_COMM_BLOCKING=1: %s after %lld ms: %s\n",
                coll_status_name(a.s), (long long)a.took_ms, a.err);
  assert_int_equal(a.s, COLL_ERR_INVALID_ARG);
  assert_true(a.took_ms < 300);
  assert_non_null(strstr(a.err, "NCCL_COMM_BLOCKING=1"));
  standin_stats(&st);
  assert_int_equal(st.comms_live, 0);
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  assert_int_equal(nt_rank_comms(1, 10000, &c), 0);
  assert_int_equal(coll_comm_destroy(c), COLL_OK);
  unsetenv("NCCL_COMM_BLOCKING");
  assert_true(nt_no_misuse());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_auto_asks_the_ranks, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_nccl_lets_nccl_decide, nt_setup1,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_env_gpu_names_bus_id, nt_setup4,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_ompi_local_rank_device, nt_setup4,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_comm_blocking_refused, nt_setup2,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
