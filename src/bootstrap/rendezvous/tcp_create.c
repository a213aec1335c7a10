/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_create.c: coll_tcp_create, the TCP transport bootstrapped through the
 * rendezvous store: check the config, resolve MASTER_ADDR, choose the local
 * address, meet the other ranks, connect the mesh. When every rank is on
 * this host (and COLL_TRANSPORT allows it) the ranks build the
 * shared-memory transport instead (transport_choice.c); where they are
 * spread over hosts, the ranks of each host also share memory, which
 * carries every message between them (host_endpoint.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/route/route.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

/* The layout before the magic existed: a caller built against it has
 * exactly this size. From the magic on, every config carries it. */
#define TCP_CONFIG_V1_SIZE offsetof(coll_tcp_config_t, magic)
#define TCP_CONFIG_MAGIC_END \
  (offsetof(coll_tcp_config_t, magic) + sizeof(uint64_t))

static coll_status_t check_config(const coll_tcp_config_t *cfg) {
  if (cfg == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp_create: cfg is NULL");
  if (cfg->size >= TCP_CONFIG_MAGIC_END) {
    if (cfg->magic != COLL_TCP_CONFIG_MAGIC)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "tcp_create: the config was not made with "
                       "COLL_TCP_CONFIG_INIT (magic %#llx); start from "
                       "coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT",
                       (unsigned long long)cfg->magic);
  } else if (cfg->size != TCP_CONFIG_V1_SIZE) {
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp_create: config size %zu is not the size of any "
                     "coll_tcp_config_t; start from coll_tcp_config_t cfg = "
                     "COLL_TCP_CONFIG_INIT",
                     cfg->size);
  }
  if (cfg->world < 1)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp_create: world %d; it must be at least 1", cfg->world);
  if (coll__knobs_load() != COLL_OK) {
    coll__err_prefix("tcp_create");
    return COLL_ERR_INVALID_ARG;
  }
  if (cfg->rank < 0 || cfg->rank >= cfg->world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp_create: rank %d is out of range for world %d "
                     "(0..%d)",
                     cfg->rank, cfg->world, cfg->world - 1);
  if (cfg->master_addr == NULL || cfg->master_addr[0] == '\0')
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp_create: master_addr is %s; give rank 0's host",
                     cfg->master_addr == NULL ? "NULL" : "empty");
  if (cfg->master_port < 1 || cfg->master_port > 65535)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp_create: master_port %d is outside 1..65535",
                     cfg->master_port);
  return COLL_OK;
}

/* The transport's "whole mesh" bound from what is left of ours; it reads
 * 0 as "the default", so a spent deadline becomes 1 ms. */
static int64_t mesh_timeout(int64_t deadline_ms) {
  int64_t left = coll__remaining_ms(deadline_ms);
  return left == 0 ? 1 : left;
}

/* Ranks of a comm spread over hosts that share a host also share memory
 * (host_endpoint.c), unless COLL_TRANSPORT=tcp. `s` is how this rank's
 * TCP mesh went: a rank that has no mesh tells its host's ranks. */
static coll_status_t add_host_endpoint(coll_store_t *st,
                                       const coll_tcp_config_t *cfg,
                                       const int *host_of, const char *job,
                                       const char *token, int64_t deadline_ms,
                                       coll_status_t s, coll_transport_t **h) {
  coll_store_ops_t ops;
  coll__store_client_ops(st, &ops);
  if (s != COLL_OK) {
    coll__transport_host_skip(&ops, cfg->rank);
    return s;
  }
  return coll__transport_host_create(&ops, cfg->rank, cfg->world, host_of, job,
                                     token, deadline_ms, h);
}

