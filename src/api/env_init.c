/* SPDX-License-Identifier: Apache-2.0 */
/* env_init.c: coll_comm_init_env, a comm from the launcher's environment
 * (torchrun's RANK and WORLD_SIZE, or mpirun's, PMI's or srun's: see
 * core/launch.h; MASTER_ADDR, MASTER_PORT): NCCL when the NCCL backend is
 * selected (under auto: when every rank has a GPU of its own, which the
 * ranks compare at the rendezvous), else the CPU ring over the TCP
 * transport. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/env_init.h"
#include "bootstrap/rendezvous/gpu_verdict.h"
#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/clock.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/log.h"
#include "cpu/cpu_comm.h"
#include "nccl/nccl_env.h"

/* Bounds the world so per-rank key tables stay reasonable. */
#define ENV_WORLD_MAX (1 << 20)

/* MASTER_PORT: required, 1..65535. */
static coll_status_t read_port(int *out) {
  const char *v = coll__env(COLL_ENV_MASTER_PORT);
  char *end = NULL;
  long long x;
  if (v == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "MASTER_PORT is not set (the port of rank 0's store, "
                     "as torchrun sets it; under mpirun or srun export it, "
                     "e.g. MASTER_PORT=29500)");
  errno = 0;
  x = strtoll(v, &end, 10);
  if (errno != ERANGE && (errno != 0 || end == v || *end != '\0'))
    return coll__err(COLL_ERR_INVALID_ARG, "MASTER_PORT='%s' is not a number",
                     v);
  if (errno == ERANGE || x < 1 || x > 65535)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "MASTER_PORT=%s is out of range (1..65535)", v);
  *out = (int)x;
  return COLL_OK;
}

static coll_status_t read_env(coll_env_job_t *j) {
  coll_launch_t l;
  COLL_CHECK(coll__launch_read(ENV_WORLD_MAX, &l));
  j->rank = l.rank;
  j->world = l.world;
  j->master_addr = coll__env(COLL_ENV_MASTER_ADDR);
  if (j->master_addr == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "MASTER_ADDR is not set (the host of rank 0, as "
                     "torchrun sets it; under mpirun or srun export it, e.g. "
                     "the first host of the job)");
  return read_port(&j->master_port);
}

coll_status_t coll__env_nccl_comm(const coll_store_ops_t *store, int rank,
                                  int world, const coll_comm_config_t *cfg,
                                  int64_t timeout_ms, coll_comm_t **out) {
  coll_unique_id_t id;
  size_t len = 0;
  coll_status_t s;
  /* Before anyone waits on the store for an id that will not come. */
  COLL_CHECK(coll__nccl_available("nccl init"));
  if (store == NULL || out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "nccl init: %s is NULL",
                     store == NULL ? "store" : "out");
  if (rank == 0) {
    s = coll_unique_id_create(&id);
    if (s == COLL_OK) s = coll__kv_set(store, COLL_KV_UID_KEY, &id, sizeof id);
  } else {
    s = coll__kv_get(store, COLL_KV_UID_KEY, &id, sizeof id, &len, timeout_ms);
    if (s == COLL_ERR_TIMEOUT)
      s = coll__err(s,
                    "rank 0 did not set the NCCL unique id ('%s') in the "
                    "store within %lld ms",
                    COLL_KV_UID_KEY, (long long)timeout_ms);
    else if (s == COLL_OK && len != sizeof id)
      s = coll__err(COLL_ERR_PROTOCOL,
                    "the unique id in the store ('%s') is %zu bytes, "
                    "expected %zu",
                    COLL_KV_UID_KEY, len, sizeof id);
  }
  if (s != COLL_OK) {
    coll__err_prefix("nccl init");
    return s;
  }
  return coll__nccl_comm_init_local(rank, world, &id, cfg, out);
}

/* NCCL over the open rendezvous r: it carries rank 0's unique id to
 * everyone, then every rank returns the same (an NCCL init that failed
 * anywhere fails everywhere: rdv_outcome.c). Frees r. */
static coll_status_t nccl_over(coll_rdv_t *r, const coll_env_job_t *j,
                               int64_t deadline_ms,
                               const coll_comm_config_t *cfg,
                               coll_comm_t **out) {
  coll_store_ops_t ops;
  coll_status_t s;
  int64_t left = coll__remaining_ms(deadline_ms);
  coll__store_client_ops(coll__rdv_store(r), &ops);
  /* 0 would read as "the default" there; a spent budget is 1 ms. */
  s = coll__env_nccl_comm(&ops, j->rank, j->world, cfg, left == 0 ? 1 : left,
                          out);
  s = coll__rdv_conclude(r, s);
  if (s != COLL_OK && *out != NULL) {
    coll_comm_destroy(*out);
    *out = NULL;
  }
  return s;
}

static coll_status_t nccl_init(const coll_env_job_t *j,
                               const coll_comm_config_t *cfg,
                               coll_comm_t **out) {
  char master_ip[COLL_ADDR_TEXT_MAX];
  struct sockaddr_storage master;
  coll_rdv_cfg_t rc;
  coll_rdv_t *r = NULL;
  int64_t timeout = coll__config_timeout_ms(cfg);
  COLL_CHECK(
      coll__resolve_host("MASTER_ADDR", j->master_addr, &master, master_ip));
  /* NCCL: no host info (no transport to choose) and no GPU to compare
   * (NCCL's own check decides). */
  rc = (coll_rdv_cfg_t){.rank = j->rank,
                        .world = j->world,
                        .master_host = j->master_addr,
                        .master_ip = master_ip,
                        .master_port = j->master_port,
                        .token = coll__knob_text(COLL_ENV_AUTH_TOKEN),
                        .deadline_ms = coll__deadline(timeout),
                        .timeout_ms = timeout};
  COLL_CHECK(coll__rdv_open(&rc, &r));
  return nccl_over(r, j, rc.deadline_ms, cfg, out);
}

