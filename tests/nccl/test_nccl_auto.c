/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_auto.c: COLL_BACKEND=auto across the ranks of a host, as
 * coll_comm_init_env and coll_comm_init_store decide it (N10 of the second
 * review). Eight local ranks that each see one GPU (LOCAL_WORLD_SIZE=8, one
 * visible device per rank, as under srun --gpus-per-task=1 or a
 * CUDA_VISIBLE_DEVICES per rank) on distinct PCI bus ids get NCCL; two
 * ranks on one bus id send every rank to the CPU ring, and rank 0 warns
 * naming them. Either way the comm sums device buffers right. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/env_init.h"
#include "boot_test.h"
#include "bootstrap/rendezvous/gpu_verdict.h"
#include "core/log.h"
#include "cuda/gpu_table.h"
#include "nccl_test_util.h"
#include "test_kv.h"
#include "test_util.h"

#define WORLD 8
#define COUNT 6

typedef struct job {
  int port;
  test_kv_t *kv; /* NULL: coll_comm_init_env's path, else the store's */
  test_kv_view_t views[WORLD];
  char bus[WORLD][32];
  float *buf[WORLD];
  coll_status_t s[WORLD];
  char backend[WORLD][8];
  char why[WORLD][COLL_ERRMSG_MAX];
} job_t;

static int setup(void **state) {
  setenv("LOCAL_WORLD_SIZE", "8", 1);
  unsetenv("COLL_BACKEND"); /* auto */
  return nt_setup1(state);  /* each rank sees one device */
}

static int teardown(void **state) {
  unsetenv("LOCAL_WORLD_SIZE");
  return nt_teardown(state);
}

/* A rank that sees one GPU of its own: device 0 here, at its bus id. Its
 * work goes on a stream of its own: the stand-in's device 0 is one device
 * with one default stream for every thread, where on the real machine each
 * rank's device 0 is another GPU with its own. */
