/* SPDX-License-Identifier: Apache-2.0 */
/* desync_rank.c: the desync scenarios and their check (desync_rank.h). */
#include "desync_rank.h"

#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "test_util.h"
#include "transport/transport.h"

#define DS_COUNT 1024
#define DS_TAG 7

void ds_shared_init(ds_shared_t *sh) {
  int r;
  memset(sh, 0, sizeof *sh);
  for (r = 0; r < DS_WORLD; r++) {
    atomic_init(&sh->done[r], 0);
    atomic_init(&sh->ready[r], 0);
    atomic_init(&sh->recorded[r], 0);
  }
  atomic_init(&sh->go, 0);
}

static void record(ds_shared_t *sh, int rank, coll_status_t s) {
  sh->status[rank] = (int)s;
  snprintf(sh->text[rank], DS_TEXT, "%s",
           s == COLL_OK ? "" : coll_last_error());
  atomic_store(&sh->recorded[rank], 1);
}

/* The odd rank stays in user code until every other rank's call returned
 * (bounded). */
static void wait_others(const ds_shared_t *sh) {
  int64_t end = test_now_ms() + DS_WAIT_MS;
  int r;
  for (r = 0; r < DS_WORLD; r++) {
    if (r == DS_ODD) continue;
    while (!atomic_load(&((ds_shared_t *)sh)->done[r]) && test_now_ms() < end)
      test_sleep_ms(5);
  }
}

/* The odd rank enters allreduce #2 only once its own endpoint heard of
 * the others' failure (bounded). Recursive doubling's two messages to it
 * left before the others timed out, so if its receives matched them
 * before it read the failure, its call would succeed. */
static void wait_failure_heard(coll_comm_t *c) {
  coll_transport_t *t = ((coll_cpu_t *)c->be)->t;
  coll_origin_t o;
  int64_t end = test_now_ms() + DS_WAIT_MS;
  while (!coll__t_origin(t, &o) && test_now_ms() < end) test_sleep_ms(5);
}

int ds_rank(coll_comm_t *c, int rank, ds_scenario_t sc, ds_shared_t *sh) {
  float buf[DS_COUNT];
  coll_status_t s;
  size_t got = 0;
  int i;
  for (i = 0; i < DS_COUNT; i++) buf[i] = (float)(rank + 1);
  s = coll_allreduce(c, buf, buf, DS_COUNT, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_OK || buf[0] != 10.0f || buf[DS_COUNT - 1] != 10.0f) {
    record(sh, rank, s != COLL_OK ? s : COLL_ERR_INTERNAL);
    return 1;
  }
  atomic_store(&sh->ready[rank], 1);
  if (rank == DS_ODD && sc == DS_SKIP) {
    wait_others(sh);
    if (sh->heard_first) wait_failure_heard(c);
    s = coll_allreduce(c, buf, buf, DS_COUNT, COLL_F32, COLL_SUM, NULL);
  } else if (rank == DS_ODD && sc == DS_RECV) {
    s = coll_recv(c, buf, DS_COUNT, COLL_F32, 0, DS_TAG, &got);
  } else {
    if (sc == DS_STOPPED && rank != DS_ODD) {
      int64_t end = test_now_ms() + DS_WAIT_MS;
      while (!atomic_load(&sh->go) && test_now_ms() < end) test_sleep_ms(5);
    }
    s = coll_allreduce(c, buf, buf, DS_COUNT, COLL_F32, COLL_SUM, NULL);
  }
  record(sh, rank, s);
  atomic_store(&sh->done[rank], 1);
  return 0;
}

/* What every rank's text must say of the odd rank. */
static const char *expected(ds_scenario_t sc) {
  switch (sc) {
    case DS_SKIP: return "rank 3 never entered it (last finished allreduce #1)";
    case DS_RECV: return "recv from rank 0 (tag 7)";
    case DS_STOPPED: return "3 did not answer";
  }
  return "?";
}

int ds_check(const ds_shared_t *sh, ds_scenario_t sc, char *msg, size_t cap) {
  int r;
  for (r = 0; r < DS_WORLD; r++) {
    const char *text = sh->text[r];
    const char *want =
        sc == DS_STOPPED && r == DS_ODD ? "timed out" : expected(sc);
    coll_status_t s = (coll_status_t)sh->status[r];
    if (!atomic_load(&((ds_shared_t *)sh)->recorded[r])) {
      snprintf(msg, cap, "rank %d recorded nothing", r);
      return -1;
    }
    /* The ranks in allreduce #2 time out, or fail because another one
     * did: TIMEOUT either way (README, failure table). */
    if (r != DS_ODD && s != COLL_ERR_TIMEOUT) {
      snprintf(msg, cap, "rank %d: want COLL_ERR_TIMEOUT, got %s: '%s'", r,
               coll_status_name(s), text);
      return -1;
    }
    if (s == COLL_OK) {
      snprintf(msg, cap, "rank %d: its call succeeded", r);
      return -1;
    }
    if (strstr(text, want) == NULL ||
        (sc != DS_RECV &&
         strstr(text, "allreduce #2 timed out after 1.0 s") == NULL)) {
      snprintf(msg, cap, "rank %d: the text does not say '%s': '%s'", r, want,
               text);
      return -1;
    }
  }
  return 0;
}
