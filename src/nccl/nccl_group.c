/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_group.c: groups, one process driving several CUDA devices:
 * collectives over one buffer per device, and split into per-rank comms for
 * worker threads. The comms are made the way ncclCommInitAll makes them (one
 * unique id, one ncclCommInitRankConfig per device inside one NCCL group),
 * but nonblocking, so the init is bounded and abortable. Every call leaves
 * the caller's current CUDA device as it found it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "cuda/cuda_util.h"
#include "nccl/nccl_async.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_rank.h"

struct coll_group {
  int ndev;
  int *devs;
  coll_comm_t **comms;        /* NULL once split */
  coll_abort_handle_t *abort; /* the group's: aborts every comm it made */
};

static coll_status_t check_devices(const coll_nccl_table_t *t,
                                   const int *devices, int ndev) {
  int count = 0, i, j;
  cudaError_t e = t->cuda_get_device_count(&count);
  if (e != cudaSuccess) return coll__cuda_result(t, e, "group_create");
  for (i = 0; i < ndev; i++) {
    if (devices[i] < 0)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "group_create: device %d (entry %d) is negative",
                       devices[i], i);
    if (devices[i] >= count)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "group_create: device %d (entry %d) is not present; %d "
                       "CUDA device(s) are visible",
                       devices[i], i, count);
    for (j = 0; j < i; j++)
      if (devices[j] == devices[i])
        return coll__err(COLL_ERR_INVALID_ARG,
                         "group_create: device %d is listed twice (entries %d "
                         "and %d)",
                         devices[i], j, i);
  }
  return COLL_OK;
}

static void group_free(coll_group_t *g) {
  if (g == NULL) return;
  free(g->devs);
  free(g->comms);
  coll_abort_handle_release(g->abort);
  free(g);
}

/* Wraps the NCCL comms into coll comms, each linked to the group's abort
 * handle; on failure frees them all. */
static coll_status_t wrap_all(const coll_nccl_table_t *t, coll_group_t *g,
                              ncclComm_t *ncs, const coll_comm_config_t *cfg) {
  coll_comm_config_t each = COLL_COMM_CONFIG_INIT;
  const char *base = coll__nccl_config_name(cfg);
  char name[64];
  coll_status_t s = COLL_OK;
  int i;
  each.timeout_ms = coll__config_timeout_ms(cfg);
  for (i = 0; i < g->ndev; i++) {
    each.name = NULL;
    if (base != NULL) {
      snprintf(name, sizeof name, "%.40s/%d", base, i);
      each.name = name;
    }
    s = coll__nccl_comm_wrap(t, ncs[i], g->devs[i], i, g->ndev, &each,
                             &g->comms[i]);
    if (s == COLL_OK) s = coll__abort_handle_link(g->abort, g->comms[i]->abort);
    if (s != COLL_OK) break;
  }
  if (s == COLL_OK) return COLL_OK;
  for (int k = i + 1; k < g->ndev; k++) t->nccl_comm_abort(ncs[k]);
  if (g->comms[i] != NULL) coll_comm_destroy(g->comms[i]);
  while (--i >= 0) coll_comm_destroy(g->comms[i]);
  return s;
}

/* ncclCommInitAll, nonblocking: every device's init inside one NCCL group,
 * then each comm's state polled with the deadline and the group's handle. */
