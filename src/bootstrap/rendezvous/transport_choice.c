/* SPDX-License-Identifier: Apache-2.0 */
/* transport_choice.c: TCP or shared memory. Every rank publishes its
 * COLL_TRANSPORT and host identity ("host/<rank>"); rank 0 reads everyone's
 * and publishes what it found ("hosts": every rank's host number, or the
 * failure), which the others read: n + 1 gets where every rank reading
 * every record cost n squared, all served by rank 0's store. With
 * COLL_TRANSPORT unset or auto and all ranks on this host, or with
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
/* Rank 0's finding: "ok <first rank on another host, or -1> <host of rank
 * 0> <host of rank 1> ...", "FAIL <status> <text>", or "each" (a world too
 * large for one value: every rank reads every record). */
#define HOSTS_KEY "hosts"
#define HOSTS_VALUE_MAX ((size_t)COLL_STORE_VALUE_MAX)

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

/* Every rank's record: host_of[r], and *other the first rank on another
 * host than rank 0's (-1: none). */
static coll_status_t read_all(coll_store_t *st, int world,
                              coll_transport_mode_t mode, int64_t deadline_ms,
                              int *other_out, int *host_of) {
  char key[CHOICE_KEY_MAX];
  char *first = NULL, *got = NULL;
  coll_host_table_t hosts = {NULL, 0, 0};
  const char *host0 = "";
  int other = -1, m0 = 0;
  coll_status_t s = COLL_OK;
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
  *other_out = other;
out:
  coll__host_table_free(&hosts);
  free(first);
  free(got);
  return s;
}

/* Rank 0: publishes what read_all found (s, other, host_of). Keeps this
 * thread's error text; a failed set leaves the others to time out. */
static void tell(coll_store_t *st, int world, coll_status_t s, int other,
                 const int *host_of) {
  char *v = malloc(HOSTS_VALUE_MAX), why[COLL_ERRMSG_MAX];
  size_t used = 0;
  int r;
  coll__err_save(why);
  if (v == NULL) goto out;
  if (s != COLL_OK) {
    used = (size_t)snprintf(v, HOSTS_VALUE_MAX, "FAIL %d %s", (int)s, why);
  } else {
    used = (size_t)snprintf(v, HOSTS_VALUE_MAX, "ok %d", other);
    for (r = 0; r < world && used + 16 < HOSTS_VALUE_MAX; r++)
      used +=
          (size_t)snprintf(v + used, HOSTS_VALUE_MAX - used, " %d", host_of[r]);
    if (r < world) used = (size_t)snprintf(v, HOSTS_VALUE_MAX, "each");
  }
  (void)coll__store_set(st, HOSTS_KEY, v, used);
out:
  free(v);
  coll__err_restore(why);
}

/* Ranks other than 0: rank 0's finding. *each 1: it says "each". */
static coll_status_t hear(coll_store_t *st, int world, int64_t deadline_ms,
                          int *other, int *host_of, int *each) {
  char *v = malloc(HOSTS_VALUE_MAX), *p, *end;
  int code = 0, off = 0, r;
  coll_status_t s;
  *each = 0;
  if (v == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "transport choice: out of memory");
  s = get_value(st, HOSTS_KEY, v, HOSTS_VALUE_MAX, deadline_ms);
  if (s != COLL_OK) goto out;
  if (strcmp(v, "each") == 0) {
    *each = 1;
    goto out;
  }
  if (sscanf(v, "FAIL %d %n", &code, &off) >= 1 && code > 0 && off > 0) {
    s = coll__err((coll_status_t)code, "%s", v + off);
    goto out;
  }
  if (strncmp(v, "ok ", 3) != 0) goto bad;
  *other = (int)strtol(v + 3, &end, 10);
  for (r = 0, p = end; r < world; r++, p = end) {
    long h = strtol(p, &end, 10);
    if (end == p || h < 0 || h >= world) goto bad;
    host_of[r] = (int)h;
  }
  if (*other < -1 || *other >= world) goto bad;
  goto out;
bad:
  s = coll__err(COLL_ERR_PROTOCOL,
                "transport choice: rank 0 sent '%.64s' for the hosts of %d "
                "ranks",
                v, world);
out:
  free(v);
  return s;
}

coll_status_t coll__transport_choose(coll_store_t *st, int rank, int world,
                                     coll_transport_mode_t mode,
                                     int64_t deadline_ms, int *use_shm,
                                     int *host_of) {
  coll_status_t s;
  int other = -1, each = 0;
  *use_shm = 0;
  if (rank == 0) {
    s = read_all(st, world, mode, deadline_ms, &other, host_of);
    tell(st, world, s, other, host_of);
  } else {
    s = hear(st, world, deadline_ms, &other, host_of, &each);
    if (s == COLL_OK && each)
      s = read_all(st, world, mode, deadline_ms, &other, host_of);
  }
  if (s == COLL_OK) *use_shm = mode != COLL_TRANSPORT_TCP && other < 0;
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
