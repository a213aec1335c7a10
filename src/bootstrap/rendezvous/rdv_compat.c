/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_compat.c: the compatibility handshake at init. Every rank publishes
 * its library version, its wire version and the options that change what
 * travels on the wire (the algorithm choice, the ring threshold, the segment
 * size, descriptor agreement); rank 0 compares them once every rank joined
 * and fails the rendezvous on every rank at once, naming who runs what,
 * instead of letting ranks that cannot understand each other time out. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/rdv_int.h"
#include "core/env.h"
#include "core/error.h"
#include "transport/tcp/wire.h"

#define COMPAT_TEXT_MAX 200
/* Each rank writes its record before it joins, on the same connection, so
 * once every rank joined every record is there: rank 0 looks without
 * waiting. */
#define COMPAT_GET_MS 0
#define COMPAT_GROUPS_SHOWN 4

coll_rdv_test_hooks_t coll__rdv_test_hooks = {-1, 0, 0, -1, NULL, NULL};

/* The value an option takes, the way its reader interprets it, so that
 * "unset" and an explicit default (or "RING" and "ring") compare equal. */
static void options_text(char *out, size_t cap) {
  const char *algo = coll__env(COLL_ENV_ALGO);
  char a[16] = "auto", thr[24] = "default", seg[24] = "default";
  const char *check = "default";
  int64_t v;
  size_t i;
  if (algo != NULL) {
    for (i = 0; algo[i] != '\0' && i + 1 < sizeof a; i++)
      a[i] = (char)tolower((unsigned char)algo[i]);
    a[i] = '\0';
  }
  if (coll__env_parse_int(COLL_ENV_RING_THRESHOLD, &v) == 1 && v >= 0)
    snprintf(thr, sizeof thr, "%lld", (long long)v);
  if (coll__env_parse_int(COLL_ENV_SEGMENT_BYTES, &v) == 1 && v >= 64)
    snprintf(seg, sizeof seg, "%lld", (long long)v);
  if (coll__env_parse_int(COLL_ENV_CHECK_MISMATCH, &v) == 1)
    check = v == 0 ? "0" : "1";
  snprintf(out, cap,
           "algo=%s ring_threshold=%s segment_bytes=%s "
           "check_mismatch=%s",
           a, thr, seg, check);
}

void coll__rdv_compat_text(int rank, char *out, size_t cap) {
  const coll_rdv_test_hooks_t *h = &coll__rdv_test_hooks;
  int version = coll_version();
  unsigned wire = COLL_TCP_WIRE_VERSION;
  char opts[COMPAT_TEXT_MAX];
  if (h->claim_rank == rank) {
    version = h->claim_version;
    wire = h->claim_wire;
  }
  options_text(opts, sizeof opts);
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
static coll_status_t mismatch(coll_rdv_t *r, char (*texts)[COMPAT_TEXT_MAX],
                              const int *group, int ngroups) {
  char msg[COLL_ERRMSG_MAX], ranks[160];
  int *members = malloc((size_t)r->world * sizeof *members);
  size_t used = 0;
  int g, k, q, shown = 0;
  if (members == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  msg[0] = '\0';
  for (k = 1; k <= ngroups && shown < COMPAT_GROUPS_SHOWN; k++) {
    int n = 0, first = -1;
    g = k % ngroups; /* rank 0's group (0) last */
    for (q = 0; q < r->world; q++)
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
                   "rendezvous at %s: ranks built or configured "
                   "incompatibly: %s",
                   r->where, msg);
}

coll_status_t coll__rdv_compat_check(coll_rdv_t *r) {
  char(*texts)[COMPAT_TEXT_MAX] = calloc((size_t)r->world, sizeof *texts);
  int *group = malloc((size_t)r->world * sizeof *group), q, ngroups;
  coll_status_t s = COLL_OK;
  if (texts == NULL || group == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
    goto out;
  }
  for (q = 0; q < r->world; q++) {
    char key[COLL_RDV_KEY_MAX];
    size_t len = 0;
    snprintf(key, sizeof key, "compat/%d", q);
    s = coll__store_get(r->store, key, texts[q], COMPAT_TEXT_MAX - 1, &len,
                        COMPAT_GET_MS);
    if (s == COLL_ERR_LENGTH_MISMATCH || s == COLL_ERR_TIMEOUT) {
      /* Longer than any text this build writes, or none although the rank
       * joined (its record precedes its join): another build. */
      snprintf(texts[q], COMPAT_TEXT_MAX, "%s",
               s == COLL_ERR_TIMEOUT
                   ? "a libcoll without the compatibility record"
                   : "a build with a longer compatibility record");
      len = strlen(texts[q]);
      s = COLL_OK;
    }
    if (s != COLL_OK) goto out;
    texts[q][len] = '\0';
  }
  ngroups = group_ranks(texts, r->world, group);
  if (ngroups > 1) s = mismatch(r, texts, group, ngroups);
out:
  free(texts);
  free(group);
  return s;
}