static coll_status_t init_all(const coll_nccl_table_t *t, coll_group_t *g,
                              ncclComm_t *ncs, const coll_comm_config_t *cfg) {
  int64_t timeout = coll__config_timeout_ms(cfg);
  coll_nccl_watch_t w;
  ncclConfig_t config;
  ncclUniqueId id;
  ncclResult_t r, r_end;
  coll_status_t s = COLL_OK;
  coll_cuda_saved_t cur;
  int i;
  r = t->nccl_get_unique_id(&id);
  if (r != ncclSuccess) return coll__nccl_result(t, r, NULL, "ncclGetUniqueId");
  coll__nccl_config(&config, coll__nccl_config_name(cfg));
  r = t->nccl_group_start();
  if (r != ncclSuccess) return coll__nccl_result(t, r, NULL, "ncclGroupStart");
  for (i = 0; i < g->ndev && s == COLL_OK; i++) {
    s = coll__cuda_device_enter(t, g->devs[i], &cur, "group_create");
    if (s != COLL_OK) break;
    r = t->nccl_comm_init_rank_config(&ncs[i], g->ndev, id, i, &config);
    if (r != ncclSuccess && r != ncclInProgress)
      s = coll__nccl_result(t, r, NULL, "ncclCommInitRankConfig");
  }
  r_end = t->nccl_group_end();
  if (s == COLL_OK && r_end != ncclSuccess && r_end != ncclInProgress)
    s = coll__nccl_result(t, r_end, NULL, "ncclGroupEnd");
  if (s == COLL_OK) s = coll__nccl_env_check("group_create");
  memset(&w, 0, sizeof w);
  w.t = t;
  w.aborted = &g->abort->aborted;
  w.deadline_ms = coll__deadline(timeout);
  for (i = 0; i < g->ndev && s == COLL_OK; i++) {
    w.nc = ncs[i];
    s = coll__nccl_watch_wait(&w, "ncclCommInitRankConfig");
    if (s == COLL_ERR_TIMEOUT)
      s = coll__err(COLL_ERR_TIMEOUT,
                    "NCCL's init of device %d (entry %d of %d) did not finish "
                    "within %lld ms",
                    g->devs[i], i, g->ndev, (long long)timeout);
  }
  if (s != COLL_OK)
    for (i = 0; i < g->ndev; i++)
      if (ncs[i] != NULL) t->nccl_comm_abort(ncs[i]);
  return s;
}

coll_status_t coll_group_create(const int *devices, int ndev,
                                coll_group_t **out) {
  return coll_group_create_config(devices, ndev, NULL, out);
}

coll_status_t coll_group_create_config(const int *devices, int ndev,
                                       const coll_comm_config_t *cfg,
                                       coll_group_t **out) {
  const coll_nccl_table_t *t = NULL;
  coll_abort_handle_t *h = coll__config_abort_handle(cfg);
  coll_group_t *g = NULL;
  ncclComm_t *ncs = NULL;
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT;
  coll_status_t s;
  coll__err_clear();
  if (out != NULL) *out = NULL;
  if (out == NULL || devices == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "group_create: %s is NULL",
                     out == NULL ? "out" : "devices");
  if (ndev < 1)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "group_create: the device list is empty (ndev %d)", ndev);
  COLL_CHECK(coll__config_check(cfg, "group_create"));
  if (coll__knobs_load() != COLL_OK) {
    coll__err_prefix("group_create");
    return COLL_ERR_INVALID_ARG;
  }
  COLL_CHECK(coll__nccl_ready("group_create", &t));
  COLL_CHECK(coll__nccl_env_check("group_create"));
  COLL_CHECK(check_devices(t, devices, ndev));
  g = calloc(1, sizeof *g);
  ncs = calloc((size_t)ndev, sizeof *ncs);
  if (g == NULL || ncs == NULL ||
      (g->devs = malloc((size_t)ndev * sizeof(int))) == NULL ||
      (g->comms = calloc((size_t)ndev, sizeof *g->comms)) == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "group_create: out of memory");
    goto done;
  }
  if (h != NULL) {
    COLL_CHECK_GOTO(coll__abort_handle_bind(h, "group_create"), s, done);
    atomic_store(&h->adopted, 1);
    coll__abort_handle_ref(h);
    g->abort = h;
  } else {
    COLL_CHECK_GOTO(coll__abort_handle_new(&g->abort), s, done);
    atomic_store(&g->abort->bound, 1);
  }
  g->ndev = ndev;
  memcpy(g->devs, devices, (size_t)ndev * sizeof(int));
  COLL_CHECK_GOTO(
      coll__cuda_device_enter(t, devices[0], &saved, "group_create"), s, done);
  COLL_CHECK_GOTO(init_all(t, g, ncs, cfg), s, done);
  COLL_CHECK_GOTO(wrap_all(t, g, ncs, cfg), s, done);
  *out = g;
  g = NULL;
