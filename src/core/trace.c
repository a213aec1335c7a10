/* SPDX-License-Identifier: Apache-2.0 */
/* trace.c: the flight recorder's ring: creating it from the environment,
 * and recording the start and end of each collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/trace_int.h"

static atomic_int g_next_id = 1;

static int64_t wall_offset_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - (int64_t)coll__now_ns();
}

coll_trace_t *coll__trace_new(int rank, int world, const char *backend,
                              const char *name) {
  coll_trace_t *t;
  /* COLL_TRACE_ENTRIES is within its bounds (core/env.h); 0 is off. */
  uint32_t cap = (uint32_t)coll__knob(COLL_ENV_TRACE_ENTRIES);
  const char *pattern = coll__knob_text(COLL_ENV_TRACE_FILE);
  if (pattern == NULL || cap == 0) return NULL;
  t = calloc(1, sizeof *t);
  if (t != NULL &&
      ((t->ring = calloc(cap, sizeof *t->ring)) == NULL ||
       (t->pattern = strdup(pattern)) == NULL || uv_mutex_init(&t->mu) != 0)) {
    free(t->ring);
    free(t->pattern);
    free(t);
    t = NULL;
  }
  if (t == NULL) {
    COLL_WARN(COLL_LOG_INIT,
              "flight recorder: no memory for %u entries; "
              "this comm records nothing",
              cap);
    return NULL;
  }
  atomic_init(&t->refs, 1);
  atomic_init(&t->dumps, 0);
  t->cap = cap;
  t->next_seq = 1;
  t->rank = rank;
  t->world = world;
  t->id = atomic_fetch_add(&g_next_id, 1);
  snprintf(t->backend, sizeof t->backend, "%s", backend);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->wall_offset_ns = wall_offset_ns();
  coll__trace_register(t);
  return t;
}

void coll__trace_ref(coll_trace_t *t) {
  atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void coll__trace_release(coll_trace_t *t) {
  if (t == NULL) return;
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  /* After this no SIGUSR1 dump can reach t. */
  coll__trace_unregister(t);
  uv_mutex_destroy(&t->mu);
  free(t->pattern);
  free(t->ring);
  free(t);
}

/* A batch's dtype: its buffers', or -2 when they differ. */
static int batch_dtype(const coll_work_t *w, uint64_t *count) {
  int dt = -1;
  size_t i;
  *count = 0;
  for (i = 0; i < w->nbufs; i++) {
    *count += w->bufs[i].count;
    if (i == 0)
      dt = (int)w->bufs[i].dtype;
    else if (dt != (int)w->bufs[i].dtype)
      dt = -2;
  }
  return dt;
}

static void describe(const coll_work_t *w, coll_trace_entry_t *e) {
  e->what = coll__work_what(w);
  e->dtype = (int)w->dtype;
  e->count = w->count;
  e->redop = -1;
  e->root = -1;
  e->p2p = w->kind == COLL_WORK_SEND || w->kind == COLL_WORK_RECV;
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_PREMUL_SUM:
      if (w->batch || w->nbufs > 0) e->dtype = batch_dtype(w, &e->count);
      e->redop = w->kind == COLL_WORK_PREMUL_SUM ? (int)COLL_SUM : (int)w->op;
      break;
    case COLL_WORK_REDUCE_SCATTER: e->redop = (int)w->op; break;
    case COLL_WORK_REDUCE:
      e->redop = (int)w->op;
      e->root = w->root;
      break;
    case COLL_WORK_BROADCAST:
    case COLL_WORK_SEND:
    case COLL_WORK_RECV: e->root = w->root; break;
    case COLL_WORK_BARRIER:
      e->dtype = -1;
      e->count = 0;
      break;
    case COLL_WORK_NEGOTIATE:
      e->dtype = -1;
      e->count = 0;
      break;
    case COLL_WORK_GATHER:
    case COLL_WORK_SCATTER: e->root = w->root; break;
    case COLL_WORK_ALLTOALL:
      if (w->nbufs > 0) e->count = 0; /* per rank: none to show */
      break;
    case COLL_WORK_ALLGATHER:
    case COLL_WORK_FEDAVG: break;
  }
}

uint64_t coll__trace_begin(coll_trace_t *t, const coll_work_t *w) {
  coll_trace_entry_t e;
  uint64_t seq;
  describe(w, &e);
  e.start_ns = coll__now_ns();
  e.end_ns = 0;
  e.done = 0;
  e.status = COLL_OK;
  e.peer = -1;
  uv_mutex_lock(&t->mu);
  seq = t->next_seq++;
  e.seq = seq;
  t->ring[(seq - 1) % t->cap] = e;
  uv_mutex_unlock(&t->mu);
  return seq;
}

void coll__trace_end(coll_trace_t *t, uint64_t seq, coll_status_t s, int peer) {
  coll_trace_entry_t *e;
  uint64_t now = coll__now_ns();
  int first = 0;
  if (t == NULL || seq == 0) return;
  uv_mutex_lock(&t->mu);
  e = &t->ring[(seq - 1) % t->cap];
  if (e->seq == seq && !e->done) {
    e->done = 1;
    e->end_ns = now;
    e->status = s;
    /* A send or receive that failed waited on its own peer. */
    if (s != COLL_OK && peer < 0 && e->p2p) peer = e->root;
    e->peer = s != COLL_OK ? peer : -1;
    first = 1;
  }
  uv_mutex_unlock(&t->mu);
  if (first && s == COLL_ERR_TIMEOUT) (void)coll__trace_dump(t, "timeout");
}

void coll__trace_set_desync(coll_trace_t *t, const char *report) {
  if (t == NULL || report == NULL) return;
  uv_mutex_lock(&t->mu);
  if (t->desync[0] == '\0') snprintf(t->desync, sizeof t->desync, "%s", report);
  uv_mutex_unlock(&t->mu);
}
