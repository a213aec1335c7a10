/* SPDX-License-Identifier: Apache-2.0 */
/* perf_standin.c: coll-perf over the NCCL stand-in (coll-perf-standin), for
 * the per-call cost of NCCL comms where no GPU is: `--threads N --nccl
 * --cost` runs libcoll's NCCL comms on the stand-in's devices, and beside
 * them the same allreduce straight through the stand-in's NCCL, driven as
 * torch drives a nonblocking comm (poll ncclCommGetAsyncError with
 * sched_yield until the work is on the stream). The stand-in launches from
 * a thread per group end as NCCL 2.28 does, so the difference is what
 * libcoll adds. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cuda/gpu_table.h"
#include "perf.h"
#include "standin.h"

static ncclUniqueId raw_id;

static int si_setup(int world) {
  const coll_nccl_table_t *t = coll__nccl_table();
  if (world > 16) {
    fprintf(stderr, "coll-perf-standin: at most 16 ranks\n");
    return -1;
  }
  return t->nccl_get_unique_id(&raw_id) == ncclSuccess ? 0 : -1;
}

static void si_select(int rank) { coll__nccl_table()->cuda_set_device(rank); }

static void *si_alloc(int rank, size_t bytes) {
  return standin_dev_alloc(rank, bytes);
}

static void si_free(void *p) {
  if (p != NULL) standin_dev_free(p);
}

/* Stand-in device memory is host memory; the calls that wrote it have
 * completed when these are used. */
static int si_upload(void *dev, const void *host, size_t bytes) {
  memcpy(dev, host, bytes);
  return 0;
}

static int si_download(void *host, const void *dev, size_t bytes) {
  memcpy(host, dev, bytes);
  return 0;
}

/* The state of a raw comm until it leaves ncclInProgress. */
static ncclResult_t settle(const coll_nccl_table_t *t, ncclComm_t c) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    if (t->nccl_comm_get_async_error(c, &state) != ncclSuccess)
      return ncclInternalError;
    if (state == ncclInProgress) sched_yield();
  }
  return state;
}

static void *si_raw_open(int rank, int world) {
  const coll_nccl_table_t *t = coll__nccl_table();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t c = NULL;
  ncclResult_t r;
  config.blocking = 0;
  si_select(rank);
  r = t->nccl_comm_init_rank_config(&c, world, raw_id, rank, &config);
  if (r == ncclInProgress) r = settle(t, c);
  if (r != ncclSuccess) {
    fprintf(stderr, "coll-perf-standin: rank %d: raw NCCL init: %d\n", rank,
            (int)r);
    return NULL;
  }
  return c;
}

static int si_raw_call(void *raw, const void *send, void *recv, size_t count,
                       double *issue_us, double *done_us) {
  const coll_nccl_table_t *t = coll__nccl_table();
  ncclComm_t c = raw;
  uint64_t t0 = uv_hrtime(), t1;
  ncclResult_t r =
      t->nccl_all_reduce(send, recv, count, ncclFloat32, ncclSum, c, NULL);
  if (r == ncclInProgress) r = settle(t, c);
  t1 = uv_hrtime();
  if (r != ncclSuccess) return -1;
  while (t->cuda_stream_query(NULL) == cudaErrorNotReady) sched_yield();
  *issue_us = (double)(t1 - t0) / 1e3;
  *done_us = (double)(uv_hrtime() - t0) / 1e3;
  return 0;
}

static void si_raw_close(void *raw) {
  const coll_nccl_table_t *t = coll__nccl_table();
  t->nccl_comm_destroy((ncclComm_t)raw);
}

static const perf_device_t standin_device = {
    "the stand-in's NCCL, polled as torch polls",
    si_setup,
    si_select,
    si_alloc,
    si_free,
    si_upload,
    si_download,
    si_raw_open,
    si_raw_call,
    si_raw_close};

static const perf_device_t *standin_get(void) { return &standin_device; }

int main(int argc, char **argv) {
  standin_config_t cfg;
  int rc;
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 16;
  standin_install(&cfg);
  rc = perf_main(argc, argv, standin_get);
  standin_uninstall();
  return rc;
}