done:
  if (s != COLL_OK) coll__err_prefix("group_create");
  if (t != NULL) coll__cuda_device_leave(t, saved);
  free(ncs);
  group_free(g);
  return s;
}

coll_status_t coll_group_abort_handle(coll_group_t *g,
                                      coll_abort_handle_t **out) {
  coll__err_clear();
  if (out != NULL) *out = NULL;
  if (g == NULL || out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "group_abort_handle: %s is NULL",
                     g == NULL ? "group" : "out");
  coll__abort_handle_ref(g->abort);
  *out = g->abort;
  return COLL_OK;
}

/* Checks shared by the group collectives. */
static coll_status_t check_call(coll_group_t *g, void *const *bufs, int nbufs,
                                size_t count, coll_dtype_t dt,
                                void *const *streams, int nstreams,
                                const char *what) {
  size_t esz = coll_dtype_size(dt);
  int i;
  if (g == NULL || bufs == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: %s is NULL", what,
                     g == NULL ? "group" : "bufs");
  if (g->comms == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: the group was split; use its per-rank comms", what);
  if (nbufs != g->ndev)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: %d buffers for a group of %d devices", what, nbufs,
                     g->ndev);
  if (nstreams != 0 && nstreams != g->ndev)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: nstreams is %d; it must be 0 (default streams) or "
                     "the group size %d",
                     what, nstreams, g->ndev);
  if (nstreams != 0 && streams == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: streams is NULL", what);
  for (i = 0; i < nstreams; i++)
    COLL_CHECK(coll__nccl_check_stream(streams[i], what));
  if (esz == 0)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid dtype %d", what,
                     (int)dt);
  if (count > SIZE_MAX / esz)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: count %zu overflows", what,
                     count);
  for (i = 0; i < g->ndev; i++) {
    coll_comm_t *c = g->comms[i];
    char which[64];
    if (bufs[i] == NULL && count > 0)
      return coll__err(COLL_ERR_INVALID_ARG, "%s: bufs[%d] is NULL", what, i);
    snprintf(which, sizeof which, "%s: bufs[%d]", what, i);
    COLL_CHECK(c->ops->check_buffer(c, bufs[i], count * esz, which));
  }
  return COLL_OK;
}

static void unlock_guards(coll_group_t *g, int n) {
  while (--n >= 0) uv_mutex_unlock(&g->comms[n]->abort->guard);
}

/* Marks the comms as inside an outer NCCL group (a failure is recorded,
 * its abort waits) or, closing it, aborts those that failed. Under every
 * comm's guard. */
static void group_mark(coll_group_t *g, int in_group) {
  int i;
  for (i = 0; i < g->ndev; i++) {
    coll_nccl_be_t *be = g->comms[i]->be;
    be->in_group = in_group;
    if (!in_group) coll__nccl_fail_flush(be);
  }
}

/* 1 if a comm of the group failed (NCCL returned an error for its call
 * inside the open group). */
static int group_failed(coll_group_t *g) {
  int i;
  for (i = 0; i < g->ndev; i++)
    if (atomic_load(&((coll_nccl_be_t *)g->comms[i]->be)->failed)) return 1;
  return 0;
}

/* Enqueues w on every device inside one NCCL group (the single-thread rule
 * for several devices) under every comm's issue guard, then waits outside
 * the guards. A failure inside the group is recorded and the comms are
 * aborted only once the group is closed (N14 of the second review): NCCL
 * fails every comm of a group that failed (group.cc:381-390). */
