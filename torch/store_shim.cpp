// SPDX-License-Identifier: Apache-2.0
// store_shim.cpp: TEMPORARY stand-in for coll_comm_init_store (CPU only):
// rank 0 picks a free port and publishes it through the store.
#include "store_shim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern "C" coll_status_t coll_comm_init_store(const coll_store_ops_t *store,
                                              int rank, int world,
                                              const coll_comm_config_t *cfg,
                                              coll_comm_t **out) {
  int port = 0;
  if (rank == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (sockaddr *)&a, &l);
    port = ntohs(a.sin_port);
    close(fd);
    coll_status_t s = store->set(store->ctx, "coll/port", &port, sizeof port);
    if (s != COLL_OK) return s;
  } else {
    size_t len = 0;
    coll_status_t s = store->get(store->ctx, "coll/port", &port, sizeof port,
                                 &len, cfg->timeout_ms);
    if (s != COLL_OK) return s;
  }
  coll_tcp_config_t tc = COLL_TCP_CONFIG_INIT;
  tc.rank = rank;
  tc.world = world;
  tc.master_addr = "127.0.0.1";
  tc.master_port = port;
  tc.timeout_ms = cfg->timeout_ms;
  coll_transport_t *t = nullptr;
  coll_status_t s = coll_tcp_create(&tc, &t);
  if (s != COLL_OK) return s;
  return coll_comm_create(t, cfg, out);
}
