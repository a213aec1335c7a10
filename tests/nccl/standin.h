/* SPDX-License-Identifier: Apache-2.0 */
/* standin.h: a host-memory stand-in for NCCL 2.28 and the CUDA runtime,
 * installed into libcoll's table. Ranks are threads that meet by unique id;
 * "device memory" is host memory the stand-in registered as such; streams
 * run their work at once or only when queried (deferred). Collectives
 * compute on host pointers like NCCL would.
 *
 * Where libcoll's correctness depends on it, the stand-in behaves as NCCL
 * 2.28.9 does (nccl: src/group.cc, init.cc, enqueue.cc at v2.28.9-1): a
 * group end with a multi-rank nonblocking comm answers ncclInProgress and
 * launches from a thread of its own; world 1 launches in the call; split
 * and shrink write *newcomm when their job ends, with progress on the
 * parent; destroy with a pending error returns it without destroying (and
 * leaves the thread's group depth one too high); abort and revoke stop the
 * comm's kernels, and abort then waits for the streams to pass them; an
 * argument error poisons a nonblocking comm; NCCL_COMM_BLOCKING overrides
 * the config. Two threads inside calls on one comm at once are recorded as
 * misuse (NCCL has no lock there).
 *
 * Not modelled: the legacy default stream's synchronisation with the other
 * blocking streams of a device (NULL is just the device's default stream
 * here); and what the runtime answers for the current device after
 * cuCtxSetCurrent(NULL), which is taken to be device 0 (not verified on a
 * GPU). */
#ifndef COLL_TEST_STANDIN_H
#define COLL_TEST_STANDIN_H

#include <stddef.h>

#include "cuda/gpu_table.h"

typedef struct standin_config {
  int ndev;      /* CUDA devices visible (0: none) */
  int no_nccl;   /* the table has no NCCL half ("library not found") */
  int no_driver; /* every CUDA call fails with cudaErrorInsufficientDriver */
  int version;   /* ncclGetVersion's code; 0: 22809 (2.28.9). The table
                    has ncclCommRevoke from 22800, ncclCommShrink from
                    22703 and ncclCommSplit from 21800, as such an NCCL */
  int deferred;  /* stream work runs only when a query or sync looks */
  int hang;      /* collectives never complete (until their comm aborts) */
  int launch_delay_us; /* a launch thread waits this long before it puts
                          the work on the stream (0: as soon as it runs) */
  int cuda_runtime;    /* cudaRuntimeGetVersion's code; 0: 13000. Before
                          12000 cudaSetDevice binds no context, and the
                          device a thread chose outlives its context */
} standin_config_t;

/* Resets every state and installs the stand-in into libcoll's table. */
void standin_install(const standin_config_t *cfg);
/* Uninstalls it and frees what it kept (comms, streams, memory). */
void standin_uninstall(void);

/* This thread sees device dev at PCI bus id `id` (NULL: the default,
 * "0000:<0x18 + 8 dev>:00.0"), until the next install: a rank whose
 * CUDA_VISIBLE_DEVICES names one GPU of its own calls that GPU device 0,
 * and its bus id tells it apart from the others' device 0. NCCL's
 * duplicate-GPU check at init compares these. */
void standin_bus_id(int dev, const char *id);

/* A context on device dev that is not its primary one (cuCtxCreate, a
 * green context), for a thread to make current with cuCtxSetCurrent. */
CUcontext standin_ctx_create(int dev);

/* "Device" memory on device dev: host memory the stand-in reports as
 * cudaMemoryTypeDevice. */
void *standin_dev_alloc(int dev, size_t bytes);
void standin_dev_free(void *p);

/* The next collective call returns r without running (once). */
void standin_fail_next(ncclResult_t r);
/* The same for the call after `skip` more collective calls. */
void standin_fail_after(int skip, ncclResult_t r);
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
/* Queues on stream s (of the calling thread's device when NULL) work that
 * holds it for ms milliseconds from now, like a host function that
 * sleeps: what is queued behind it waits. */
void standin_hold(cudaStream_t s, int ms);
/* How long launch threads wait before they put work on the stream. */
void standin_set_launch_delay_us(int us);
/* The calling thread's NCCL group depth (ncclGroupStart minus End). */
int standin_group_depth(void);
/* Calls fn(arg) at the entry of the named NCCL call ("ncclRedOpDestroy",
 * ...), outside the stand-in's lock, once; NULL fn clears it. */
void standin_set_hook(const char *call, void (*fn)(void *), void *arg);

typedef struct standin_stats {
  int comms_live;      /* comms neither destroyed nor aborted */
  int comm_aborts;     /* ncclCommAbort calls that freed a comm */
  int comm_destroys;   /* ncclCommDestroy calls that freed a comm */
  int destroy_refused; /* ncclCommDestroy answered an error, comm kept */
  int destroy_blocked; /* ncclCommDestroy with work that could never end */
  int revokes;         /* ncclCommRevoke calls that NCCL accepted */
  int abort_waited_ms; /* the longest wait of an abort for the streams */
  int aborts_in_group; /* ncclCommAbort inside an open group */
  int misuse;          /* a freed comm passed to NCCL, bad stream, ... */
  int group_ends;      /* outermost ncclGroupEnd calls */
  int launches_async;  /* group ends handed to a launch thread */
  int collectives;     /* collective and p2p calls that were posted */
  int ops_created;     /* ncclRedOpCreatePreMulSum */
  int ops_live;        /* created and not destroyed */
  int host_allocs_live;
  int events_live;
  int copies;        /* cudaMemcpyAsync calls posted */
  unsigned contexts; /* bit d: a primary context was made on device d */
  int shrinks;       /* ncclCommShrink calls that NCCL accepted */
  int shrink_aborts; /* of which with NCCL_SHRINK_ABORT */
  int splits;        /* ncclCommSplit calls that NCCL accepted */
} standin_stats_t;

void standin_stats(standin_stats_t *out);
/* The text of the last misuse, "" if none. */
const char *standin_misuse_text(void);

#endif
