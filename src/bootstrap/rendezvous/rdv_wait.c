/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_wait.c: the rendezvous's waits, and what a rank says during them:
 * reaching the store, rank 0 waiting for every rank to join, the others
 * waiting for its verdict. A start-up mistake (ports that differ, a rank
 * that never started, a token that differs) would otherwise be silent for
 * the whole timeout: a wait that goes on logs a WARN on every rank
 * (core/setup_warn.h) naming who is missing and what this rank sees, and
 * a rank that joined with another world size ends the wait at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/rdv_int.h"
#include "bootstrap/store/store_ext.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

/* Refusal notes read for the missing ranks, at most (each is a request). */
#define RDV_NOTES_MAX 4
#define RDV_CHECK_HINT "check MASTER_ADDR/MASTER_PORT/WORLD_SIZE on every rank"

/* ---- reaching the store ------------------------------------------------- */

coll_status_t coll__rdv_connect(coll_rdv_t *r, const coll_rdv_cfg_t *cfg) {
  coll_store_dial_t d;
  coll_status_t s;
  char why[COLL_ERRMSG_MAX], waited[16];
  memset(&d, 0, sizeof d);
  d.host = cfg->master_ip;
  d.port = cfg->master_port;
  d.token = cfg->token;
  d.rank = r->rank;
  /* In slices, each ending at the next warning; the store's refusal of
   * this rank (a token that differs, a full store) ends the loop. */
  for (;;) {
    int64_t until = coll__setup_warn_until(&r->warn, r->deadline_ms);
    d.timeout_ms = until < 0 ? -1 : coll__remaining_ms(until);
    s = coll__store_dial(&d, &r->store);
    if (s != COLL_ERR_TIMEOUT || coll__remaining_ms(r->deadline_ms) == 0) break;
    if (coll__setup_warn_due(&r->warn))
      COLL_WARN(COLL_LOG_BOOT,
                "rank %d: setup waiting %s: cannot reach the store at %s "
                "(MASTER_ADDR=%s, MASTER_PORT=%d): %s; " RDV_CHECK_HINT
                " (rank 0 serves the store)",
                r->rank, coll__setup_warn_waited(&r->warn, waited), r->where,
                cfg->master_host, cfg->master_port,
                d.why[0] != '\0' ? d.why : "no answer");
  }
  if (s != COLL_ERR_TIMEOUT || r->rank == 0) return s;
  coll__err_save(why);
  return coll__err(s, "rendezvous: rank 0 is missing: %s", why);
}

/* ---- who is missing, and what the store saw of them --------------------- */

