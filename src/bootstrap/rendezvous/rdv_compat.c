/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_compat.c: the compatibility handshake at init. Every rank publishes
 * its library version, its wire version and the knobs that change what
 * travels on the wire (those core/env.h marks `agree`: the algorithm
 * choice, the ring threshold, the link probe, the segment size, the
 * descriptor check); rank 0 compares them once every rank joined
 * and fails the rendezvous on every rank at once, naming who runs what,
 * instead of letting ranks that cannot understand each other time out.
 * Through a caller's store (coll_comm_init_store) there is no rank 0 to
 * judge: every rank reads every record and reaches the same verdict. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/rdv_int.h"
#include "bootstrap/rendezvous/setup_check.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "transport/tcp/wire.h"

#define COMPAT_TEXT_MAX 200
/* In the rendezvous each rank writes its record before it joins, on the
 * same connection, so once every rank joined every record is there: rank 0
 * looks without waiting. Through a caller's store every rank waits for
 * every record instead, and reaches the verdict itself. */
#define COMPAT_GET_MS 0
#define COMPAT_GROUPS_SHOWN 4
/* Ends a record: the world size its rank was given. */
#define COMPAT_WORLD " world="

coll_rdv_test_hooks_t coll__rdv_test_hooks = COLL_RDV_TEST_HOOKS_OFF;

void coll__rdv_compat_text(int rank, char *out, size_t cap) {
  const coll_rdv_test_hooks_t *h = &coll__rdv_test_hooks;
  int version = coll_version();
  unsigned wire = COLL_TCP_WIRE_VERSION;
  char opts[COMPAT_TEXT_MAX];
  if (h->claim_rank == rank) {
    version = h->claim_version;
    wire = h->claim_wire;
  }
  /* The knobs every rank must set alike, as core/env.h declares them and
   * as parsed there: "unset" and an explicit default, or "RING" and
   * "ring", read the same. */
  coll__knobs_agreed_text(opts, sizeof opts);
  snprintf(out, cap, "libcoll %d.%d.%d wire %u (%s)", version / 10000,
           version / 100 % 100, version % 100, wire, opts);
}

/* Groups ranks by their text: group[r] is the index of r's group. */
static int group_ranks(char (*texts)[COMPAT_TEXT_MAX], int world, int *group) {
  int r, q, n = 0;
  for (r = 0; r < world; r++) {
    group[r] = -1;
    for (q = 0; q < r && group[r] < 0; q++)
      if (strcmp(texts[q], texts[r]) == 0) group[r] = group[q];
    if (group[r] < 0) group[r] = n++;
  }
  return n;
}

/* "rank 2 runs libcoll 0.1.0 wire 1 (...), ranks 0, 1, 3 run ..." with the
 * groups other than rank 0's first. */
static coll_status_t mismatch(const coll_setup_t *su,
                              char (*texts)[COMPAT_TEXT_MAX], const int *group,
                              int ngroups) {
  char msg[COLL_ERRMSG_MAX], ranks[160];
  int *members = malloc((size_t)su->world * sizeof *members);
  size_t used = 0;
  int g, k, q, shown = 0;
  if (members == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  msg[0] = '\0';
  for (k = 1; k <= ngroups && shown < COMPAT_GROUPS_SHOWN; k++) {
    int n = 0, first = -1;
    g = k % ngroups; /* rank 0's group (0) last */
    for (q = 0; q < su->world; q++)
      if (group[q] == g) {
        if (first < 0) first = q;
        members[n++] = q;
      }
    coll__format_ranks(ranks, sizeof ranks, members, n);
    if (used < sizeof msg)
      used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s %s %s %s",
                               shown ? ", " : "", n > 1 ? "ranks" : "rank",
                               ranks, n > 1 ? "run" : "runs", texts[first]);
    shown++;
  }
  free(members);
  return coll__err(COLL_ERR_PROTOCOL,
                   "%s: ranks built or configured incompatibly: %s", su->where,
                   msg);
}

/* After a wait for a record timed out: COLL_ERR_TIMEOUT naming the ranks
 * whose record is still missing (asked without waiting). */
static coll_status_t name_absent(const coll_setup_t *su) {
  int *missing = malloc((size_t)su->world * sizeof *missing), n = 0;
  char prefix[COLL_KV_KEY_MAX], ranks[300];
  coll_status_t s;
  if (missing == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "setup: out of memory");
  snprintf(prefix, sizeof prefix, "%scompat/", su->prefix);
  s = coll__kv_missing(su->ops, prefix, su->world, -1, missing, &n);
  if (s == COLL_OK && n == 0)
    s = coll__err(COLL_ERR_TIMEOUT,
                  "%s: not every rank arrived within %lld ms (every rank's "
                  "%s<rank> is there now: too late)",
                  su->where, (long long)su->timeout_ms, prefix);
  else if (s == COLL_OK) {
    coll__format_ranks(ranks, sizeof ranks, missing, n);
    s = coll__err(COLL_ERR_TIMEOUT,
                  "%s: %d of %d ranks did not arrive within %lld ms (no "
                  "%s<rank> in the store): rank%s %s",
                  su->where, n, su->world, (long long)su->timeout_ms, prefix,
                  n > 1 ? "s" : "", ranks);
  }
  free(missing);
  return s;
}

