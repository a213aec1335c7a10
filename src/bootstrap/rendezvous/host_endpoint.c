/* SPDX-License-Identifier: Apache-2.0 */
/* host_endpoint.c: the shared-memory endpoint among the ranks of one host,
 * for a comm whose ranks are spread over hosts. The comm's own transport
 * (TCP) joins every rank; this one joins only the ranks of this host and
 * speaks comm ranks (coll_shm_opts_t.names): the comm's endpoint routes
 * every message between two ranks of this host to it (transport/
 * transport.c), and the two-level allreduce runs its steps within the host
 * on it (algo/allreduce_two_level.c). Socket
 * names go through the setup's store as "coll/shmh/<comm rank>"; a rank
 * whose own setup failed publishes "-" there instead, so its host's ranks
 * fail at once instead of waiting for it until the deadline: the higher
 * ones when they look its name up to dial it, the lower ones, which wait
 * for its dial, when they look for the mark meanwhile (host_gave_up). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/kv.h"
#include "core/clock.h"
#include "core/error.h"
#include "transport/shm/shm.h"

#define HOST_KEY COLL_KV_PREFIX "shmh/"
#define HOST_FAILED_MARK "-"

typedef struct host_rdv {
  const coll_store_ops_t *ops;
  const int *names;
} host_rdv_t;

static void key_of(char key[COLL_KV_KEY_MAX], int comm_rank) {
  snprintf(key, COLL_KV_KEY_MAX, HOST_KEY "%d", comm_rank);
}

static coll_status_t host_publish(void *ctx, int member, const char *addr) {
  host_rdv_t *h = ctx;
  char key[COLL_KV_KEY_MAX];
  key_of(key, h->names[member]);
  return coll__kv_set(h->ops, key, addr, strlen(addr));
}

static coll_status_t host_lookup(void *ctx, int member, char *addr, size_t cap,
                                 int64_t deadline_ms) {
  host_rdv_t *h = ctx;
  char key[COLL_KV_KEY_MAX];
  size_t len = 0;
  int64_t left = coll__remaining_ms(deadline_ms);
  coll_status_t s;
  int r = h->names[member];
  key_of(key, r);
  s = coll__kv_get(h->ops, key, addr, cap - 1, &len, left == 0 ? 1 : left);
  if (s == COLL_ERR_TIMEOUT)
    return coll__err(s, "rank %d did not publish its shm socket in time", r);
  if (s != COLL_OK) return s;
  if (len > cap - 1)
    return coll__err(COLL_ERR_PROTOCOL,
                     "rank %d's shm socket name is %zu bytes (at most %zu)", r,
                     len, cap - 1);
  addr[len] = '\0';
  if (strcmp(addr, HOST_FAILED_MARK) == 0)
    return coll__err(COLL_ERR_PEER_LOST,
                     "rank %d failed its setup before it joined this host's "
                     "shared memory",
                     r);
  return COLL_OK;
}

static int host_gave_up(void *ctx, int member) {
  host_rdv_t *h = ctx;
  char key[COLL_KV_KEY_MAX], addr[8], why[COLL_ERRMSG_MAX];
  size_t len = 0;
  coll_status_t s;
  key_of(key, h->names[member]);
  coll__err_save(why);
  s = coll__kv_get(h->ops, key, addr, sizeof addr - 1, &len, 0);
  coll__err_restore(why);
  return s == COLL_OK && len == strlen(HOST_FAILED_MARK) &&
         memcmp(addr, HOST_FAILED_MARK, len) == 0;
}

/* The comm ranks on rank's host, ascending; their number, or -1. */
static int members_of(int rank, int world, const int *host_of, int **names) {
  int n = 0, r;
  *names = NULL;
  for (r = 0; r < world; r++) n += host_of[r] == host_of[rank];
  if (n < 2) return n;
  *names = malloc((size_t)n * sizeof **names);
  if (*names == NULL) return -1;
  n = 0;
  for (r = 0; r < world; r++)
    if (host_of[r] == host_of[rank]) (*names)[n++] = r;
  return n;
}

coll_status_t coll__transport_host_create(const coll_store_ops_t *ops, int rank,
                                          int world, const int *host_of,
                                          const char *job_id, const char *token,
                                          int64_t deadline_ms,
                                          coll_transport_t **out) {
  char job[400];
  int *names, n, me = 0;
  coll_status_t s;
  *out = NULL;
  n = members_of(rank, world, host_of, &names);
  if (n < 0)
    return coll__err(COLL_ERR_NO_MEMORY, "host endpoint: out of memory");
  if (n < 2) return COLL_OK; /* alone on its host: nothing to share */
  while (names[me] != rank) me++;
  /* Another job id than the whole comm's: a host endpoint's hello never
   * passes for the comm's, nor one host's for another's. */
  snprintf(job, sizeof job, "%s/host%d", job_id, host_of[rank]);
  {
    host_rdv_t h = {ops, names};
    coll_shm_rdv_t rdv = {&h, host_publish, host_lookup, host_gave_up};
    coll_shm_opts_t o = {me, n, job, token, deadline_ms, names, world};
    s = coll__shm_transport_create(&o, &rdv, out);
  }
  free(names);
  if (s != COLL_OK) coll__err_prefix("this host's shared memory");
  return s;
}

void coll__transport_host_skip(const coll_store_ops_t *ops, int rank) {
  char key[COLL_KV_KEY_MAX], why[COLL_ERRMSG_MAX];
  key_of(key, rank);
  /* Best effort: a rank that cannot even say so is waited for. The text
   * of the failure that brought us here stays this thread's. */
  coll__err_save(why);
  (void)coll__kv_set(ops, key, HOST_FAILED_MARK, strlen(HOST_FAILED_MARK));
  coll__err_restore(why);
}
