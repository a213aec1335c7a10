/* SPDX-License-Identifier: Apache-2.0 */
/* rendezvous.c: ranks meeting through the store. Keys:
 *   joined/<r>  counter, 1 once rank r arrived (2: a second process
 *               claimed the same rank)
 *   compat/<r>  rank r's versions and wire options (rdv_compat.c),
 *               written before it joins
 *   verdict     set by rank 0 only: "ok <world> <hosts>[ gpus <verdict>]"
 *               once every joined/<r> exists and every compat/<r> matches
 *               rank 0's (the GPU verdict where rank 0 named a GPU:
 *               gpu_verdict.h), or "FAIL <status> <reason>" naming the
 *               ranks still missing at its deadline or the incompatible
 *               ones, so every waiting rank fails with the same names
 *   ack/<r>     rank r read a FAIL verdict (rank 0 lingers briefly for it)
 *   host/<r>    rank r's transport mode and host identity, and the GPU it
 *               would run NCCL on if it names one, written before it joins
 *               (transport_choice.c, rdv_survey.c)
 *   addr/<r>    rank r's transport address
 *   addrs/<c>   rank 0's table of every rank's address (rdv_addrs.c)
 *   outcome/<r> rank r's setup outcome (rdv_outcome.c)
 *   outcome/all rank 0's verdict on every outcome, which the others read
 *   done/<r>    rank r no longer needs the store; rank 0 stops it after
 *               every done/<r> exists */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/rdv_int.h"
#include "bootstrap/store/store_ext.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

/* After a FAIL verdict, rank 0 keeps the store up this long at most for the
 * ranks that are present to read it. */
#define RDV_LINGER_MS 2000
#define RDV_KEY_MAX COLL_RDV_KEY_MAX
/* Before the GPU verdict in rank 0's "ok" verdict. */
#define RDV_GPUS " gpus "

void coll__format_ranks(char *out, size_t cap, const int *ranks, int n) {
  size_t used = 0;
  int i;
  out[0] = '\0';
  for (i = 0; i < n && used + 24 < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%d", i ? ", " : "",
                             ranks[i]);
  if (i < n) snprintf(out + used, cap - used, " and %d more", n - i);
}

const char **coll__rdv_rank_keys(const char *prefix, int world) {
  const char **keys = malloc((size_t)world * (sizeof *keys + RDV_KEY_MAX));
  char *names = (char *)(keys + world);
  int i;
  if (keys == NULL) return NULL;
  for (i = 0; i < world; i++) {
    snprintf(names + (size_t)i * RDV_KEY_MAX, RDV_KEY_MAX, "%s/%d", prefix, i);
    keys[i] = names + (size_t)i * RDV_KEY_MAX;
  }
  return keys;
}

/* Records COLL_ERR_TIMEOUT naming the ranks whose "<prefix>/<r>" key is
 * still missing, or `otherwise` when none is. Where the store refused a
 * client that said it was a missing rank (its token differs, say), the
 * text says so and the status is COLL_ERR_PROTOCOL: the one that refused
 * rank got too. */