/* Rank q's record into text (COMPAT_TEXT_MAX bytes). */
static coll_status_t read_record(const coll_setup_t *su, int q, int wait,
                                 char *text) {
  char key[COLL_KV_KEY_MAX];
  size_t len = 0;
  coll_status_t s;
  snprintf(key, sizeof key, "%scompat/%d", su->prefix, q);
  s = coll__kv_get(su->ops, key, text, COMPAT_TEXT_MAX - 1, &len,
                   wait ? coll__remaining_ms(su->deadline_ms) : COMPAT_GET_MS);
  if (s == COLL_ERR_TIMEOUT && wait) return name_absent(su);
  if (s == COLL_ERR_LENGTH_MISMATCH || s == COLL_ERR_TIMEOUT ||
      (s == COLL_OK && len > COMPAT_TEXT_MAX - 1)) {
    /* Longer than any text this build writes (libcoll's store refuses to
     * cut it, a caller's reports its full length), or none although the
     * rank joined (its record precedes its join): another build. */
    snprintf(text, COMPAT_TEXT_MAX, "%s",
             s == COLL_ERR_TIMEOUT
                 ? "a libcoll without the compatibility record"
                 : "a build with a longer compatibility record");
    coll__err_clear();
    return COLL_OK;
  }
  if (s == COLL_OK) text[len] = '\0';
  return s;
}

coll_status_t coll__setup_compat_publish(const coll_setup_t *su) {
  char key[COLL_KV_KEY_MAX], compat[COMPAT_TEXT_MAX - 20];
  char record[COMPAT_TEXT_MAX];
  snprintf(key, sizeof key, "%scompat/%d", su->prefix, su->rank);
  coll__rdv_compat_text(su->rank, compat, sizeof compat);
  /* The world size rides along: ranks that disagree on it can never meet,
   * and the check below names them (it is not part of the text compared
   * as a whole, so the message can say what differs). */
  snprintf(record, sizeof record, "%s" COMPAT_WORLD "%d", compat, su->world);
  return coll__kv_set(su->ops, key, record, strlen(record));
}

/* Splits " world=<n>" off a record: returns n, or -1 for a record without
 * it (an older build). */
static int record_world(char *text) {
  char *w = strstr(text, COMPAT_WORLD), *end = NULL;
  long n;
  if (w == NULL) return -1;
  n = strtol(w + strlen(COMPAT_WORLD), &end, 10);
  *w = '\0';
  return end != NULL && *end == '\0' && n > 0 && n <= INT_MAX ? (int)n : -1;
}

/* COLL_ERR_INVALID_ARG naming the ranks q (of ranks[0..n)) whose world
 * worlds[k] is known and differs from this rank's, or COLL_OK. */
static coll_status_t worlds_agree(const coll_setup_t *su, const int *ranks,
                                  const int *worlds, int n) {
  char msg[COLL_ERRMSG_MAX / 2];
  size_t used = 0;
  int k, bad = 0;
  msg[0] = '\0';
  for (k = 0; k < n; k++) {
    if (worlds[k] < 0 || worlds[k] == su->world) continue;
    if (bad < COMPAT_GROUPS_SHOWN && used < sizeof msg)
      used +=
          (size_t)snprintf(msg + used, sizeof msg - used, "%srank %d has %d",
                           bad ? ", " : "", ranks[k], worlds[k]);
    bad++;
  }
  if (bad == 0) return COLL_OK;
  if (bad > COMPAT_GROUPS_SHOWN && used < sizeof msg)
    snprintf(msg + used, sizeof msg - used, " and %d more",
             bad - COMPAT_GROUPS_SHOWN);
  return coll__err(COLL_ERR_INVALID_ARG,
                   "%s: ranks disagree on the world size (WORLD_SIZE, or the "
                   "world given at init): %s, rank %d has %d; give every "
                   "rank the same",
                   su->where, msg, su->rank, su->world);
}

coll_status_t coll__setup_worlds_check(const coll_setup_t *su, const int *ranks,
                                       int n) {
  char text[COMPAT_TEXT_MAX];
  int *worlds = malloc((size_t)(n > 0 ? n : 1) * sizeof *worlds), k;
  coll_status_t s = COLL_OK;
  if (worlds == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "setup: out of memory");
  for (k = 0; k < n && s == COLL_OK; k++) {
    s = read_record(su, ranks[k], 0, text);
    worlds[k] = record_world(text);
  }
  if (s == COLL_OK) s = worlds_agree(su, ranks, worlds, n);
  free(worlds);
  return s;
}

int coll__setup_world_of(const coll_setup_t *su, int q) {
  char text[COMPAT_TEXT_MAX], why[COLL_ERRMSG_MAX];
  int w = -1;
  coll__err_save(why);
  if (read_record(su, q, 0, text) == COLL_OK) w = record_world(text);
  coll__err_restore(why);
  return w;
}

coll_status_t coll__setup_compat_check(const coll_setup_t *su, int wait) {
  char(*texts)[COMPAT_TEXT_MAX] = calloc((size_t)su->world, sizeof *texts);
  int *group = malloc((size_t)su->world * sizeof *group), q, ngroups;
  int *ranks = malloc((size_t)su->world * sizeof *ranks);
  coll_status_t s = COLL_OK;
  if (texts == NULL || group == NULL || ranks == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
    goto out;
  }
  for (q = 0; q < su->world && s == COLL_OK; q++)
    s = read_record(su, q, wait, texts[q]);
  if (s != COLL_OK) goto out;
  /* group[] holds each rank's world first, then its group. */
  for (q = 0; q < su->world; q++) {
    group[q] = record_world(texts[q]);
    ranks[q] = q;
  }
  s = worlds_agree(su, ranks, group, su->world);
  if (s != COLL_OK) goto out;
  ngroups = group_ranks(texts, su->world, group);
  if (ngroups > 1) s = mismatch(su, texts, group, ngroups);
out:
  free(texts);
  free(group);
  free(ranks);
  return s;
}
