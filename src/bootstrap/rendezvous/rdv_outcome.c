/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_outcome.c: the end of the setup is all or nothing. Once its part of
 * the mesh is connected (or has failed), every rank writes its outcome to
 * the store as "outcome/<r>" ("ok", or its status and error text); then
 * all of them return the same thing: COLL_OK when every outcome is "ok",
 * else the status of the lowest failing rank and one text naming every
 * failing rank and why. A rank that never reports (it died, or hangs) is
 * named by the others when the timeout and COLL_RDV_GRACE_MS have passed.
 * A rank whose setup was aborted (the config's abort handle) reports so
 * and returns at once, without waiting for the others. The same code
 * serves libcoll's own store (coll__rdv_conclude, below) and a caller's
 * (coll_comm_init_store): it needs only set and get.
 *
 * Who reads the outcomes: on libcoll's own store (`gather`), rank 0 reads
 * them all and sets its verdict, "outcome/all", which every other rank
 * reads: n gets and one set where every rank reading every outcome cost
 * n squared gets, all served by rank 0's store. Where that verdict does
 * not come by a rank's own hearing deadline (rank 0 died, hangs, or was
 * aborted and said "each"), the rank reads every outcome itself, so the
 * texts are those it would have reached alone. On a caller's store every
 * rank reads every outcome.
 *
 * In the rendezvous, rank 0 also keeps the store up until every rank has
 * read the verdict ("done/<r>"), for as long as the others keep using
 * the store within each COLL_RDV_GRACE_MS (linger, below). The limits:
 * the store lives in rank 0, so if rank 0 dies first the others fail with
 * the store's error, each with its own text; and a rank that dies after it
 * read "all ok" but before returning cannot be helped: the others have
 * returned COLL_OK and learn of it at their first collective
 * (COLL_ERR_PEER_LOST naming it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/rdv_int.h"
#include "bootstrap/rendezvous/setup_check.h"
#include "bootstrap/store/store_ext.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define OUTCOME_MAX (COLL_ERRMSG_MAX + 16)
/* Rank 0's verdict under `gather`; "each" asks every rank to hear all. */
#define VERDICT_KEY "outcome/all"
#define VERDICT_EACH "each"

/* The wait for everyone's word: our own deadline and a grace, so a rank
 * whose mesh failed exactly at the shared deadline still gets heard. */
static int64_t hear_deadline(const coll_setup_t *su) {
  return su->deadline_ms < 0 ? -1 : su->deadline_ms + COLL_RDV_GRACE_MS;
}

static coll_status_t publish(const coll_setup_t *su, coll_status_t mine) {
  char v[OUTCOME_MAX], key[COLL_KV_KEY_MAX];
  snprintf(key, sizeof key, "%soutcome/%d", su->prefix, su->rank);
  if (mine == COLL_OK)
    snprintf(v, sizeof v, "ok");
  else
    snprintf(v, sizeof v, "%d %s", (int)mine, coll_last_error());
  return coll__kv_set(su->ops, key, v, strlen(v));
}

/* Appends "; rank 3: why" to msg. */
static void add_part(char *msg, size_t cap, size_t *used, int rank,
                     const char *why) {
  if (*used >= cap) return;
  *used +=
      (size_t)snprintf(msg + *used, cap - *used, "; rank %d: %s", rank, why);
}

/* Every rank's outcome into out[q] (OUTCOME_MAX bytes each), waiting until
 * the hearing deadline; a rank still silent then gets "" and goes to
 * silent[0..*nsilent). Once the deadline passed the rest are asked without
 * waiting, so the silent ranks are all found in one pass. */
static coll_status_t hear(const coll_setup_t *su, char (*out)[OUTCOME_MAX],
                          int *silent, int *nsilent) {
  char key[COLL_KV_KEY_MAX];
  int64_t until = hear_deadline(su);
  coll_status_t s;
  int q;
  *nsilent = 0;
  for (q = 0; q < su->world; q++) {
    size_t len = 0;
    snprintf(key, sizeof key, "%soutcome/%d", su->prefix, q);
    s = coll__kv_get(su->ops, key, out[q], OUTCOME_MAX - 1, &len,
                     coll__remaining_ms(until));
    if (s == COLL_ERR_TIMEOUT) {
      out[q][0] = '\0';
      silent[(*nsilent)++] = q;
      continue;
    }
    if (s != COLL_OK) return s;
    out[q][len < OUTCOME_MAX - 1 ? len : OUTCOME_MAX - 1] = '\0';
  }
  coll__err_clear();
  return COLL_OK;
}

/* Every outcome (or the list of silent ranks) into one verdict. The silent
 * ranks come first in the text: a rank that died is the likely cause of
 * the others' failures (their meshes miss it). */
static coll_status_t agree(const coll_setup_t *su, char (*v)[OUTCOME_MAX],
                           const int *silent, int nsilent) {
  char names[300], parts[COLL_ERRMSG_MAX];
  int *failed = malloc((size_t)su->world * sizeof *failed), nfailed = 0, q, k;
  coll_status_t worst = COLL_OK, s = COLL_OK;
  size_t used = 0;
  if (failed == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "setup: out of memory");
  parts[0] = '\0';
  for (k = 0; k < nsilent; k++)
    add_part(parts, sizeof parts, &used, silent[k],
             "it did not report its setup outcome (it died or hangs)");
  for (q = 0, k = 0; q < su->world; q++) {
    int code = 0, off = 0;
    if (k < nsilent && silent[k] == q) {
      k++;
      failed[nfailed++] = q;
      if (worst == COLL_OK) worst = COLL_ERR_TIMEOUT;
      continue;
    }
    if (strcmp(v[q], "ok") == 0) continue;
    failed[nfailed++] = q;
    if (sscanf(v[q], "%d %n", &code, &off) < 1 || code <= 0) {
      code = COLL_ERR_PROTOCOL;
      off = 0;
    }
    if (worst == COLL_OK) worst = (coll_status_t)code;
    add_part(parts, sizeof parts, &used, q, v[q] + off);
  }
  if (nfailed == 0) goto out;
  coll__format_ranks(names, sizeof names, failed, nfailed);
  /* The names first, so truncation only ever cuts the reasons. */
  s = coll__err(worst, "setup failed on %d of %d ranks (rank%s %s)%s", nfailed,
                su->world, nfailed > 1 ? "s" : "", names, parts);
out:
  free(failed);
  return s;
}

/* Rank 0 under `gather`: sets the verdict the others read, `v` or, for
 * v NULL, "ok" when `agreed` is COLL_OK, else "<status> <text>". Keeps
 * this thread's error text: if the set fails, the others hear everyone
 * themselves at their deadline. */
static void tell(const coll_setup_t *su, coll_status_t agreed, const char *v) {
  char text[OUTCOME_MAX], key[COLL_KV_KEY_MAX], why[COLL_ERRMSG_MAX];
  coll__err_save(why);
  if (v == NULL && agreed == COLL_OK)
    v = "ok";
  else if (v == NULL) {
    snprintf(text, sizeof text, "%d %s", (int)agreed, why);
    v = text;
  }
  snprintf(key, sizeof key, "%s" VERDICT_KEY, su->prefix);
  (void)coll__kv_set(su->ops, key, v, strlen(v));
  coll__err_restore(why);
}

/* Ranks other than 0 under `gather`: waits for rank 0's verdict until this
 * rank's hearing deadline. *heard 1: the verdict came, its status in *out
 * and its text recorded; *heard 0: it did not come, or says "each". A
 * store failure is returned. */
static coll_status_t read_verdict(const coll_setup_t *su, int *heard,
                                  coll_status_t *out) {
  char v[OUTCOME_MAX], key[COLL_KV_KEY_MAX];
  size_t len = 0;
  int code = 0, off = 0;
  coll_status_t s;
  *heard = 0;
  snprintf(key, sizeof key, "%s" VERDICT_KEY, su->prefix);
  s = coll__kv_get(su->ops, key, v, OUTCOME_MAX - 1, &len,
                   coll__remaining_ms(hear_deadline(su)));
  if (s == COLL_ERR_TIMEOUT) {
    coll__err_clear();
    return COLL_OK;
  }
  if (s != COLL_OK) return s;
  v[len < OUTCOME_MAX - 1 ? len : OUTCOME_MAX - 1] = '\0';
  if (strcmp(v, VERDICT_EACH) == 0) return COLL_OK;
  *heard = 1;
  if (strcmp(v, "ok") == 0) {
    coll__err_clear();
    *out = COLL_OK;
  } else if (sscanf(v, "%d %n", &code, &off) < 1 || code <= 0 || off == 0) {
    *out =
        coll__err(COLL_ERR_PROTOCOL, "setup: rank 0 sent the verdict '%s'", v);
  } else {
    *out = coll__err((coll_status_t)code, "%s", v + off);
  }
  return COLL_OK;
}

coll_status_t coll__setup_outcome(const coll_setup_t *su, coll_status_t mine,
                                  int *agreed) {
  char(*v)[OUTCOME_MAX] = calloc((size_t)su->world, sizeof *v);
  int *silent = malloc((size_t)su->world * sizeof *silent), nsilent = 0;
  coll_status_t s;
  if (agreed != NULL) *agreed = 0;
  if (v == NULL || silent == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "setup: out of memory");
    goto out;
  }
  if (coll__rdv_test_hooks.phase != NULL)
    coll__rdv_test_hooks.phase(su->rank, "meshed");
  COLL_CHECK_GOTO(publish(su, mine), s, lost);
  if (mine == COLL_ERR_ABORTED) {
    /* The caller ended the setup through its abort handle: it asked not
     * to wait any longer. The others learn why from the outcome. */
    s = mine;
    if (su->gather && su->rank == 0) tell(su, mine, VERDICT_EACH);
    if (agreed != NULL) *agreed = 1;
    goto out;
  }
  if (coll__rdv_test_hooks.phase != NULL)
    coll__rdv_test_hooks.phase(su->rank, "hearing");
  if (su->gather && su->rank != 0) {
    coll_status_t said = COLL_OK;
    int heard = 0;
    COLL_CHECK_GOTO(read_verdict(su, &heard, &said), s, lost);
    if (heard) {
      s = said;
      if (agreed != NULL) *agreed = 1;
      goto done;
    }
  }
  COLL_CHECK_GOTO(hear(su, v, silent, &nsilent), s, lost);
  s = agree(su, v, silent, nsilent);
  if (su->gather && su->rank == 0) tell(su, s, NULL);
  if (agreed != NULL) *agreed = 1;
done:
  if (s == COLL_OK)
    COLL_INFO(COLL_LOG_BOOT, "setup: all %d ranks report success", su->world);
  goto out;
lost:
  coll__err_prefix(su->lost);
out:
  free(v);
  free(silent);
  return s;
}

