/* SPDX-License-Identifier: Apache-2.0 */
/* store_init.c: coll_comm_init_store, a comm whose ranks meet through a
 * key/value store the caller brings: the CPU ring over TCP (addresses in
 * the store), or NCCL (the unique id in the store) when COLL_BACKEND
 * selects it. The same backends and checks as coll_comm_init_env, and the
 * same setup guarantees through the caller's store (setup_check.h): ranks
 * of incompatible builds fail at once, and every rank returns the same. */
#include "api/env_init.h"
#include "bootstrap/rendezvous/gpu_verdict.h"
#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/kv_tcp.h"
#include "bootstrap/rendezvous/setup_check.h"
#include "core/clock.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "cpu/cpu_comm.h"
#include "nccl/nccl_env.h"

/* As for coll_comm_init_env: per-rank key tables stay reasonable. */
#define STORE_WORLD_MAX (1 << 20)

static coll_status_t check_args(const coll_store_ops_t *store, int rank,
                                int world, const coll_comm_config_t *cfg) {
  COLL_CHECK(coll__kv_check(store));
  if (world < 1 || world > STORE_WORLD_MAX)
    return coll__err(COLL_ERR_INVALID_ARG, "world %d is out of range (1..%d)",
                     world, STORE_WORLD_MAX);
  if (rank < 0 || rank >= world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "rank %d is out of range for world %d (0..%d)", rank,
                     world, world - 1);
  COLL_CHECK(coll__config_check(cfg, "comm_init_store"));
  return coll__knobs_load();
}

/* Checks of this rank alone, before any slot runs: a wrong interface or a
 * missing NCCL fails at once instead of making the others wait (a bad
 * knob was refused before). TCP (also where auto may end there): local is
 * the address to listen on. */
static coll_status_t local_check(int pick, char local[COLL_ADDR_TEXT_MAX]) {
  if (pick == COLL_NCCL_PICK_NCCL) return coll__nccl_available("nccl init");
  return coll__kv_tcp_local(local);
}

/* COLL_BACKEND=auto with NCCL usable here: the GPU this rank would use
 * into gpu, or "" (with an INFO saying why) where it has none, and the
 * CPU ring follows on every rank. */
static void name_gpu(char gpu[COLL_GPU_ID_MAX]) {
  char why[COLL_ERRMSG_MAX];
  if (coll__nccl_env_gpu(gpu, COLL_GPU_ID_MAX) == COLL_OK) return;
  coll__err_save(why);
  coll__err_clear();
  COLL_INFO(COLL_LOG_INIT, "COLL_BACKEND=auto: no GPU for NCCL here (%s)", why);
  gpu[0] = '\0';
}

/* Under auto, after the compatibility check saw every rank: 1 when every
 * rank has a GPU of its own (NCCL), else 0 after saying why. */
static coll_status_t judge_gpus(const coll_setup_t *su, int *nccl) {
  coll_gpus_t g;
  COLL_CHECK(coll__setup_gpus_judge(su, &g));
  *nccl = g.kind == COLL_GPUS_OWN;
  if (!*nccl) coll__env_say_cpu(su->rank, &g);
  return COLL_OK;
}

/* Meets the other ranks (compatibility check), builds this rank's part
 * (the TCP mesh, or the NCCL comm) and agrees on the outcome with all. */
static coll_status_t setup(const coll_store_ops_t *store, int rank, int world,
                           int pick, const char *local,
                           const coll_comm_config_t *cfg, coll_comm_t **out) {
  int64_t timeout = coll__config_timeout_ms(cfg), left;
  coll_setup_t su = {store,
                     COLL_KV_PREFIX,
                     rank,
                     world,
                     coll__deadline(timeout),
                     timeout,
                     "store bootstrap",
                     "setup: the store failed while the ranks agreed on "
                     "the outcome",
                     0 /* every rank hears every rank (setup_check.h) */};
  coll_transport_t *t = NULL;
  coll_status_t s;
  char gpu[COLL_GPU_ID_MAX] = "";
  int nccl = pick == COLL_NCCL_PICK_NCCL;
  if (pick == COLL_NCCL_PICK_ASK) name_gpu(gpu);
  /* Before the compatibility record: once every rank's is there, every
   * GPU record is too. */
  if (gpu[0] != '\0') COLL_CHECK(coll__setup_gpus_publish(&su, gpu));
  COLL_CHECK(coll__setup_compat_publish(&su));
  COLL_CHECK(coll__setup_compat_check(&su, 1));
  if (gpu[0] != '\0') COLL_CHECK(judge_gpus(&su, &nccl));
  if (nccl) {
    left = coll__remaining_ms(su.deadline_ms);
    /* 0 would read as "the default" there; a spent budget is 1 ms. */
    s = coll__env_nccl_comm(store, rank, world, cfg, left == 0 ? 1 : left, out);
  } else {
    s = coll__kv_tcp_create(store, rank, world, local, su.deadline_ms, timeout,
                            &t);
  }
  /* Every rank returns the same: a part that failed anywhere fails
   * everywhere (rdv_outcome.c). */
  s = coll__setup_outcome(&su, s, NULL);
  if (s != COLL_OK) {
    if (t != NULL) coll_transport_destroy(t);
    if (*out != NULL) coll_comm_destroy(*out);
    *out = NULL;
    return s;
  }
  return nccl ? COLL_OK : coll__cpu_comm_create(t, cfg, out);
}

coll_status_t coll_comm_init_store(const coll_store_ops_t *store, int rank,
                                   int world, const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  char local[COLL_ADDR_TEXT_MAX] = "";
  coll_status_t s;
  int pick;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_init_store: out is NULL");
  *out = NULL;
  s = check_args(store, rank, world, cfg);
  if (s != COLL_OK) goto out;
  pick = coll__nccl_env_selected();
  if (pick < 0) {
    s = COLL_ERR_NOT_AVAILABLE; /* the reason is recorded */
    goto out;
  }
  s = local_check(pick, local);
  if (s == COLL_OK) s = setup(store, rank, world, pick, local, cfg, out);
out:
  if (s != COLL_OK) coll__err_prefix("comm_init_store");
  return s;
}