coll_status_t coll__tcp_plan(const coll_tcp_config_t *cfg, coll_tcp_plan_t *p) {
  int64_t timeout;
  const char *ifname;
  struct sockaddr_storage master;
  COLL_CHECK(check_config(cfg));
  memset(p, 0, sizeof *p);
  /* A caller built against the first layout has no magic (check_config). */
  memcpy(&p->cfg, cfg, cfg->size < sizeof p->cfg ? cfg->size : sizeof p->cfg);
  timeout = cfg->timeout_ms != 0 ? cfg->timeout_ms : coll__default_timeout_ms();
  p->token =
      cfg->auth_token ? cfg->auth_token : coll__knob_text(COLL_ENV_AUTH_TOKEN);
  ifname = cfg->ifname ? cfg->ifname : coll__knob_text(COLL_ENV_SOCKET_IFNAME);
  COLL_CHECK(coll__transport_mode(&p->mode));
  COLL_CHECK(coll__resolve_host("MASTER_ADDR", cfg->master_addr, &master,
                                p->master_ip));
  /* A wrong interface fails here, before anyone waits on this rank. */
  COLL_CHECK(coll__local_addr(&master, ifname,
                              cfg->ifname ? "ifname" : "COLL_SOCKET_IFNAME",
                              p->local));
  if (cfg->job_id != NULL)
    snprintf(p->job, sizeof p->job, "%s", cfg->job_id);
  else
    snprintf(p->job, sizeof p->job, "%s:%d", cfg->master_addr,
             cfg->master_port);
  coll__transport_host_info(p->mode, cfg->rank, p->host);
  p->rdv = (coll_rdv_cfg_t){.rank = cfg->rank,
                            .world = cfg->world,
                            .master_host = cfg->master_addr,
                            .master_ip = p->master_ip,
                            .master_port = cfg->master_port,
                            .token = p->token,
                            .deadline_ms = coll__deadline(timeout),
                            .timeout_ms = timeout,
                            .host_info = p->host};
  COLL_INFO(COLL_LOG_BOOT, "rank %d/%d: store at %s:%d, listening on %s",
            cfg->rank, cfg->world, p->master_ip, cfg->master_port, p->local);
  return COLL_OK;
}

coll_status_t coll__tcp_over(coll_rdv_t *r, const coll_tcp_plan_t *p,
                             coll_transport_t **out) {
  const coll_tcp_config_t *cfg = &p->cfg;
  int64_t deadline = p->rdv.deadline_ms;
  coll_tcp_opts_t o;
  coll_tcp_rdv_t rdv;
  coll_transport_t *t = NULL, *h = NULL;
  coll_status_t s;
  int shm = 0, *host_of;
  *out = NULL;
  host_of = malloc((size_t)cfg->world * sizeof *host_of);
  s = host_of != NULL
          ? coll__transport_choose(coll__rdv_store(r), cfg->rank, cfg->world,
                                   p->mode, deadline, &shm, host_of)
          : coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  if (s == COLL_OK && shm) {
    s = coll__transport_shm_create(coll__rdv_store(r), cfg->rank, cfg->world,
                                   p->job, p->token, deadline, &t);
  } else if (s == COLL_OK) {
    o = (coll_tcp_opts_t){cfg->rank, cfg->world, p->local,
                          p->job,    p->token,   mesh_timeout(deadline)};
    coll__rdv_tcp_adapter(r, &rdv);
    s = coll__tcp_transport_create(&o, &rdv, &t);
    if (p->mode != COLL_TRANSPORT_TCP)
      s = add_host_endpoint(coll__rdv_store(r), cfg, host_of, p->job, p->token,
                            deadline, s, &h);
  }
  /* The CPU comm orders its ring by host (algo/topo.h); this host's ranks
   * are reached through h where there is one. */
  if (s == COLL_OK) s = coll__route_create(&t, h, host_of);
  free(host_of);
  /* Every rank returns the same: a mesh that failed anywhere fails
   * everywhere (rdv_outcome.c). */
  s = coll__rdv_conclude(r, s);
  if (s != COLL_OK) {
    if (t != NULL) coll_transport_destroy(t);
    return s;
  }
  *out = t;
  return COLL_OK;
}

static coll_status_t bootstrap(const coll_tcp_config_t *cfg,
                               coll_transport_t **out) {
  coll_tcp_plan_t *p = malloc(sizeof *p);
  coll_rdv_t *r = NULL;
  coll_status_t s;
  if (p == NULL) return coll__err(COLL_ERR_NO_MEMORY, "out of memory");
  s = coll__tcp_plan(cfg, p);
  if (s == COLL_OK) s = coll__rdv_open(&p->rdv, &r);
  if (s == COLL_OK) s = coll__tcp_over(r, p, out);
  free(p);
  return s;
}

coll_status_t coll_tcp_create(const coll_tcp_config_t *cfg,
                              coll_transport_t **out) {
  coll_status_t s;
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp_create: out is NULL");
  *out = NULL;
  s = bootstrap(cfg, out);
  if (s != COLL_OK) coll__err_prefix("tcp_create");
  return s;
}