static void rank_main(int rank, int world, void *arg) {
  job_t *j = arg;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_env_job_t ej = {rank, world, "127.0.0.1", j->port};
  coll_store_ops_t ops;
  coll_comm_t *c = NULL;
  cudaStream_t st = NULL;
  standin_bus_id(0, j->bus[rank]);
  if (coll__nccl_table()->cuda_stream_create(&st) != cudaSuccess) {
    j->s[rank] = COLL_ERR_BACKEND;
    snprintf(j->why[rank], sizeof j->why[rank], "cudaStreamCreate failed");
    return;
  }
  cfg.timeout_ms = 30000;
  if (j->kv != NULL) {
    j->views[rank].kv = j->kv;
    test_kv_ops(&j->views[rank], &ops);
    j->s[rank] = coll_comm_init_store(&ops, rank, world, &cfg, &c);
  } else {
    j->s[rank] = coll__env_comm_create(&ej, &cfg, &c);
  }
  if (j->s[rank] == COLL_OK) {
    snprintf(j->backend[rank], sizeof j->backend[rank], "%s",
             coll_comm_backend(c));
    j->s[rank] = coll_allreduce(c, j->buf[rank], j->buf[rank], COUNT, COLL_F32,
                                COLL_SUM, st);
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  coll_comm_destroy(c);
}

/* Runs the eight ranks with every bus id distinct but those `same` names
 * (two ranks on rank same[0]'s GPU; -1: none), stderr caught in log at
 * COLL_DEBUG=INFO; checks every rank got `want` and a right sum. */
static void run(job_t *j, const int same[2], const char *want, char *log,
                size_t cap) {
  char path[] = "/tmp/coll_test_nccl_auto_XXXXXX";
  int fd = mkstemp(path), saved, r, i;
  ssize_t n;
  assert_true(fd >= 0);
  unlink(path);
  for (r = 0; r < WORLD; r++) {
    snprintf(j->bus[r], sizeof j->bus[r], "0000:%02X:00.0", 0x1b + 16 * r);
    j->buf[r] = standin_dev_alloc(0, COUNT * sizeof(float));
    for (i = 0; i < COUNT; i++) j->buf[r][i] = (float)(r + 1) * (float)(i + 1);
  }
  if (same[0] >= 0) memcpy(j->bus[same[1]], j->bus[same[0]], 32);
  j->port = bt_free_port("127.0.0.1");
  setenv("COLL_DEBUG", "INFO", 1);
  atomic_store(&coll__log_level_cache, -1);
  fflush(stderr);
  saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  test_run_ranks(WORLD, rank_main, j, 90000, "auto across eight ranks");
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  unsetenv("COLL_DEBUG");
  atomic_store(&coll__log_level_cache, -1);
  n = pread(fd, log, cap - 1, 0);
  close(fd);
  log[n > 0 ? n : 0] = '\0';
  for (r = 0; r < WORLD; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    if (strcmp(j->backend[r], want) != 0)
      fail_msg("rank %d runs %s, expected %s", r, j->backend[r], want);
    /* Serial reference: sum over ranks of (r + 1)(i + 1). */
    for (i = 0; i < COUNT; i++)
      assert_float_equal(j->buf[r][i], 36.0f * (float)(i + 1), 0);
    standin_dev_free(j->buf[r]);
  }
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (; (text = strstr(text, what)) != NULL; text++) n++;
  return n;
}

static const int none[2] = {-1, -1}, three_five[2] = {3, 5};

/* Each of eight local ranks on a GPU of its own, every one device 0 to its
 * rank: NCCL on every rank, and no word of the CPU ring. */
static void test_env_own_gpus(void **state) {
  static job_t j;
  static char log[1 << 16];
  (void)state;
  memset(&j, 0, sizeof j);
  run(&j, none, "nccl", log, sizeof log);
  assert_null(strstr(log, "CPU ring"));
  assert_true(nt_no_misuse());
}

/* Ranks 3 and 5 on one GPU: NCCL would refuse them ("Duplicate GPU
 * detected"), so every rank runs the CPU ring; rank 0 warns, naming them
 * and the bus id, the others say so at INFO. */
static void test_env_shared_gpu(void **state) {
  static job_t j;
  static char log[1 << 16];
  const char *warn;
  (void)state;
  memset(&j, 0, sizeof j);
  run(&j, three_five, "cpu", log, sizeof log);
  warn = strstr(log,
                "COLL WARN INIT COLL_BACKEND=auto: ranks 3 and 5 are "
                "on one GPU (PCI bus 0000:4b:00.0) of one host");
  if (warn == NULL) fail_msg("no warning in:\n%s", log);
  assert_non_null(strstr(warn, "every rank runs the CPU ring with staging"));
  assert_int_equal(count(log, "COLL WARN INIT COLL_BACKEND=auto: ranks 3"), 1);
  assert_int_equal(count(log,
                         "COLL INFO INIT COLL_BACKEND=auto: ranks 3 and "
                         "5 are on one GPU (PCI bus 0000:4b:00.0) of one "
                         "host; CPU ring with staging on every rank"),
                   WORLD - 1);
  assert_true(nt_no_misuse());
}

/* coll_comm_init_store decides the same through the caller's store. */
static void test_store_own_and_shared(void **state) {
  static job_t j;
  static char log[1 << 16];
  (void)state;
  memset(&j, 0, sizeof j);
  j.kv = test_kv_new();
  assert_non_null(j.kv);
  run(&j, none, "nccl", log, sizeof log);
  test_kv_free(j.kv);
  memset(&j, 0, sizeof j);
  j.kv = test_kv_new();
  run(&j, three_five, "cpu", log, sizeof log);
  test_kv_free(j.kv);
  assert_non_null(strstr(log,
                         "COLL WARN INIT COLL_BACKEND=auto: ranks 3 and "
                         "5 are on one GPU"));
  assert_true(nt_no_misuse());
}

/* The rules every rank applies to the same records: one bus id twice on
 * one host is shared (the lowest pair, named the same whatever the order
 * of ranks), on two hosts it is two GPUs; a rank that named none outranks
 * both; the verdict survives its trip through the store as text, and a
 * text no build writes is refused. */
static void test_verdict_rules(void **state) {
  coll_gpu_rank_t r[4] = {{0, ""}, {0, ""}, {1, ""}, {1, ""}};
  coll_gpus_t v, back;
  char text[96];
  int order[4];
  (void)state;
  coll__gpu_word(" 0000:3B:00.0\n", r[0].gpu);
  assert_string_equal(r[0].gpu, "0000:3b:00.0");
  coll__gpu_word("0000:5e:00.0", r[1].gpu);
  coll__gpu_word("0000:3b:00.0", r[2].gpu); /* rank 0's bus, other host */
  coll__gpu_word("0000:5e:00.0", r[3].gpu);
  coll__gpus_judge(r, 4, order, &v);
  assert_int_equal(v.kind, COLL_GPUS_OWN);
  coll__gpu_word("0000:3B:00.0", r[3].gpu); /* rank 2's, same host */
  coll__gpus_judge(r, 4, order, &v);
  assert_int_equal(v.kind, COLL_GPUS_SHARED);
  assert_int_equal(v.rank_a, 2);
  assert_int_equal(v.rank_b, 3);
  assert_string_equal(v.gpu, "0000:3b:00.0");
  coll__gpus_text(&v, text, sizeof text);
  assert_string_equal(text, "shared 2 3 0000:3b:00.0");
  assert_int_equal(coll__gpus_parse(text, &back), 0);
  assert_memory_equal(&back, &v, sizeof v);
  r[1].gpu[0] = '\0';
  coll__gpus_judge(r, 4, order, &v);
  assert_int_equal(v.kind, COLL_GPUS_MISSING);
  assert_int_equal(v.rank_a, 1);
  coll__gpus_text(&v, text, sizeof text);
  assert_int_equal(coll__gpus_parse(text, &back), 0);
  assert_int_equal(back.kind, COLL_GPUS_MISSING);
  assert_int_equal(back.rank_a, 1);
  assert_int_equal(coll__gpus_parse("own", &back), 0);
  assert_int_equal(back.kind, COLL_GPUS_OWN);
  assert_int_equal(coll__gpus_parse("shared 1", &back), -1);
  assert_int_equal(coll__gpus_parse("missing -2", &back), -1);
  assert_int_equal(coll__gpus_parse("", &back), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verdict_rules),
      cmocka_unit_test_setup_teardown(test_env_own_gpus, setup, teardown),
      cmocka_unit_test_setup_teardown(test_env_shared_gpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_store_own_and_shared, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
