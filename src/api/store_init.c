/* SPDX-License-Identifier: Apache-2.0 */
/* store_init.c: coll_comm_init_store, a comm whose ranks meet through a
 * key/value store the caller brings: the CPU ring over TCP (addresses in
 * the store), or NCCL (the unique id in the store) when COLL_BACKEND
 * selects it. The same backends and checks as coll_comm_init_env. */
#include "api/env_init.h"
#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/kv_tcp.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/error.h"
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
  return coll__env_timeout_check();
}

static coll_status_t cpu_init(const coll_store_ops_t *store, int rank,
                              int world, const coll_comm_config_t *cfg,
                              coll_comm_t **out) {
  coll_transport_t *t = NULL;
  /* Before meeting the other ranks: a bad knob fails at once. */
  COLL_CHECK(coll__cpu_env_check());
  COLL_CHECK(coll__kv_tcp_create(store, rank, world,
                                 coll__config_timeout_ms(cfg), &t));
  return coll__cpu_comm_create(t, cfg, out);
}

coll_status_t coll_comm_init_store(const coll_store_ops_t *store, int rank,
                                   int world, const coll_comm_config_t *cfg,
                                   coll_comm_t **out) {
  coll_status_t s;
  int nccl;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_init_store: out is NULL");
  *out = NULL;
  s = check_args(store, rank, world, cfg);
  if (s != COLL_OK) goto out;
  nccl = coll__nccl_env_selected();
  if (nccl < 0) {
    s = COLL_ERR_NOT_AVAILABLE; /* the reason is recorded */
    goto out;
  }
  if (nccl > 0)
    s = coll__env_nccl_comm(store, rank, world, cfg,
                            coll__config_timeout_ms(cfg), out);
  else
    s = cpu_init(store, rank, world, cfg, out);
out:
  if (s != COLL_OK) coll__err_prefix("comm_init_store");
  return s;
}
