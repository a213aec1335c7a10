/* SPDX-License-Identifier: Apache-2.0 */
/* host_id.h: which host, as far as shared memory goes, this process is on,
 * and the choice between the TCP and shared-memory transports that
 * coll_tcp_create (and so coll_comm_init_env) makes from it. */
#ifndef COLL_BOOTSTRAP_HOST_ID_H
#define COLL_BOOTSTRAP_HOST_ID_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store/store.h"
#include "coll.h"
#include "core/env.h"

#define COLL_HOST_ID_MAX 128
/* "<mode> <host id> <gpu>": gpu_verdict.h's COLL_GPU_ID_MAX fits. */
#define COLL_HOST_INFO_MAX (COLL_HOST_ID_MAX + 48)

/* host_id.c --------------------------------------------------------------- */

/* This process's host identity: the kernel's boot id plus the inodes of
 * its network and IPC namespaces, so two containers on one kernel that
 * share neither count as two hosts (abstract Unix sockets live in the
 * network namespace). Never fails: what cannot be read is left out, which
 * only makes processes look like different hosts. Any thread. */
void coll__host_id(char out[COLL_HOST_ID_MAX]);

/* Test hook: when set, the host identity of rank `rank` is `id` instead;
 * and of any rank r < nids with ids[r] != NULL, ids[r] (ranks as threads of
 * one process, each on a host of its own choosing). Not exported from
 * libcoll.so (tests link the internal library). */
typedef struct coll_host_id_test_hook {
  int rank; /* -1: off */
  const char *id;
  const char *const *ids; /* NULL: off */
  int nids;
} coll_host_id_test_hook_t;
extern coll_host_id_test_hook_t coll__host_id_test_hook;

/* coll__host_id, or what the test hook says for `rank`. Any thread. */
void coll__host_id_of_rank(int rank, char out[COLL_HOST_ID_MAX]);

/* The distinct host identities met so far, numbered 0, 1, ... in the order
 * they were first met: reading every rank's identity in rank order numbers
 * the hosts by their lowest rank, the same on every rank. */
typedef struct coll_host_table {
  char (*ids)[COLL_HOST_ID_MAX];
  int n, cap;
} coll_host_table_t;

/* The number of host `id` (added when new), or -1 with COLL_ERR_NO_MEMORY
 * recorded. One thread per table. */
int coll__host_table_index(coll_host_table_t *tab, const char *id);
void coll__host_table_free(coll_host_table_t *tab);

/* transport_choice.c ------------------------------------------------------ */

/* COLL_TRANSPORT_AUTO, _TCP or _SHM: COLL_TRANSPORT's words (core/env.h). */
typedef int coll_transport_mode_t;

/* The mode COLL_TRANSPORT asks for: auto when unset, except that unset
 * with COLL_ELASTIC=1 is tcp (only TCP comms can shrink). Any thread. */
coll_status_t coll__transport_mode(coll_transport_mode_t *out);

/* What this rank publishes at rendezvous ("host/<rank>", written before it
 * joins): its mode and host identity, "<mode> <host id>". The rendezvous
 * may append " <gpu>" (coll_rdv_cfg_t.gpu). */
void coll__transport_host_info(coll_transport_mode_t mode, int rank,
                               char out[COLL_HOST_INFO_MAX]);
/* Splits a published "<mode> <host id>[ <gpu>]" in place: *host and *gpu
 * ("" when absent) point into v. Returns the mode (0 when unreadable). */
int coll__host_info_split(char *v, char **host, char **gpu);

/* Rank 0 reads every rank's host info (published before it joined, so this
 * waits only on a rank that skipped it, until the absolute deadline) and
 * publishes what it found; the other ranks read that: *use_shm is 1 when
 * every rank is on this host and the mode allows it; host_of[r] (world
 * entries) the number of rank r's host (coll_host_table_t).
 * COLL_ERR_INVALID_ARG when ranks disagree on COLL_TRANSPORT, or it says shm
 * and the ranks are on different hosts (naming them). Every rank reaches the
 * same answer. One thread. */
coll_status_t coll__transport_choose(coll_store_t *st, int rank, int world,
                                     coll_transport_mode_t mode,
                                     int64_t deadline_ms, int *use_shm,
                                     int *host_of);

/* Builds the shared-memory transport, its socket names exchanged through
 * the store ("shm/<rank>"). */
coll_status_t coll__transport_shm_create(coll_store_t *st, int rank, int world,
                                         const char *job_id, const char *token,
                                         int64_t deadline_ms,
                                         coll_transport_t **out);

/* For a comm spread over hosts: the shared-memory endpoint among the
 * ranks on rank's host (host_of as coll__transport_choose gives it),
 * speaking comm ranks, its socket names exchanged through the setup's
 * store (host_endpoint.c); *out NULL and COLL_OK when rank is alone on its
 * host. Every rank of the host calls it or coll__transport_host_skip. One
 * thread. */
coll_status_t coll__transport_host_create(const coll_store_ops_t *ops, int rank,
                                          int world, const int *host_of,
                                          const char *job_id, const char *token,
                                          int64_t deadline_ms,
                                          coll_transport_t **out);
/* A rank whose own setup failed before its host endpoint says so, so that
 * its host's ranks fail at once rather than wait for it. */
void coll__transport_host_skip(const coll_store_ops_t *ops, int rank);

#endif
