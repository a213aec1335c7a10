/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_test_util.c: stand-in setup and per-rank comms for the NCCL tests. */
#include "nccl_test_util.h"

#include <stdio.h>
#include <string.h>

#include "cuda/gpu_table.h"
#include "cuda/staging_pool.h"
#include "test_util.h"

void nt_install(int ndev, int deferred, int version) {
  standin_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = ndev;
  cfg.deferred = deferred;
  cfg.version = version;
  standin_install(&cfg);
}

static int setup_n(void **state, int ndev) {
  (void)state;
  nt_install(ndev, 0, 0);
  return 0;
}

int nt_setup1(void **state) { return setup_n(state, 1); }
int nt_setup2(void **state) { return setup_n(state, 2); }
int nt_setup3(void **state) { return setup_n(state, 3); }
int nt_setup4(void **state) { return setup_n(state, 4); }

int nt_setup_deferred2(void **state) {
  (void)state;
  nt_install(2, 1, 0);
  return 0;
}

int nt_setup_staged(void **state) {
  (void)state;
  coll__staging_segment_set(NT_STAGE_SEG);
  nt_install(2, 0, 0);
  return 0;
}

int nt_setup_staged_deferred(void **state) {
  (void)state;
  coll__staging_segment_set(NT_STAGE_SEG);
  nt_install(2, 1, 0);
  return 0;
}

int nt_teardown(void **state) {
  (void)state;
  standin_stall(0);
  standin_uninstall();
  coll__staging_segment_set(0);
  return 0;
}

int nt_current_device(void) {
  int d = -1;
  coll__nccl_table()->cuda_get_device(&d);
  return d;
}

void nt_set_device(int dev) { coll__nccl_table()->cuda_set_device(dev); }

struct init_arg {
  coll_unique_id_t id;
  int64_t timeout_ms;
  coll_comm_t **comms;
  coll_status_t status[16];
};

static void init_rank(int rank, int world, void *p) {
  struct init_arg *a = p;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  int ndev = 0;
  cfg.timeout_ms = a->timeout_ms;
  coll__nccl_table()->cuda_get_device_count(&ndev);
  nt_set_device(rank % ndev);
  a->status[rank] =
      coll_comm_init_rank(rank, world, &a->id, &cfg, &a->comms[rank]);
  if (a->status[rank] != COLL_OK)
    fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
}

int nt_rank_comms(int world, int64_t timeout_ms, coll_comm_t **comms) {
  struct init_arg a;
  int r, bad = 0;
  memset(&a, 0, sizeof a);
  a.timeout_ms = timeout_ms;
  a.comms = comms;
  if (world > 16 || coll_unique_id_create(&a.id) != COLL_OK) return -1;
  test_run_ranks(world, init_rank, &a, 10000, "nccl init");
  for (r = 0; r < world; r++) bad |= a.status[r] != COLL_OK;
  return bad ? -1 : 0;
}

int nt_no_misuse(void) {
  standin_stats_t st;
  standin_stats(&st);
  if (st.misuse != 0)
    fprintf(stderr, "stand-in misuse (%d): %s\n", st.misuse,
            standin_misuse_text());
  return st.misuse == 0;
}