static coll_status_t name_missing(coll_rdv_t *r, const char *prefix,
                                  const char *verb, const char *otherwise) {
  int *missing = malloc((size_t)r->world * sizeof *missing), n = 0;
  char ranks[COLL_ERRMSG_MAX];
  coll_status_t s;
  if (missing == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  s = coll__rdv_missing(r, prefix, missing, &n);
  if (s != COLL_OK) goto out;
  if (n == 0) {
    s = coll__err(COLL_ERR_TIMEOUT, "rendezvous at %s: %s", r->where,
                  otherwise);
    goto out;
  }
  s = coll__rdv_describe(r, missing, n, ranks, sizeof ranks) > 0
          ? COLL_ERR_PROTOCOL
          : COLL_ERR_TIMEOUT;
  s = coll__err(s, "rendezvous at %s: %d of %d ranks %s within %lld ms: %s",
                r->where, n, r->world, verb, (long long)r->timeout_ms, ranks);
out:
  free(missing);
  return s;
}

void coll__rdv_setup(coll_rdv_t *r, coll_setup_t *out) {
  coll__store_client_ops(r->store, &r->ops);
  *out = (coll_setup_t){&r->ops,
                        "",
                        r->rank,
                        r->world,
                        r->deadline_ms,
                        r->timeout_ms,
                        r->at,
                        "setup: lost the rendezvous store on rank 0 while the "
                        "ranks agreed on the outcome",
                        1};
}

/* After a FAIL verdict, keeps the store up (RDV_LINGER_MS at most) until
 * every rank that did join has read it. */
static void linger(coll_rdv_t *r, const char *const *joined) {
  const char **acks = coll__rdv_rank_keys("ack", r->world);
  int *missing = malloc((size_t)r->world * sizeof *missing);
  int n = 0, i, j = 0, k = 0;
  if (acks != NULL && missing != NULL &&
      coll__store_missing(r->store, joined, r->world, missing, &n) == COLL_OK) {
    /* missing[] is increasing: keep the ack keys of the others, rank 0
     * excluded (it is the one waiting). */
    for (i = 1; i < r->world; i++) {
      while (j < n && missing[j] < i) j++;
      if (j < n && missing[j] == i) continue;
      acks[k++] = acks[i];
    }
    if (k > 0) (void)coll__store_wait(r->store, acks, k, RDV_LINGER_MS);
  }
  free(acks);
  free(missing);
}

/* Rank 0: waits for every rank, then tells them all the outcome: "ok
 * <world> <hosts>" (hosts counted only without a token, else 0), or
 * "FAIL <status> <reason>". */
static coll_status_t judge(coll_rdv_t *r) {
  const char **keys = coll__rdv_rank_keys("joined", r->world);
  char verdict[COLL_ERRMSG_MAX + 8], reason[COLL_ERRMSG_MAX];
  coll_status_t s;
  if (keys == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: no memory");
  s = coll__rdv_wait_joined(r);
  if (s == COLL_OK) {
    coll_setup_t su;
    coll__rdv_setup(r, &su);
    s = coll__setup_compat_check(&su, 0);
  }
  if (s == COLL_OK) {
    /* The hosts are counted only for the warning of a job without a
     * token; the GPUs only where rank 0 named one (COLL_BACKEND=auto). */
    int hosts = !r->authed || r->gpu_named ? coll__rdv_survey(r) : 0;
    char gpus[COLL_GPU_ID_MAX + 48] = "";
    free(keys);
    if (r->authed) hosts = 0;
    if (r->gpu_named) {
      memcpy(gpus, RDV_GPUS, sizeof RDV_GPUS);
      coll__gpus_text(&r->gpus, gpus + strlen(gpus),
                      sizeof gpus - strlen(gpus));
    }
    snprintf(verdict, sizeof verdict, "ok %d %d%s", r->world, hosts, gpus);
    s = coll__store_set(r->store, "verdict", verdict, strlen(verdict));
    if (s == COLL_OK) coll__rdv_warn_open(r, hosts);
    return s;
  }
  if (s == COLL_ERR_TIMEOUT)
    s = name_missing(r, "joined", "did not join",
                     "every rank joined, but too late");
  /* The ranks that are here learn the names at once, instead of each
   * timing out on its own; then the store may go. */
  coll__err_save(reason);
  snprintf(verdict, sizeof verdict, "FAIL %d %s", (int)s, reason);
  if (coll__store_set(r->store, "verdict", verdict, strlen(verdict)) == COLL_OK)
    linger(r, keys);
  free(keys);
  coll__err_restore(reason);
  return s;
}

/* Ranks other than 0: wait for rank 0's verdict. */
static coll_status_t hear_verdict(coll_rdv_t *r) {
  char v[COLL_ERRMSG_MAX + 8], key[RDV_KEY_MAX];
  size_t len = 0;
  int code = 0, off = 0, world = 0, hosts = 0;
  coll_status_t s;
  s = coll__rdv_wait_verdict(r, v, sizeof v - 1, &len);
  /* The store answered that the verdict is not there: ask it who is
   * missing. Without an answer the store itself is lost. */
  if (s == COLL_ERR_TIMEOUT && coll__store_usable(r->store))
    return name_missing(r, "joined", "did not join",
                        "rank 0 never confirmed that every rank joined");
  if (s != COLL_OK) {
    coll__err_prefix("rendezvous: lost the store on rank 0");
    return s;
  }
  v[len] = '\0';
  if (sscanf(v, "ok %d %d", &world, &hosts) == 2) {
    const char *g = strstr(v, RDV_GPUS);
    /* Without a GPU verdict rank 0 named none: it runs no NCCL. */
    if (g == NULL || coll__gpus_parse(g + strlen(RDV_GPUS), &r->gpus) != 0) {
      memset(&r->gpus, 0, sizeof r->gpus);
      r->gpus.kind = COLL_GPUS_MISSING;
      r->gpus.rank_a = 0;
      r->gpus.rank_b = -1;
    }
    /* A rank beyond rank 0's world is not waited for by anyone: it alone
     * learns here that it was given another world size. */
    if (world != r->world)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "rendezvous at %s: rank 0 was given a world of %d "
                       "ranks, this rank (%d) a world of %d (WORLD_SIZE); "
                       "give every rank the same",
                       r->where, world, r->rank, r->world);
    coll__rdv_warn_open(r, hosts);
    return COLL_OK;
  }
  snprintf(key, sizeof key, "ack/%d", r->rank);
  (void)coll__store_set(r->store, key, "1", 1);
  /* "FAIL <status> <reason>": the status rank 0 failed with. */
  if (sscanf(v, "FAIL %d %n", &code, &off) < 1 || code <= 0 || off == 0)
    return coll__err(COLL_ERR_PROTOCOL, "rendezvous: rank 0 sent '%s'", v);
  return coll__err((coll_status_t)code, "%s", v + off);
}

static coll_status_t join(coll_rdv_t *r) {
  char key[RDV_KEY_MAX];
  int64_t n = 0;
  coll_setup_t su;
  coll_status_t s;
  /* Before joining, so rank 0 finds it once everyone joined. */
  coll__rdv_setup(r, &su);
  COLL_CHECK(coll__setup_compat_publish(&su));
  snprintf(key, sizeof key, "joined/%d", r->rank);
  COLL_CHECK(coll__store_add(r->store, key, 1, &n));
  if (n != 1)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "rendezvous at %s: rank %d joined twice (two processes "
                     "have RANK=%d%s)",
                     r->where, r->rank, r->rank,
                     r->authed ? ""
                               : ", or a process from outside the job joined "
                                 "as this rank: without COLL_AUTH_TOKEN anyone "
                                 "who reaches the store can");
  s = r->rank == 0 ? judge(r) : hear_verdict(r);
  if (s == COLL_OK && coll__rdv_test_hooks.phase != NULL)
    coll__rdv_test_hooks.phase(r->rank, "joined");
  return s;
}