coll_status_t coll__rdv_missing(coll_rdv_t *r, const char *prefix, int *missing,
                                int *n) {
  const char **keys = coll__rdv_rank_keys(prefix, r->world);
  coll_status_t s;
  *n = 0;
  if (keys == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  s = coll__store_missing(r->store, keys, r->world, missing, n);
  free(keys);
  return s;
}

int coll__rdv_describe(coll_rdv_t *r, const int *missing, int n, char *out,
                       size_t cap) {
  char ranks[300], key[48], note[COLL_ERRMSG_MAX / 2], why[COLL_ERRMSG_MAX];
  size_t used;
  int k, noted = 0;
  coll__format_ranks(ranks, sizeof ranks, missing, n);
  used = (size_t)snprintf(out, cap, "rank%s %s", n > 1 ? "s" : "", ranks);
  /* What the store refused of clients that said they were these ranks:
   * the likely reason they are missing. */
  coll__err_save(why);
  for (k = 0; k < n && k < RDV_NOTES_MAX && used < cap; k++) {
    size_t len = 0;
    char *why_there;
    snprintf(key, sizeof key, COLL_STORE_REFUSED_KEY "%d", missing[k]);
    if (coll__store_get(r->store, key, note, sizeof note - 1, &len, 0) !=
        COLL_OK)
      continue;
    note[len] = '\0';
    /* "<address>: <why>"; an IPv6 address has colons, but no ": ". */
    why_there = strstr(note, ": ");
    if (why_there == NULL) continue;
    *why_there = '\0';
    used +=
        (size_t)snprintf(out + used, cap - used,
                         "%sthe store refused a client at %s that said "
                         "it was rank %d: %s",
                         noted ? "; " : " (", note, missing[k], why_there + 2);
    noted++;
  }
  if (noted > 0 && used < cap) snprintf(out + used, cap - used, ")");
  coll__err_restore(why);
  return noted;
}

/* ---- rank 0 waiting for every rank to join ------------------------------ */

/* The ranks that joined, out of the missing ones (increasing). */
static int joined_of(const coll_rdv_t *r, const int *missing, int n,
                     int *joined) {
  int q, k = 0, j = 0;
  for (q = 1; q < r->world; q++) {
    while (k < n && missing[k] < q) k++;
    if (k < n && missing[k] == q) continue;
    joined[j++] = q;
  }
  return j;
}

/* Rank 0 at a warning: a rank given another world size ends the wait
 * (COLL_ERR_INVALID_ARG); else the WARN says who is missing. */
static coll_status_t judge_tick(coll_rdv_t *r) {
  int *missing = malloc((size_t)r->world * 2 * sizeof *missing);
  int *joined = missing + r->world, n = 0, nj;
  char text[COLL_ERRMSG_MAX], waited[16];
  coll_setup_t su;
  coll_status_t s;
  if (missing == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  s = coll__rdv_missing(r, "joined", missing, &n);
  if (s == COLL_OK) {
    nj = joined_of(r, missing, n, joined);
    coll__rdv_setup(r, &su);
    s = coll__setup_worlds_check(&su, joined, nj);
  }
  if (s == COLL_OK && n > 0) {
    coll__rdv_describe(r, missing, n, text, sizeof text);
    COLL_WARN(COLL_LOG_BOOT,
              "rank 0: setup waiting %s: %d of %d ranks have not joined "
              "the store at %s: %s; " RDV_CHECK_HINT,
              coll__setup_warn_waited(&r->warn, waited), n, r->world, r->where,
              text);
  }
  free(missing);
  return s;
}

coll_status_t coll__rdv_wait_joined(coll_rdv_t *r) {
  const char **keys = coll__rdv_rank_keys("joined", r->world);
  coll_status_t s;
  if (keys == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: no memory");
  for (;;) {
    int64_t until = coll__setup_warn_until(&r->warn, r->deadline_ms);
    s = coll__store_wait(r->store, keys, r->world, coll__remaining_ms(until));
    if (s != COLL_ERR_TIMEOUT || coll__remaining_ms(r->deadline_ms) == 0 ||
        !coll__store_usable(r->store))
      break;
    if (coll__setup_warn_due(&r->warn)) {
      s = judge_tick(r);
      if (s != COLL_OK) break;
    }
  }
  free(keys);
  return s;
}

/* ---- the others waiting for rank 0's verdict ---------------------------- */

/* A rank other than 0 at a warning: who is missing as the store shows it,
 * and rank 0's world size where it differs from this rank's. */
static void verdict_tick(coll_rdv_t *r) {
  int *missing = malloc((size_t)r->world * sizeof *missing), n = 0, w0;
  char text[COLL_ERRMSG_MAX], world[160] = "", why[COLL_ERRMSG_MAX];
  char waited[16];
  coll_setup_t su;
  if (missing == NULL) return;
  coll__err_save(why);
  coll__rdv_setup(r, &su);
  w0 = coll__setup_world_of(&su, 0);
  if (w0 > 0 && w0 != r->world)
    snprintf(world, sizeof world,
             "; rank 0 was given a world of %d ranks, this rank %d "
             "(WORLD_SIZE)",
             w0, r->world);
  if (coll__rdv_missing(r, "joined", missing, &n) == COLL_OK && n > 0) {
    coll__rdv_describe(r, missing, n, text, sizeof text);
    COLL_WARN(COLL_LOG_BOOT,
              "rank %d: setup waiting %s: joined the store at %s, but %d "
              "of %d ranks have not: %s%s; " RDV_CHECK_HINT,
              r->rank, coll__setup_warn_waited(&r->warn, waited), r->where, n,
              r->world, text, world);
  } else {
    COLL_WARN(COLL_LOG_BOOT,
              "rank %d: setup waiting %s: joined the store at %s; rank 0 "
              "has not said whether every rank joined%s; " RDV_CHECK_HINT,
              r->rank, coll__setup_warn_waited(&r->warn, waited), r->where,
              world);
  }
  coll__err_restore(why);
  free(missing);
}

coll_status_t coll__rdv_wait_verdict(coll_rdv_t *r, char *v, size_t cap,
                                     size_t *len) {
  /* Rank 0 speaks at its own deadline, which may fall a little later. */
  int64_t end = r->deadline_ms < 0 ? -1 : r->deadline_ms + COLL_RDV_GRACE_MS;
  coll_status_t s;
  for (;;) {
    int64_t until = coll__setup_warn_until(&r->warn, end);
    s = coll__store_get(r->store, "verdict", v, cap, len,
                        coll__remaining_ms(until));
    if (s != COLL_ERR_TIMEOUT || coll__remaining_ms(end) == 0 ||
        !coll__store_usable(r->store))
      return s;
    if (coll__setup_warn_due(&r->warn)) verdict_tick(r);
  }
}

/* ---- a job across hosts without a token --------------------------------- */

void coll__rdv_warn_open(const coll_rdv_t *r, int hosts) {
  coll_store_caps_t caps;
  if (r->authed || hosts < 2) return;
  coll__store_caps_for(r->world, &caps);
  COLL_WARN(COLL_LOG_BOOT,
            "rank %d: the %d ranks of this job span %d hosts and run without "
            "COLL_AUTH_TOKEN: anyone who can reach the store at %s can read "
            "every rank's address, join as a rank and write up to %zu KiB "
            "into it, and anyone who reaches a rank's listener can connect "
            "as a rank; give every rank the same secret COLL_AUTH_TOKEN "
            "(coll-run makes one for its ranks)",
            r->rank, r->world, hosts, r->where, caps.bytes / 1024);
}