static coll_status_t group_run(coll_group_t *g, coll_work_t *w,
                               void *const *bufs, void *const *streams,
                               int nstreams, coll_nccl_req_t **reqs) {
  const char *what = coll__work_name(w->kind);
  const coll_nccl_table_t *t = ((coll_nccl_be_t *)g->comms[0]->be)->t;
  coll_status_t s = COLL_OK, s2;
  /* cur: scratch for the switches between devices; leave puts back what
   * the first enter saved. */
  coll_cuda_saved_t saved = COLL_CUDA_SAVED_INIT, cur;
  int i, locked = 0;
  ncclResult_t r, res = ncclSuccess;
  /* NCCL takes no call on a comm still in progress: settle them first,
   * outside the guards. */
  for (i = 0; i < g->ndev && s == COLL_OK; i++)
    s = coll__nccl_settle(g->comms[i]->be, what);
  if (s != COLL_OK) return s;
  for (; locked < g->ndev; locked++)
    uv_mutex_lock(&g->comms[locked]->abort->guard);
  for (i = 0; i < g->ndev && s == COLL_OK; i++)
    s = coll__nccl_usable(g->comms[i]->be, what);
  if (s != COLL_OK) goto done;
  COLL_CHECK_GOTO(coll__cuda_device_enter(t, g->devs[0], &saved, what), s,
                  done);
  for (i = 0; i < g->ndev && s == COLL_OK; i++) {
    s = coll__cuda_device_enter(t, g->devs[i], &cur, what);
    if (s == COLL_OK)
      s = coll__nccl_req_new(g->comms[i]->be, w,
                             nstreams ? (cudaStream_t)streams[i] : NULL,
                             &reqs[i]);
  }
  if (s != COLL_OK) goto done;
  r = t->nccl_group_start();
  if (r != ncclSuccess) {
    s = coll__nccl_result(t, r, NULL, what);
    goto done;
  }
  group_mark(g, 1);
  for (i = 0; i < g->ndev && s == COLL_OK; i++) {
    s = coll__cuda_device_enter(t, g->devs[i], &cur, what);
    w->recv = bufs[i];
    w->stream = nstreams ? streams[i] : NULL;
    if (s == COLL_OK)
      s = coll__nccl_enqueue(g->comms[i]->be, w, (cudaStream_t)w->stream, &r);
  }
  res = t->nccl_group_end();
  if (res != ncclSuccess && res != ncclInProgress) {
    for (i = 0; i < g->ndev; i++) {
      coll_nccl_be_t *be = g->comms[i]->be;
      be->lost_track = 1;
      s2 = coll__nccl_enqueue_error(be, res, what);
      if (s == COLL_OK) s = s2;
    }
  } else if (s != COLL_OK && group_failed(g)) {
    /* A call NCCL refused fails the whole group, every comm of it
     * (group.cc:381-390); a refusal of libcoll's reached no NCCL call and
     * sticks to none. */
    char why[COLL_ERRMSG_MAX];
    coll__err_save(why);
    for (i = 0; i < g->ndev; i++) {
      coll_nccl_be_t *be = g->comms[i]->be;
      if (!atomic_load(&be->failed)) coll__nccl_fail(be, s, 1);
    }
    coll__err_restore(why);
  }
  group_mark(g, 0);
  if (s != COLL_OK) goto done;
  /* The launch happened at ncclGroupEnd: record each event after it, on
   * its own device (or once each comm settles). */
  for (i = 0; i < g->ndev; i++) {
    s2 = coll__cuda_device_enter(t, g->devs[i], &cur, what);
    if (s2 == COLL_OK) s2 = coll__nccl_req_launched(reqs[i], res);
    if (s2 != COLL_OK && s == COLL_OK) s = s2;
  }
  unlock_guards(g, locked);
  locked = 0;
  for (i = 0; i < g->ndev; i++) {
    s2 = coll__nccl_req_wait(reqs[i]);
    reqs[i] = NULL;
    if (s == COLL_OK) s = s2;
  }
done:
  for (i = 0; i < g->ndev; i++)
    if (reqs[i] != NULL) coll__nccl_req_discard(reqs[i]);
  unlock_guards(g, locked);
  coll__cuda_device_leave(t, saved);
  return s;
}