/* ---- the rendezvous's end: libcoll's own store on rank 0 ---------------- */

/* Rank 0: keeps the store up until every rank read the verdict. With many
 * ranks on few cores the last reads it seconds after the first (and where
 * the verdict did not come, a rank reads n outcomes, a request each); as
 * they read in step, none may finish within a grace while all are still
 * reading (256 ranks on 2 cores, when every rank read n outcomes: the
 * store closed under them and the job failed). So rank 0 waits on for
 * as long as the store serves anyone else: a fresh COLL_RDV_GRACE_MS after
 * each grace in which it served more than this wait's own request, up to
 * the setup's deadline plus a grace. A rank that died before saying it
 * finished costs one grace once the others are done. */
/* Requests rank 0's store has served so far (0 without one). */
static uint64_t served(const coll_rdv_t *r) {
  coll_store_stats_t st;
  if (r->server == NULL) return 0;
  coll__store_server_stats(r->server, &st);
  return st.requests;
}

static void linger(coll_rdv_t *r) {
  const char **keys = coll__rdv_rank_keys("done", r->world);
  int64_t end = r->deadline_ms < 0 ? -1 : r->deadline_ms + COLL_RDV_GRACE_MS;
  int q = 0;
  if (keys == NULL) return;
  while (q < r->world) {
    uint64_t before = served(r);
    /* One key, one request: what else the store served is the others'. */
    if (coll__store_wait(r->store, &keys[q], 1, COLL_RDV_GRACE_MS) == COLL_OK) {
      q++;
      continue;
    }
    if (served(r) - before <= 1 || (end >= 0 && coll__now_ms() >= end)) break;
  }
  free(keys);
}

coll_status_t coll__rdv_conclude(coll_rdv_t *r, coll_status_t mine) {
  char key[COLL_RDV_KEY_MAX], why[COLL_ERRMSG_MAX];
  coll_setup_t su;
  coll_status_t s;
  int agreed = 0;
  coll__rdv_setup(r, &su);
  s = coll__setup_outcome(&su, mine, &agreed);
  if (!agreed) goto out; /* the store is gone: nobody to tell */
  /* From here the verdict stands, whatever happens to the store. */
  snprintf(key, sizeof key, "done/%d", r->rank);
  coll__err_save(why);
  (void)coll__store_set(r->store, key, "1", 1);
  if (r->rank == 0) linger(r);
  coll__err_restore(why);
out:
  coll__rdv_abandon(r);
  return s;
}