/* Rank 0 serves the store on MASTER_ADDR:MASTER_PORT. */
static coll_status_t serve(coll_rdv_t *r, const coll_rdv_cfg_t *cfg) {
  char why[COLL_ERRMSG_MAX];
  const char *w;
  coll_status_t s = coll__store_server_start_for(
      cfg->master_ip, cfg->master_port, cfg->token, cfg->world, &r->server);
  if (s == COLL_OK) return COLL_OK;
  coll__err_save(why);
  w = strncmp(why, "store: ", 7) == 0 ? why + 7 : why;
  return coll__err(s,
                   "rank 0 cannot serve the rendezvous store (MASTER_ADDR=%s, "
                   "MASTER_PORT=%d): %s",
                   cfg->master_host, cfg->master_port, w);
}

coll_status_t coll__rdv_open(const coll_rdv_cfg_t *cfg, coll_rdv_t **out) {
  coll_rdv_t *r = calloc(1, sizeof *r);
  coll_status_t s;
  *out = NULL;
  if (r == NULL) return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: no memory");
  r->rank = cfg->rank;
  r->world = cfg->world;
  r->deadline_ms = cfg->deadline_ms;
  r->timeout_ms = cfg->deadline_ms < 0 ? -1 : cfg->timeout_ms;
  snprintf(r->where, sizeof r->where,
           strchr(cfg->master_ip, ':') ? "[%s]:%d" : "%s:%d", cfg->master_ip,
           cfg->master_port);
  snprintf(r->at, sizeof r->at, "rendezvous at %s", r->where);
  r->authed = cfg->token != NULL && cfg->token[0] != '\0';
  r->gpu_named = cfg->gpu != NULL && cfg->gpu[0] != '\0';
  r->gpus.kind = COLL_GPUS_MISSING; /* until rank 0 says otherwise */
  r->gpus.rank_b = -1;
  coll__setup_warn_init(&r->warn, coll__now_ms());
  if (r->rank == 0) COLL_CHECK_GOTO(serve(r, cfg), s, fail);
  COLL_CHECK_GOTO(coll__rdv_connect(r, cfg), s, fail);
  /* One end for the whole setup, not one timeout per request: a store
   * cut off halfway costs no rank more than its timeout and the end's
   * grace. */
  if (r->deadline_ms >= 0)
    coll__store_set_end(r->store, r->deadline_ms + COLL_RDV_END_MS);
  {
    /* Every rank says which host it is on, also where no transport is
     * chosen from it (NCCL): rank 0 counts the hosts. */
    char key[RDV_KEY_MAX], info[COLL_HOST_INFO_MAX], gpu[COLL_GPU_ID_MAX];
    if (cfg->host_info != NULL)
      snprintf(info, sizeof info, "%s", cfg->host_info);
    else
      coll__transport_host_info(COLL_TRANSPORT_AUTO, r->rank, info);
    if (r->gpu_named) {
      size_t used = strlen(info);
      coll__gpu_word(cfg->gpu, gpu);
      snprintf(info + used, sizeof info - used, " %s", gpu);
    }
    snprintf(key, sizeof key, "host/%d", r->rank);
    COLL_CHECK_GOTO(coll__store_set(r->store, key, info, strlen(info)), s,
                    fail);
  }
  COLL_CHECK_GOTO(join(r), s, fail);
  COLL_INFO(COLL_LOG_BOOT, "rendezvous at %s: all %d ranks joined", r->where,
            r->world);
  *out = r;
  return COLL_OK;
fail:
  coll__rdv_abandon(r);
  return s;
}

