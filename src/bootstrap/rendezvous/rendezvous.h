/* SPDX-License-Identifier: Apache-2.0 */
/* rendezvous.h: what coll_tcp_create and coll_comm_init_env share: address
 * resolution, local interface choice, and the rendezvous (rank 0 serves the
 * store, every rank joins, missing ranks are named, the store stops once
 * every rank is done with it). */
#ifndef COLL_BOOTSTRAP_RENDEZVOUS_H
#define COLL_BOOTSTRAP_RENDEZVOUS_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/store/store.h"
#include "coll.h"

/* Numeric host text: the longest IPv6 address with a %scope fits. */
#define COLL_ADDR_TEXT_MAX 96

/* ifaddr.c ---------------------------------------------------------------- */

/* Resolves host (a name or a numeric address) to its first address; `what`
 * names the setting in the error ("MASTER_ADDR"). numeric (may be NULL)
 * receives the address as text. COLL_ERR_INVALID_ARG when it does not
 * resolve. Any thread. */
coll_status_t coll__resolve_host(const char *what, const char *host,
                                 struct sockaddr_storage *out,
                                 char numeric[COLL_ADDR_TEXT_MAX]);

/* The address this host should listen on to be reached by peers of master:
 * the first address of interface `ifname` in master's family (global before
 * link-local) when ifname is set, else the source address the routing
 * table picks toward master. `ifname_what` names where ifname came from, for
 * messages ("COLL_SOCKET_IFNAME"). Any thread. */
coll_status_t coll__local_addr(const struct sockaddr_storage *master,
                               const char *ifname, const char *ifname_what,
                               char out[COLL_ADDR_TEXT_MAX]);

/* The address to listen on when no store address says which network to
 * use (coll_comm_init_store): interface ifname's first address (IPv4
 * before IPv6) when ifname is set (from COLL_SOCKET_IFNAME); else the
 * address the routing table uses toward master_host when that is set
 * (MASTER_ADDR); else the first non-loopback address this host's name
 * resolves to that can be bound here (as Gloo does); else the source
 * address of the default route; else 127.0.0.1, which only ranks on this
 * host can reach (a warning says so). COLL_ERR_INVALID_ARG for an
 * interface or a master_host that does not exist. Any thread. */
coll_status_t coll__listen_addr_auto(const char *ifname,
                                     const char *master_host,
                                     char out[COLL_ADDR_TEXT_MAX]);

/* rendezvous.c ------------------------------------------------------------ */

typedef struct coll_rdv_cfg {
  int rank;
  int world;
  const char *master_host; /* as the user gave it, for messages */
  const char *master_ip;   /* numeric, resolved: rank 0 listens there */
  int master_port;
  const char *token;   /* NULL/"": none */
  int64_t deadline_ms; /* absolute (coll__now_ms), < 0: none */
  /* The setup timeout as the user gave it, for messages (the time left
   * until deadline_ms is a millisecond short by the time it is read). */
  int64_t timeout_ms;
  /* Published as "host/<rank>" before this rank joins, so every rank can
   * read every rank's once all joined (transport_choice.c); NULL: none. */
  const char *host_info;
  /* The GPU this rank would run NCCL on (its PCI bus id, gpu_verdict.h),
   * published with its host: rank 0, when it names one itself, judges
   * whether every rank has a GPU of its own and tells every rank with its
   * verdict (coll__rdv_gpus). NULL: this rank names none. */
  const char *gpu;
} coll_rdv_cfg_t;

typedef struct coll_rdv coll_rdv_t;

/* Rank 0 starts the store; every rank connects and joins. Returns once all
 * ranks joined; otherwise COLL_ERR_TIMEOUT naming the ranks that did not.
 * One thread. */
coll_status_t coll__rdv_open(const coll_rdv_cfg_t *cfg, coll_rdv_t **out);
/* The store client, for publishing and looking up. */
coll_store_t *coll__rdv_store(coll_rdv_t *r);
/* Once open: whether every rank has a GPU of its own, as rank 0 judged
 * from what each named (coll_rdv_cfg_t.gpu); where rank 0 named none, the
 * verdict is COLL_GPUS_MISSING naming rank 0. The same on every rank. */
struct coll_gpus;
void coll__rdv_gpus(const coll_rdv_t *r, struct coll_gpus *out);
/* This rank is done with the store. Rank 0 waits (until the deadline) for
 * every rank to say so, then stops the store; the others return at once.
 * Frees r in all cases. One thread. */
