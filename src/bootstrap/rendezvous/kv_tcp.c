/* SPDX-License-Identifier: Apache-2.0 */
/* kv_tcp.c: the TCP transport over a caller's key/value store. The mesh
 * code is the transport's own (coll__tcp_transport_create); this file only
 * adapts the store to its publish/lookup interface, and carries each rank's
 * host identity (COLL_KV_HOST_KEY "<r>") so the comm can order its ring by
 * host, and builds the shared-memory endpoint of each host of a comm
 * spread over several (host_endpoint.c). There is no store
 * server to stop here, so no closing round either: the keys stay in the
 * caller's store. */
#include "bootstrap/rendezvous/kv_tcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/route/route.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

typedef struct kv_rdv {
  const coll_store_ops_t *ops;
  int world;
  int64_t timeout_ms; /* the whole bootstrap's, for messages */
} kv_rdv_t;

static coll_status_t kv_publish(void *ctx, int rank, const char *addr) {
  kv_rdv_t *k = ctx;
  char key[COLL_KV_KEY_MAX];
  snprintf(key, sizeof key, COLL_KV_ADDR_KEY "%d", rank);
  if (rank == coll__rdv_test_hooks.publish_rank &&
      coll__rdv_test_hooks.publish_addr != NULL)
    addr = coll__rdv_test_hooks.publish_addr;
  return coll__kv_set(k->ops, key, addr, strlen(addr));
}

/* After a lookup timed out: COLL_ERR_TIMEOUT naming every rank whose
 * address is still missing, this rank's own included if its set never
 * landed. */
static coll_status_t name_missing(kv_rdv_t *k, const char *key) {
  int *missing = malloc((size_t)k->world * sizeof *missing), n = 0;
  char ranks[300];
  coll_status_t s;
  if (missing == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "store bootstrap: out of memory");
  s = coll__kv_missing(k->ops, COLL_KV_ADDR_KEY, k->world, -1, missing, &n);
  if (s == COLL_OK && n == 0)
    s = coll__err(COLL_ERR_TIMEOUT,
                  "'%s' did not appear in the store within %lld ms (every "
                  "address is there now: too late)",
                  key, (long long)k->timeout_ms);
  else if (s == COLL_OK) {
    coll__format_ranks(ranks, sizeof ranks, missing, n);
    s = coll__err(
        COLL_ERR_TIMEOUT,
        "'%s' did not appear in the store within %lld ms: %d of %d "
        "ranks never set their address (" COLL_KV_ADDR_KEY "<rank>): rank%s %s",
        key, (long long)k->timeout_ms, n, k->world, n > 1 ? "s" : "", ranks);
  }
  free(missing);
  return s;
}

static coll_status_t kv_lookup(void *ctx, int rank, char *addr, size_t cap,
                               int64_t deadline_ms) {
  kv_rdv_t *k = ctx;
  char key[COLL_KV_KEY_MAX];
  size_t len = 0;
  coll_status_t s;
  if (cap < 2)
    return coll__err(COLL_ERR_INVALID_ARG, "store bootstrap: no room");
  snprintf(key, sizeof key, COLL_KV_ADDR_KEY "%d", rank);
  s = coll__kv_get(k->ops, key, addr, cap - 1, &len,
                   coll__remaining_ms(deadline_ms));
  if (s == COLL_ERR_TIMEOUT) return name_missing(k, key);
  if (s != COLL_OK) return s;
  if (len == 0 || len > cap - 1)
    return coll__err(COLL_ERR_PROTOCOL,
                     "the value of '%s' is %zu bytes; an address is 1 to %zu",
                     key, len, cap - 1);
  addr[len] = '\0';
  return COLL_OK;
}

/* "<COLL_TRANSPORT> <host id>", as coll_tcp_create's ranks publish it. */
static coll_status_t host_publish(const coll_store_ops_t *ops, int rank,
                                  coll_transport_mode_t mode) {
  char key[COLL_KV_KEY_MAX], info[COLL_HOST_INFO_MAX];
  snprintf(key, sizeof key, COLL_KV_HOST_KEY "%d", rank);
  coll__transport_host_info(mode, rank, info);
  return coll__kv_set(ops, key, info, strlen(info));
}

static const char *mode_name(int tcp) { return tcp ? "tcp" : "auto or shm"; }

/* Without a token a comm across hosts takes any peer that reaches a
 * rank's listener and names a rank: every rank says so. */
static void warn_open(int rank, int world, const int *host_of,
                      const char *token) {
  int r, hosts = 0;
  if (token != NULL && token[0] != '\0') return;
  for (r = 0; r < world; r++)
    if (host_of[r] + 1 > hosts) hosts = host_of[r] + 1;
  if (hosts < 2) return;
  COLL_WARN(COLL_LOG_BOOT,
            "rank %d: the %d ranks of this comm span %d hosts and run "
            "without COLL_AUTH_TOKEN: anyone who reaches a rank's listener "
            "can connect as a rank; give every rank the same secret "
            "COLL_AUTH_TOKEN",
            rank, world, hosts);
}