static void tcp_config(const coll_env_job_t *j, const coll_comm_config_t *cfg,
                       coll_tcp_config_t *tc) {
  *tc = (coll_tcp_config_t)COLL_TCP_CONFIG_INIT;
  tc->rank = j->rank;
  tc->world = j->world;
  tc->master_addr = j->master_addr;
  tc->master_port = j->master_port;
  tc->timeout_ms = coll__config_timeout_ms(cfg);
}

static coll_status_t cpu_init(const coll_env_job_t *j,
                              const coll_comm_config_t *cfg,
                              coll_comm_t **out) {
  coll_tcp_config_t tc;
  coll_transport_t *t = NULL;
  tcp_config(j, cfg, &tc);
  COLL_CHECK(coll_tcp_create(&tc, &t));
  return coll__cpu_comm_create(t, cfg, out);
}

void coll__env_say_cpu(int rank, const coll_gpus_t *g) {
  if (g->kind == COLL_GPUS_SHARED && rank == 0)
    COLL_WARN(COLL_LOG_INIT,
              "COLL_BACKEND=auto: ranks %d and %d are on one GPU (PCI bus "
              "%s) of one host, and NCCL needs a GPU per rank: every rank "
              "runs the CPU ring with staging (give each rank a GPU of its "
              "own, through LOCAL_RANK or CUDA_VISIBLE_DEVICES, for NCCL; "
              "or set COLL_BACKEND=cpu where sharing is meant)",
              g->rank_a, g->rank_b, g->gpu);
  else if (g->kind == COLL_GPUS_SHARED)
    COLL_INFO(COLL_LOG_INIT,
              "COLL_BACKEND=auto: ranks %d and %d are on one GPU (PCI bus "
              "%s) of one host; CPU ring with staging on every rank",
              g->rank_a, g->rank_b, g->gpu);
  else
    COLL_INFO(COLL_LOG_INIT,
              "COLL_BACKEND=auto: rank %d runs no NCCL (COLL_BACKEND=cpu "
              "there, or no usable NCCL or GPU: its log says which); CPU "
              "ring with staging on every rank",
              g->rank_a);
}

/* COLL_BACKEND=auto with NCCL usable here: the rendezvous carries the GPU
 * each rank would use, rank 0 judges them and every rank reads its verdict
 * (no round trip of its own), then builds NCCL over that rendezvous, or
 * the CPU ring's transport where a rank has no GPU or two ranks of a host
 * share one. */
static coll_status_t ask_init(const coll_env_job_t *j,
                              const coll_comm_config_t *cfg,
                              coll_comm_t **out) {
  char gpu[COLL_GPU_ID_MAX], why[COLL_ERRMSG_MAX];
  coll_tcp_config_t tc;
  coll_tcp_plan_t *p;
  coll_transport_t *t = NULL;
  coll_rdv_t *r = NULL;
  coll_gpus_t g;
  coll_status_t s;
  if (coll__nccl_env_gpu(gpu, sizeof gpu) != COLL_OK) {
    /* The others learn from the verdict that this rank named none. */
    coll__err_save(why);
    coll__err_clear();
    COLL_INFO(COLL_LOG_INIT, "COLL_BACKEND=auto: no GPU for NCCL here (%s)",
              why);
    return cpu_init(j, cfg, out);
  }
  p = malloc(sizeof *p);
  if (p == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  tcp_config(j, cfg, &tc);
  s = coll__tcp_plan(&tc, p);
  if (s == COLL_OK) {
    p->rdv.gpu = gpu;
    s = coll__rdv_open(&p->rdv, &r);
  }
  if (s != COLL_OK) goto done;
  coll__rdv_gpus(r, &g);
  if (g.kind == COLL_GPUS_OWN) {
    s = nccl_over(r, j, p->rdv.deadline_ms, cfg, out);
    goto done;
  }
  coll__env_say_cpu(j->rank, &g);
  s = coll__tcp_over(r, p, &t);
  if (s == COLL_OK) s = coll__cpu_comm_create(t, cfg, out);
done:
  free(p);
  return s;
}

coll_status_t coll__env_comm_create(const coll_env_job_t *j,
                                    const coll_comm_config_t *cfg,
                                    coll_comm_t **out) {
  int pick = coll__nccl_env_selected();
  if (pick < 0) return COLL_ERR_NOT_AVAILABLE; /* the reason is recorded */
  if (pick == COLL_NCCL_PICK_NCCL) return nccl_init(j, cfg, out);
  if (pick == COLL_NCCL_PICK_ASK) return ask_init(j, cfg, out);
  return cpu_init(j, cfg, out);
}

coll_status_t coll_comm_init_env(const coll_comm_config_t *cfg,
                                 coll_comm_t **out) {
  coll_env_job_t j;
  coll_status_t s;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_init_env: out is NULL");
  *out = NULL;
  COLL_CHECK(coll__config_check(cfg, "comm_init_env"));
  s = read_env(&j);
  if (s == COLL_OK) s = coll__knobs_load();
  if (s == COLL_OK) s = coll__env_comm_create(&j, cfg, out);
  if (s != COLL_OK) coll__err_prefix("comm_init_env");
  return s;
}