coll_store_t *coll__rdv_store(coll_rdv_t *r) { return r->store; }

void coll__rdv_gpus(const coll_rdv_t *r, coll_gpus_t *out) { *out = r->gpus; }

void coll__rdv_abandon(coll_rdv_t *r) {
  if (r == NULL) return;
  coll__store_close(r->store);
  if (r->server != NULL) {
    /* What the setup cost rank 0's store: it grows with the world size,
     * and no rank should make it grow faster (bench/setup-scale.sh). */
    coll_store_stats_t st;
    coll__store_server_stats(r->server, &st);
    COLL_INFO(COLL_LOG_BOOT, "rendezvous at %s: the store served %llu requests",
              r->where, (unsigned long long)st.requests);
    if (coll__rdv_test_hooks.store_served != NULL)
      coll__rdv_test_hooks.store_served(st.requests);
  }
  coll__store_server_stop(r->server);
  free(r->addrs);
  free(r->addrs_loaded);
  free(r);
}

coll_status_t coll__rdv_finish(coll_rdv_t *r) {
  char key[RDV_KEY_MAX];
  const char **keys = NULL;
  coll_status_t s;
  snprintf(key, sizeof key, "done/%d", r->rank);
  COLL_CHECK_GOTO(coll__store_set(r->store, key, "1", 1), s, out);
  if (r->rank != 0) goto out;
  keys = coll__rdv_rank_keys("done", r->world);
  if (keys == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
    goto out;
  }
  s = coll__store_wait(r->store, keys, r->world,
                       coll__remaining_ms(r->deadline_ms));
  if (s == COLL_ERR_TIMEOUT)
    s = name_missing(r, "done", "did not finish connecting",
                     "every rank finished, but too late");
out:
  free(keys);
  coll__rdv_abandon(r);
  return s;
}
