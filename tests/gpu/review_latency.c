/* SPDX-License-Identifier: Apache-2.0 */
/* review_latency.c: two GPU steps that measure or probe rather than judge a
 * promise of the second NCCL review:
 *   rank2-latency  a rank of coll-run -n 2 on one GPU: an f32 sum allreduce
 *                  from 8 B to 64 MiB through libcoll (until the i-form
 *                  returned, until coll_wait did) and straight through NCCL
 *                  on a nonblocking comm of its own, driven as torch drives
 *                  one (poll ncclCommGetAsyncError until the work is on the
 *                  stream, then synchronise the stream)
 *   m6-probe       a process with a CUDA driver loaded and initialised but
 *                  no context runs a CPU allreduce of host buffers; libcoll
 *                  must not have made the primary context (M6 of the first
 *                  review)
 * NCCL is opened here on its own (COLL_NCCL_LIBRARY, else libnccl.so.2),
 * as is the driver (libcuda.so.1). */
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

/* nccl.h declares `ncclGroupStart()` without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "review.h"

typedef struct raw_nccl {
  ncclResult_t (*get_unique_id)(ncclUniqueId *id);
  ncclResult_t (*init)(ncclComm_t *c, int n, ncclUniqueId id, int rank,
                       ncclConfig_t *config);
  ncclResult_t (*async_error)(ncclComm_t c, ncclResult_t *e);
  ncclResult_t (*all_reduce)(const void *s, void *r, size_t n, ncclDataType_t,
                             ncclRedOp_t, ncclComm_t c, cudaStream_t st);
  ncclResult_t (*destroy)(ncclComm_t c);
  ncclResult_t (*abort)(ncclComm_t c);
  ncclComm_t comm;
} raw_nccl_t;

static int raw_load(raw_nccl_t *n) {
  const char *lib = getenv("COLL_NCCL_LIBRARY");
  void *dl = dlopen(lib != NULL && lib[0] ? lib : "libnccl.so.2",
                    RTLD_NOW | RTLD_LOCAL);
  void *f[6];
  int i;
  if (dl == NULL) return 0;
  f[0] = dlsym(dl, "ncclGetUniqueId");
  f[1] = dlsym(dl, "ncclCommInitRankConfig");
  f[2] = dlsym(dl, "ncclCommGetAsyncError");
  f[3] = dlsym(dl, "ncclAllReduce");
  f[4] = dlsym(dl, "ncclCommDestroy");
  f[5] = dlsym(dl, "ncclCommAbort");
  for (i = 0; i < 6; i++)
    if (f[i] == NULL) return 0;
  *(void **)&n->get_unique_id = f[0];
  *(void **)&n->init = f[1];
  *(void **)&n->async_error = f[2];
  *(void **)&n->all_reduce = f[3];
  *(void **)&n->destroy = f[4];
  *(void **)&n->abort = f[5];
  return 1;
}

/* The comm's state once it left ncclInProgress (bounded: 20 s). */
static ncclResult_t raw_settle(raw_nccl_t *n) {
  ncclResult_t state = ncclInProgress;
  double t0 = rv_now_ms();
  while (state == ncclInProgress) {
    if (n->async_error(n->comm, &state) != ncclSuccess)
      return ncclInternalError;
    if (state == ncclInProgress) {
      if (rv_now_ms() - t0 > 20000.0) return ncclInProgress;
      sched_yield();
    }
  }
  return state;
}

/* Rank 0's unique id to both ranks, through libcoll's comm. */
static int raw_open(rk_t *k, raw_nccl_t *n) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclResult_t r = ncclSuccess;
  coll_status_t s;
  memset(&id, 0, sizeof id);
  if (k->rank == 0) r = n->get_unique_id(&id);
  if (r != ncclSuccess || !rv_upload(k->label, k->dsend, &id, sizeof id))
    return 0;
  s = coll_broadcast(k->c, k->dsend, sizeof id, COLL_U8, 0, k->s);
  if (s != COLL_OK || !rv_download(k->label, &id, k->dsend, sizeof id, k->s))
    return 0;
  config.blocking = 0;
  r = n->init(&n->comm, 2, id, k->rank, &config);
  if (r == ncclInProgress) r = raw_settle(n);
  return r == ncclSuccess;
}

typedef struct lat {
  double issue, done;
} lat_t;

/* One size: libcoll's means and NCCL's, over iters after 3 of warm-up. */
static int measure(rk_t *k, raw_nccl_t *n, size_t count, int iters, lat_t *lib,
                   lat_t *raw) {
  coll_request_t *req = NULL;
  coll_status_t s = COLL_OK;
  double t0, t1, si = 0, sd = 0;
  int i;
  for (i = -3; i < iters && s == COLL_OK; i++) {
    t0 = rv_now_ms();
    s = coll_iallreduce(k->c, k->dsend, k->drecv, count, COLL_F32, COLL_SUM,
                        k->s, &req);
    t1 = rv_now_ms();
    if (s == COLL_OK) s = coll_wait(req);
    if (i >= 0) {
      si += t1 - t0;
      sd += rv_now_ms() - t0;
    }
  }
  if (s != COLL_OK) return 0;
  lib->issue = si * 1e3 / iters;
  lib->done = sd * 1e3 / iters;
  if (coll_barrier(k->c) != COLL_OK) return 0;
  si = sd = 0;
  for (i = -3; i < iters; i++) {
    ncclResult_t r;
    t0 = rv_now_ms();
    r = n->all_reduce(k->dsend, k->drecv, count, ncclFloat32, ncclSum, n->comm,
                      k->s);
    if (r == ncclInProgress) r = raw_settle(n);
    t1 = rv_now_ms();
    if (r != ncclSuccess || cudaStreamSynchronize(k->s) != cudaSuccess)
      return 0;
    if (i >= 0) {
      si += t1 - t0;
      sd += rv_now_ms() - t0;
    }
  }
  raw->issue = si * 1e3 / iters;
  raw->done = sd * 1e3 / iters;
  return coll_barrier(k->c) == COLL_OK;
}

