/* SPDX-License-Identifier: Apache-2.0 */
/* shm.h: the shared-memory transport's internal entry point, for ranks
 * that are processes of one host. The bootstrap layer provides the
 * rendezvous; this transport makes its memory, meets every peer over a
 * Unix-domain socket, maps theirs and returns a coll_transport_t. */
#ifndef COLL_TRANSPORT_SHM_SHM_H
#define COLL_TRANSPORT_SHM_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* How ranks find each other's Unix socket (an abstract name, as text). */
typedef struct coll_shm_rdv {
  void *ctx;
  coll_status_t (*publish)(void *ctx, int rank, const char *addr);
  /* Waits (until the absolute coll__now_ms deadline) for `rank`'s name. */
  coll_status_t (*lookup)(void *ctx, int rank, char *addr, size_t cap,
                          int64_t deadline_ms);
  /* Optional (NULL: never asked): without waiting, 1 if `rank` said its
   * setup failed before it could join (so a rank waiting for its dial
   * need not wait for the deadline), else 0. Leaves the thread's error
   * text alone. */
  int (*gave_up)(void *ctx, int rank);
} coll_shm_rdv_t;

typedef struct coll_shm_opts {
  int rank;
  int world;
  const char *job_id;  /* checked when peers meet; non-NULL */
  const char *token;   /* shared secret, NULL or "" for none */
  int64_t deadline_ms; /* absolute bound on meeting every peer; < 0 none */
  /* A host endpoint inside a larger comm (the messages between the ranks
   * of one host, transport/transport.c): names[i]
   * is the comm rank of member i (rank and world above count members;
   * names ascend, all below name_world). The endpoint then speaks comm
   * ranks only: coll_transport_rank/size, the peers of isend and irecv,
   * every text and every failure origin. NULL: members are the ranks. */
  const int *names;
  int name_world;
} coll_shm_opts_t;

/* Longest socket name as published text. */
#define COLL_SHM_ADDR_MAX 128

/* Makes this rank's memory, publishes its socket name, meets every peer
 * (the memory and doorbell of each handed over the socket), maps theirs
 * and returns the endpoint. Nothing is left in the file system, whatever
 * happens. One thread. */
coll_status_t coll__shm_transport_create(const coll_shm_opts_t *o,
                                         const coll_shm_rdv_t *rdv,
                                         coll_transport_t **out);

/* Test seams, not exported from libcoll.so; set before the comm is made.
 * coll__shm_cma_refuse = 1: every probe fails as on a kernel that refuses
 * cross-memory attach. coll__shm_copy_from_test: the single-copy threshold
 * in bytes (0: COLL_SHM_SINGLE_COPY's). coll__shm_peer_read_hook: called before
 * every single copy with the peer's comm rank and the length. */
extern int coll__shm_cma_refuse;
extern size_t coll__shm_copy_from_test;
extern void (*coll__shm_peer_read_hook)(int peer, size_t len);

#endif