/* Every rank published its host before its address, and the mesh is
 * connected: the keys are there, so the waits are short. host_of gets
 * world entries. The ranks must agree whether COLL_TRANSPORT is tcp: it
 * decides whether the ranks of a host share memory. */
static coll_status_t hosts_read(const coll_store_ops_t *ops, int world,
                                int64_t deadline_ms, int *host_of) {
  char key[COLL_KV_KEY_MAX], info[COLL_HOST_INFO_MAX];
  coll_host_table_t tab = {NULL, 0, 0};
  coll_status_t s = COLL_OK;
  int r, tcp0 = 0;
  for (r = 0; r < world && s == COLL_OK; r++) {
    size_t len = 0;
    int64_t left = coll__remaining_ms(deadline_ms);
    const char *id;
    int tcp;
    snprintf(key, sizeof key, COLL_KV_HOST_KEY "%d", r);
    s = coll__kv_get(ops, key, info, sizeof info - 1, &len,
                     left == 0 ? 1 : left);
    if (s != COLL_OK) break;
    info[len < sizeof info ? len : sizeof info - 1] = '\0';
    id = strchr(info, ' ');
    id = id != NULL ? id + 1 : info;
    tcp = atoi(info) == COLL_TRANSPORT_TCP;
    if (r == 0) tcp0 = tcp;
    if (tcp != tcp0) {
      s = coll__err(COLL_ERR_INVALID_ARG,
                    "ranks disagree on COLL_TRANSPORT: rank 0 has %s, rank "
                    "%d has %s",
                    mode_name(tcp0), r, mode_name(tcp));
      break;
    }
    host_of[r] = coll__host_table_index(&tab, id);
    if (host_of[r] < 0) s = COLL_ERR_NO_MEMORY;
  }
  coll__host_table_free(&tab);
  return s;
}

/* The ranks that share a host also share memory among themselves, which
 * carries every message between them (host_endpoint.c), unless
 * COLL_TRANSPORT=tcp. */
static coll_status_t add_host_endpoint(const coll_store_ops_t *ops, int rank,
                                       int world, const int *host_of,
                                       const char *job, int64_t deadline_ms,
                                       coll_transport_t **h) {
  int r, elsewhere = 0;
  for (r = 1; r < world; r++) elsewhere += host_of[r] != host_of[0];
  if (elsewhere == 0) return COLL_OK; /* one host: the comm stays on TCP */
  return coll__transport_host_create(ops, rank, world, host_of, job,
                                     coll__knob_text(COLL_ENV_AUTH_TOKEN),
                                     deadline_ms, h);
}

coll_status_t coll__kv_tcp_local(char out[COLL_ADDR_TEXT_MAX]) {
  return coll__listen_addr_auto(coll__knob_text(COLL_ENV_SOCKET_IFNAME),
                                coll__env(COLL_ENV_MASTER_ADDR), out);
}

coll_status_t coll__kv_tcp_create(const coll_store_ops_t *ops, int rank,
                                  int world, const char *local,
                                  int64_t deadline_ms, int64_t timeout_ms,
                                  coll_transport_t **out) {
  char job[48];
  kv_rdv_t k = {ops, world, timeout_ms};
  int64_t left = coll__remaining_ms(deadline_ms);
  coll_tcp_rdv_t rdv = {&k, kv_publish, kv_lookup};
  coll_tcp_opts_t o;
  coll_transport_mode_t mode;
  coll_transport_t *h = NULL;
  coll_status_t s;
  int *host_of;
  *out = NULL;
  /* Distinct comms have distinct keys (the caller's prefix), not distinct
   * job ids: the handshake still refuses a peer of another world size. */
  snprintf(job, sizeof job, "coll_comm_init_store/%d", world);
  /* The transport reads 0 as "the default": a spent budget is 1 ms. */
  o = (coll_tcp_opts_t){rank,
                        world,
                        local,
                        job,
                        coll__knob_text(COLL_ENV_AUTH_TOKEN),
                        left == 0 ? 1 : left};
  COLL_INFO(COLL_LOG_BOOT, "rank %d/%d: caller's store, listening on %s", rank,
            world, local);
  COLL_CHECK(coll__transport_mode(&mode));
  COLL_CHECK(host_publish(ops, rank, mode));
  host_of = malloc((size_t)world * sizeof *host_of);
  if (host_of == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "store bootstrap: out of memory");
  s = coll__tcp_transport_create(&o, &rdv, out);
  if (s != COLL_OK) coll__transport_host_skip(ops, rank);
  if (s == COLL_OK) s = hosts_read(ops, world, deadline_ms, host_of);
  if (s == COLL_OK) warn_open(rank, world, host_of, o.token);
  if (s == COLL_OK && mode != COLL_TRANSPORT_TCP)
    s = add_host_endpoint(ops, rank, world, host_of, job, deadline_ms, &h);
  /* The CPU comm orders its ring by host (algo/topo.h); this host's ranks
   * are reached through h where there is one. */
  if (s == COLL_OK) s = coll__route_create(out, h, host_of);
  free(host_of);
  if (s != COLL_OK && *out != NULL) {
    coll_transport_destroy(*out);
    *out = NULL;
  }
  return s;
}