int rv_rank2_latency(void) {
  enum { MAXN = 16 << 20 }; /* 64 MiB of f32 */
  raw_nccl_t n;
  lat_t lib, raw;
  size_t bytes, count;
  int sizes = 0, ok = 1;
  rk_t k;
  int rc = rk_open(&k, "rank2-latency", "nccl", 20000,
                   (size_t)MAXN * sizeof(float), 1);
  memset(&n, 0, sizeof n);
  if (rc != 1) {
    rk_close(&k);
    return rc == RV_EXIT_SKIP ? RV_EXIT_SKIP : 1;
  }
  if (!raw_load(&n) || !raw_open(&k, &n)) {
    rv_check(0, k.label, "NCCL of its own: could not load it or make a comm");
    goto out;
  }
  if (k.rank == 0)
    printf(
        "note: latency, us per f32 sum allreduce, 2 ranks on one GPU: "
        "size, libcoll issue/done, NCCL issue/done, libcoll - NCCL (done)\n");
  for (bytes = 8; bytes <= (size_t)MAXN * sizeof(float) && ok; bytes *= 8) {
    count = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
    ok = measure(&k, &n, count, bytes <= (1u << 20) ? 50 : 10, &lib, &raw);
    if (ok && k.rank == 0)
      printf(
          "note: latency %10zu B  libcoll %9.1f %9.1f  NCCL %9.1f %9.1f  "
          "+%.1f\n",
          bytes, lib.issue, lib.done, raw.issue, raw.done, lib.done - raw.done);
    sizes += ok;
  }
  fflush(stdout);
  rv_check(ok, k.label,
           "%d sizes from 8 B to 64 MiB through libcoll and through NCCL "
           "(the figures are the note lines of rank 0)",
           sizes);
out:
  if (n.comm != NULL &&
      (raw_settle(&n) != ncclSuccess || n.destroy(n.comm) != ncclSuccess))
    n.abort(n.comm);
  rk_close(&k);
  return rv_failures() ? 1 : 0;
}

/* ---- M6 ------------------------------------------------------------------ */

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_state_fn)(int dev, unsigned *flags, int *active);

typedef struct m6_rank {
  coll_comm_t *c;
  float buf[256];
  coll_status_t s;
} m6_rank_t;

static void m6_rank_main(void *p) {
  m6_rank_t *r = p;
  r->s = coll_allreduce(r->c, r->buf, r->buf, 256, COLL_F32, COLL_SUM, NULL);
}

/* The child: the driver initialised, no context, a CPU allreduce over two
 * threads; exit 0 when the primary context is still inactive, 1 when
 * libcoll made it, 2 when the probe could not run. */
static int m6_child(void) {
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  cu_init_fn cu_init;
  cu_state_fn cu_state;
  coll_transport_t *t[2];
  m6_rank_t r[2];
  uv_thread_t th[2];
  unsigned flags = 0;
  int active = -1, i;
  if (drv == NULL) return 2;
  *(void **)&cu_init = dlsym(drv, "cuInit");
  *(void **)&cu_state = dlsym(drv, "cuDevicePrimaryCtxGetState");
  if (cu_init == NULL || cu_state == NULL || cu_init(0) != 0) return 2;
  if (coll_inproc_create(2, t) != COLL_OK) return 2;
  for (i = 0; i < 2; i++) {
    memset(&r[i], 0, sizeof r[i]);
    if (coll_comm_create(t[i], NULL, &r[i].c) != COLL_OK) return 2;
  }
  for (i = 0; i < 2; i++) uv_thread_create(&th[i], m6_rank_main, &r[i]);
  for (i = 0; i < 2; i++) uv_thread_join(&th[i]);
  for (i = 0; i < 2; i++) coll_comm_destroy(r[i].c);
  if (r[0].s != COLL_OK || r[1].s != COLL_OK) return 2;
  if (cu_state(0, &flags, &active) != 0) return 2;
  printf("note: m6-probe child: primary context of device 0 active = %d\n",
         active);
  fflush(stdout);
  return active ? 1 : 0;
}

int rv_m6_probe(void) {
  const char *name = "m6-probe";
  pid_t pid;
  int status = 0, code;
  fflush(stdout);
  pid = fork();
  if (pid < 0) return rv_check(0, name, "fork failed") ? 0 : 1;
  if (pid == 0) _Exit(m6_child());
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    rv_check(0, name, "the probe process did not exit normally");
    return 1;
  }
  code = WEXITSTATUS(status);
  if (code == 2) {
    rv_skip(name, "the driver or the CPU comms could not be set up here");
    return RV_EXIT_SKIP;
  }
  rv_check(code == 0, name,
           "a process with the CUDA driver initialised but no context ran a "
           "CPU allreduce of host buffers over two threads: the primary "
           "context of device 0 %s",
           code == 0 ? "stayed inactive (libcoll made none)"
                     : "became active: libcoll made a CUDA context (M6)");
  return rv_failures() ? 1 : 0;
}
