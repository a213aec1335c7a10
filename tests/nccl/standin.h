/* SPDX-License-Identifier: Apache-2.0 */
/* standin.h: a host-memory stand-in for NCCL and the CUDA runtime, installed
 * into libcoll's NCCL table. Ranks are threads that meet by unique id;
 * "device memory" is host memory the stand-in registered as such; streams
 * run their work at once or only when queried (deferred). Collectives
 * compute on host pointers like NCCL would. Everything is under one lock. */
#ifndef COLL_TEST_STANDIN_H
#define COLL_TEST_STANDIN_H

#include <stddef.h>

#include "cuda/gpu_table.h"

typedef struct standin_config {
  int ndev;      /* CUDA devices visible (0: none) */
  int no_nccl;   /* the table has no NCCL half ("library not found") */
  int no_driver; /* every CUDA call fails with cudaErrorInsufficientDriver */
  int version;   /* ncclGetVersion's code; 0: 22809 (2.28.9); below 22703
                    the table has no ncclCommShrink, as such an NCCL */
  int deferred;  /* stream work runs only when a query or sync looks */
  int hang;      /* collectives never complete (until their comm aborts) */
} standin_config_t;

/* Resets every state and installs the stand-in into libcoll's table. */
void standin_install(const standin_config_t *cfg);
/* Uninstalls it and frees what it kept (comms, streams, memory). */
void standin_uninstall(void);

/* "Device" memory on device dev: host memory the stand-in reports as
 * cudaMemoryTypeDevice. */
void *standin_dev_alloc(int dev, size_t bytes);
void standin_dev_free(void *p);

/* The next collective call returns r without running (once). */
void standin_fail_next(ncclResult_t r);
/* ncclCommInitRankConfig for `rank` returns r without joining (until the
 * next install): an init that fails on one rank only. */
void standin_fail_init(int rank, ncclResult_t r);
/* Every live comm reports r from ncclCommGetAsyncError from now on. */
void standin_inject_async_error(ncclResult_t r);
/* Collectives posted from now on complete (hang = 0) or never (1). */
void standin_set_hang(int hang);
/* Stalls every stream (1): queued work (copies, event records, waits)
 * stays queued even when queried, as if a kernel ahead of it never ended,
 * until standin_stall(0) lets it run. Any thread. */
void standin_stall(int on);

typedef struct standin_stats {
  int comms_live;      /* comms neither destroyed nor aborted */
  int comm_aborts;     /* ncclCommAbort calls */
  int comm_destroys;   /* ncclCommDestroy calls */
  int destroy_blocked; /* ncclCommDestroy with work that could never end */
  int misuse;          /* a freed comm passed to NCCL, bad stream, ... */
  int group_ends;      /* outermost ncclGroupEnd calls */
  int collectives;     /* collective and p2p calls that were posted */
  int ops_created;     /* ncclRedOpCreatePreMulSum */
  int ops_live;        /* created and not destroyed */
  int host_allocs_live;
  int events_live;
  int copies;        /* cudaMemcpyAsync calls posted */
  unsigned contexts; /* bit d: a primary context was made on device d */
  int shrinks;       /* ncclCommShrink calls that NCCL accepted */
  int shrink_aborts; /* of which with NCCL_SHRINK_ABORT */
} standin_stats_t;

void standin_stats(standin_stats_t *out);
/* The text of the last misuse, "" if none. */
const char *standin_misuse_text(void);

#endif