static coll_status_t group_coll(coll_group_t *g, coll_work_t *w,
                                void *const *bufs, int nbufs,
                                void *const *streams, int nstreams) {
  const char *what =
      w->kind == COLL_WORK_BROADCAST ? "group_broadcast" : "group_allreduce";
  coll_nccl_req_t **reqs;
  coll_status_t s;
  COLL_CHECK(
      check_call(g, bufs, nbufs, w->count, w->dtype, streams, nstreams, what));
  if (w->kind == COLL_WORK_BROADCAST && (w->root < 0 || w->root >= g->ndev))
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: root %d is out of range for a group of %d devices",
                     what, w->root, g->ndev);
  if (w->kind == COLL_WORK_ALLREDUCE && (unsigned)w->op >= COLL_OP_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid op %d", what,
                     (int)w->op);
  reqs = calloc((size_t)g->ndev, sizeof *reqs);
  if (reqs == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  s = group_run(g, w, bufs, streams, nstreams, reqs);
  free(reqs);
  if (s != COLL_OK) coll__err_prefix(what);
  return s;
}

coll_status_t coll_group_allreduce(coll_group_t *g, void *const *bufs,
                                   int nbufs, size_t count, coll_dtype_t dt,
                                   coll_op_t op, void *const *streams,
                                   int nstreams) {
  coll_work_t w;
  coll__err_clear();
  memset(&w, 0, sizeof w);
  w.kind = COLL_WORK_ALLREDUCE;
  w.count = count;
  w.dtype = dt;
  w.op = op;
  return group_coll(g, &w, bufs, nbufs, streams, nstreams);
}

coll_status_t coll_group_broadcast(coll_group_t *g, void *const *bufs,
                                   int nbufs, size_t count, coll_dtype_t dt,
                                   int root, void *const *streams,
                                   int nstreams) {
  coll_work_t w;
  coll__err_clear();
  memset(&w, 0, sizeof w);
  w.kind = COLL_WORK_BROADCAST;
  w.count = count;
  w.dtype = dt;
  w.root = root;
  return group_coll(g, &w, bufs, nbufs, streams, nstreams);
}

int coll_group_size(const coll_group_t *g) {
  return (g == NULL || g->comms == NULL) ? 0 : g->ndev;
}

const int *coll_group_devices(const coll_group_t *g) {
  return (g == NULL || g->comms == NULL) ? NULL : g->devs;
}

coll_status_t coll_group_split(coll_group_t *g, coll_comm_t **comms) {
  coll__err_clear();
  if (g == NULL || comms == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "group_split: %s is NULL",
                     g == NULL ? "group" : "comms");
  if (g->comms == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "group_split: the group was already split");
  memcpy(comms, g->comms, (size_t)g->ndev * sizeof *comms);
  free(g->comms);
  g->comms = NULL;
  return COLL_OK;
}

coll_status_t coll_group_destroy(coll_group_t *g) {
  coll_status_t s = COLL_OK, s2;
  char first[COLL_ERRMSG_MAX] = "";
  int i;
  coll__err_clear();
  if (g == NULL) return COLL_OK;
  for (i = 0; g->comms != NULL && i < g->ndev; i++) {
    s2 = coll_comm_destroy(g->comms[i]);
    if (s == COLL_OK && s2 != COLL_OK) {
      s = s2;
      coll__err_save(first);
    }
  }
  group_free(g);
  if (s != COLL_OK) coll__err_restore(first);
  return s;
}