coll_status_t coll__rdv_finish(coll_rdv_t *r);
/* Ends the setup all or nothing (rdv_outcome.c): reports this rank's
 * outcome `mine` (COLL_OK, or a failure whose text is in coll_last_error),
 * waits for every rank's, and returns COLL_OK only when every rank
 * succeeded; otherwise every rank returns the same status and text naming
 * the failed ranks and why. Then finishes like coll__rdv_finish (frees r).
 * One thread. */
coll_status_t coll__rdv_conclude(coll_rdv_t *r, coll_status_t mine);
/* Abandons the rendezvous after a failure: closes the client and, on rank
 * 0, stops the store. NULL is a no-op. */
void coll__rdv_abandon(coll_rdv_t *r);

/* A coll_tcp_rdv_t (src/transport/tcp/tcp.h) over r (rdv_addrs.c):
 * publish sets "addr/<rank>" (on rank 0 it also waits for every rank's and
 * sets the table "addrs/<c>"); lookup reads rank 0's table once and
 * answers from it. */
struct coll_tcp_rdv;
void coll__rdv_tcp_adapter(coll_rdv_t *r, struct coll_tcp_rdv *out);

/* Test hooks, read by the rendezvous and by coll_comm_init_store's setup
 * (the claim by the compatibility check, publish_* by both address
 * publishers, phase by the outcome round); tests set them before any rank
 * starts. Not exported from libcoll.so (tests link the internal library),
 * so a program cannot turn them on. Off: ranks -1, phase NULL. */
typedef struct coll_rdv_test_hooks {
  int claim_rank;           /* this rank claims the versions below */
  int claim_version;        /* as coll_version() would return it */
  unsigned claim_wire;      /* as COLL_TCP_WIRE_VERSION */
  int publish_rank;         /* this rank publishes publish_addr instead of */
  const char *publish_addr; /* its listener's address */
  /* Called with "joined" after the rendezvous, "meshed" before the
   * outcome is reported, "hearing" before the outcomes are read. */
  void (*phase)(int rank, const char *phase);
  /* Called with the address `rank` is about to publish at the rendezvous;
   * returns the one to publish instead (NULL: that one), e.g. a proxy's
   * that forwards to it. */
  const char *(*publish_as)(int rank, const char *addr);
  /* Called on rank 0 as its store stops, with the requests it served. */
  void (*store_served)(uint64_t requests);
} coll_rdv_test_hooks_t;
#define COLL_RDV_TEST_HOOKS_OFF \
  { -1, 0, 0, -1, NULL, NULL, NULL, NULL }
extern coll_rdv_test_hooks_t coll__rdv_test_hooks;

/* tcp_create.c ------------------------------------------------------------ */

/* coll_tcp_create's steps before and after the rendezvous, apart, for
 * coll_comm_init_env: under COLL_BACKEND=auto it opens the rendezvous
 * itself, naming its GPU, and builds the TCP transport over it only where
 * the ranks cannot all run NCCL. */
typedef struct coll_tcp_plan {
  coll_tcp_config_t cfg; /* the caller's; its strings stay the caller's */
  coll_transport_mode_t mode;
  const char *token;
  char master_ip[COLL_ADDR_TEXT_MAX];
  char local[COLL_ADDR_TEXT_MAX]; /* the address to listen on */
  char job[320];
  char host[COLL_HOST_INFO_MAX];
  coll_rdv_cfg_t rdv; /* the rendezvous to open; points into this plan */
} coll_tcp_plan_t;

/* Checks cfg as coll_tcp_create does, resolves MASTER_ADDR and chooses the
 * local address (a wrong interface fails here, before anyone waits). Any
 * thread. */
coll_status_t coll__tcp_plan(const coll_tcp_config_t *cfg, coll_tcp_plan_t *p);
/* The rest of coll_tcp_create on r, opened from p->rdv: the transport
 * (shared memory, or TCP with shared memory per host) and the
 * all-or-nothing end. Frees r in every case. One thread. */
coll_status_t coll__tcp_over(coll_rdv_t *r, const coll_tcp_plan_t *p,
                             coll_transport_t **out);

/* Formats "2, 5, 7" (at most a line, then "and N more") from rank ids. */
void coll__format_ranks(char *out, size_t cap, const int *ranks, int n);

#endif
