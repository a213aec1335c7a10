/* SPDX-License-Identifier: Apache-2.0 */
/* transport_choice.c: TCP or shared memory. Every rank publishes its
 * COLL_TRANSPORT and host identity ("host/<rank>") and reads everyone's;
 * with COLL_TRANSPORT unset or auto and all ranks on this host, or with
 * shm, the shared-memory transport is built; with tcp, TCP. A comm whose ranks
 * are spread over hosts runs on TCP, and the ranks that share a host also
 * get a shared-memory endpoint among themselves (host_endpoint.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/host_id.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "transport/shm/shm.h"

#define CHOICE_KEY_MAX 32
#define CHOICE_VALUE_MAX COLL_HOST_INFO_MAX

/* Unset is auto: ranks all on one host get shared memory. It keeps TCP's
 * contracts, heartbeats included (shm_heartbeat.c), and it measured ahead
 * of TCP at every size from 4 KiB to 64 MiB with 2 and 4 ranks
 * (coll-perf, interleaved runs; src/cpu/allreduce.c has the figures).
 * Unset with COLL_ELASTIC=1 is TCP: only TCP comms can shrink. */
coll_status_t coll__transport_mode(coll_transport_mode_t *out) {
  *out = (coll_transport_mode_t)coll__knob(COLL_ENV_TRANSPORT);
  if (!coll__knob_set(COLL_ENV_TRANSPORT) && coll__knob(COLL_ENV_ELASTIC))
    *out = COLL_TRANSPORT_TCP;
  return COLL_OK;
}

static coll_status_t get_value(coll_store_t *st, const char *key, char *buf,
                               size_t cap, int64_t deadline_ms) {
  size_t len = 0;
  int64_t left = coll__remaining_ms(deadline_ms);
  coll_status_t s =
      coll__store_get(st, key, buf, cap - 1, &len, left == 0 ? 1 : left);
  if (s != COLL_OK) return s;
  buf[len] = '\0';
  return COLL_OK;
}

/* "rank 0 on A, rank 2 on B" for the first rank on another host than
 * rank 0's. */
static coll_status_t refuse_hosts(int other, const char *id0,
                                  const char *id_other) {
  return coll__err(COLL_ERR_INVALID_ARG,
                   "COLL_TRANSPORT=shm, but the ranks are not all on one "
                   "host: rank 0 is on host %s, rank %d on host %s (host = "
                   "boot id/network namespace/IPC namespace); use auto or "
                   "tcp",
                   id0, other, id_other);
}

void coll__transport_host_info(coll_transport_mode_t mode, int rank,
                               char out[COLL_HOST_INFO_MAX]) {
  char id[COLL_HOST_ID_MAX];
  coll__host_id_of_rank(rank, id);
  snprintf(out, COLL_HOST_INFO_MAX, "%d %s", (int)mode, id);
}

int coll__host_info_split(char *v, char **host, char **gpu) {
  char *sp = strchr(v, ' ');
  int m = atoi(v);
  *host = sp != NULL ? sp + 1 : (char *)"?";
  *gpu = (char *)"";
  if (sp != NULL && (sp = strchr(sp + 1, ' ')) != NULL) {
    *sp = '\0';
    *gpu = sp + 1;
  }
  return m >= 0 && m < 3 ? m : 0;
}

coll_status_t coll__transport_choose(coll_store_t *st, int world,
                                     coll_transport_mode_t mode,
                                     int64_t deadline_ms, int *use_shm,
                                     int *host_of) {
  char key[CHOICE_KEY_MAX];
  char *first = NULL, *got = NULL;
  coll_host_table_t hosts = {NULL, 0, 0};
  const char *host0 = "";
  int other = -1, m0 = 0;
  coll_status_t s = COLL_OK;
  *use_shm = 0;
  first = malloc(CHOICE_VALUE_MAX);
  got = malloc(CHOICE_VALUE_MAX);
  if (first == NULL || got == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "transport choice: out of memory");
    goto out;
  }
  for (int r = 0; r < world; r++) {
    char *v = r == 0 ? first : got, *host, *gpu;
    int mr;
    snprintf(key, sizeof key, "host/%d", r);
    COLL_CHECK_GOTO(get_value(st, key, v, CHOICE_VALUE_MAX, deadline_ms), s,
                    out);
    mr = coll__host_info_split(v, &host, &gpu);
    if (r == 0) {
      m0 = mr;
      host0 = host;
    }
    if (mr != m0) {
      s = coll__err(COLL_ERR_INVALID_ARG,
                    "ranks disagree on COLL_TRANSPORT: rank 0 has %s, rank "
                    "%d has %s",
                    coll__knob_word_at(COLL_ENV_TRANSPORT, m0), r,
                    coll__knob_word_at(COLL_ENV_TRANSPORT, mr));
      goto out;
    }
    host_of[r] = coll__host_table_index(&hosts, host);
    if (host_of[r] < 0) {
      s = COLL_ERR_NO_MEMORY;
      goto out;
    }
    if (other < 0 && strcmp(host, host0) != 0) {
      other = r;
      if (mode == COLL_TRANSPORT_SHM) {
        s = refuse_hosts(r, host0, host);
        goto out;
      }
    }
  }
  *use_shm = mode != COLL_TRANSPORT_TCP && other < 0;
out:
  coll__host_table_free(&hosts);
  free(first);
  free(got);
  return s;
}

typedef struct shm_store_rdv {
  coll_store_t *st;
} shm_store_rdv_t;

static coll_status_t shm_publish(void *ctx, int rank, const char *addr) {
  char key[CHOICE_KEY_MAX];
  snprintf(key, sizeof key, "shm/%d", rank);
  return coll__store_set(((shm_store_rdv_t *)ctx)->st, key, addr, strlen(addr));
}

static coll_status_t shm_lookup(void *ctx, int rank, char *addr, size_t cap,
                                int64_t deadline_ms) {
  char key[CHOICE_KEY_MAX];
  coll_status_t s;
  snprintf(key, sizeof key, "shm/%d", rank);
  s = get_value(((shm_store_rdv_t *)ctx)->st, key, addr, cap, deadline_ms);
  if (s == COLL_ERR_TIMEOUT)
    return coll__err(s, "rank %d did not publish its shm socket in time", rank);
  return s;
}

coll_status_t coll__transport_shm_create(coll_store_t *st, int rank, int world,
                                         const char *job_id, const char *token,
                                         int64_t deadline_ms,
                                         coll_transport_t **out) {
  shm_store_rdv_t sr = {st};
  coll_shm_rdv_t rdv = {&sr, shm_publish, shm_lookup, NULL};
  coll_shm_opts_t o = {rank, world, job_id, token, deadline_ms, NULL, 0};
  return coll__shm_transport_create(&o, &rdv, out);
}
