/* SPDX-License-Identifier: Apache-2.0 */
/* perf.h: the pieces of coll-perf: options, the per-rank benchmark, result
 * checking and the report. */
#ifndef COLL_PERF_H
#define COLL_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#define PERF_EXIT_FAILED 1 /* wrong results, or a call failed */
#define PERF_EXIT_USAGE 2

typedef enum perf_coll {
  PERF_ALLREDUCE = 0,
  PERF_ALLGATHER,
  PERF_REDUCE_SCATTER,
  PERF_BROADCAST,
  PERF_REDUCE,
  PERF_BARRIER,
  PERF_COLL_COUNT
} perf_coll_t;

typedef enum perf_format { PERF_TEXT = 0, PERF_CSV, PERF_JSON } perf_format_t;

typedef struct perf_opts {
  size_t min_bytes, max_bytes, factor;
  int iters, warmup;
  coll_dtype_t dtype;
  coll_op_t op;
  int all_dtypes, all_ops; /* -d all, -o all: one pass per dtype / op */
  int check;               /* 1: verify every result */
  int root;
  perf_coll_t coll;
  perf_format_t format;
  int threads;  /* > 0: that many ranks as threads; 0: coll_comm_init_env */
  int list_env; /* --env: print the variables and exit */
  int peer_protocol; /* --peer-protocol: the peer drivers' loop (peer.c) */
  int sizes_given;   /* 1: -b was on the command line; 2: -e; 3: both */
  int offset;        /* --offset: buffers start this far into a page; -1:
                        where malloc puts them */
  int nccl;          /* --nccl: --threads ranks on NCCL comms, a CUDA
                        device each, device buffers */
  int cost;          /* --cost: the per-call cost table (cost.c) */
} perf_opts_t;

/* Device buffers, for --nccl: the CUDA runtime (device_cuda.c) in
 * coll-perf, a host-memory stand-in in the tests' build. Every slot is
 * called from the rank's own thread except setup. */
typedef struct perf_device {
  const char *name;
  /* Before the ranks start: 0, or -1 with the reason printed. */
  int (*setup)(int world);
  /* Makes the rank's device current on the calling thread. */
  void (*select)(int rank);
  void *(*alloc)(int rank, size_t bytes); /* NULL when out of memory */
  void (*free)(void *p);
  /* Host to device and back, finished when they return. */
  int (*upload)(void *dev, const void *host, size_t bytes);
  int (*download)(void *host, const void *dev, size_t bytes);
  /* Optional: the same allreduce straight through NCCL, for the cost
   * table's "raw" columns. open makes rank's NCCL comm (every rank's
   * thread calls it), call issues one allreduce of count floats and
   * returns the time until NCCL took it (us) in *issue_us and until the
   * stream finished it in *done_us. */
  void *(*raw_open)(int rank, int world);
  int (*raw_call)(void *raw, const void *send, void *recv, size_t count,
                  double *issue_us, double *done_us);
  void (*raw_close)(void *raw);
} perf_device_t;

/* bench.c: a buffer of `bytes` (> 0) starting `offset` bytes into a page
 * (offset < 0: malloc's, zeroed with zero). *raw is what perf_buf_free
 * takes. NULL when out of memory. */
void *perf_buf_alloc(size_t bytes, int offset, int zero, void **raw);
void perf_buf_free(void *raw);

/* One variant (out-of-place or in-place) of one size, over all ranks. */
typedef struct perf_result {
  int valid;           /* 0: the collective has no such variant (N/A) */
  double time_us;      /* max over ranks of the mean time per iteration */
  double algbw, busbw; /* GB/s, GB = 1e9 bytes */
  int64_t wrong;       /* wrong elements summed over ranks; -1: not checked */
} perf_result_t;

typedef struct perf_row {
  size_t bytes, count; /* nccl-tests' size and count columns */
  coll_dtype_t dtype;
  coll_op_t op;
  perf_result_t oop, ip;
} perf_row_t;

/* The report, written by rank 0 only. */
typedef struct perf_report {
  const perf_opts_t *o;
  int world;
  int rows;
  double busbw_sum;
  int busbw_n;
  int64_t wrong;
} perf_report_t;

/* args.c */
/* Parses argv into o; returns -1 to go on, else the exit code to end with. */
int perf_parse_args(int argc, char **argv, perf_opts_t *o);
const char *perf_coll_name(perf_coll_t c);
/* Whether the collective reduces (uses -o) / has a root (uses -r). */
int perf_coll_reduces(perf_coll_t c);
int perf_coll_rooted(perf_coll_t c);

/* bench.c: one rank's whole benchmark. `fail` is called once when a call
 * fails on this rank, to stop the other ranks (may be NULL). Returns 0 on
 * success, PERF_EXIT_FAILED if a result was wrong or a call failed. */
typedef struct perf_rank {
  const perf_opts_t *o;
  coll_comm_t *comm;
  int rank, world;
  const char *mode; /* "threads" or "processes", for the header */
  void (*fail)(void *ctx);
  void *fail_ctx;
} perf_rank_t;
int perf_bench(const perf_rank_t *pr);

/* peer.c: the same rank's benchmark in the peer drivers' protocol and
 * table (--peer-protocol). Returns 0, or PERF_EXIT_FAILED. */
int perf_peer_bench(const perf_rank_t *pr);

/* check.c: inputs that are exact in every dtype, and their verification.
 * Element i of rank r's input is a small integer of (r, i). */
void perf_fill(const perf_opts_t *o, int world, int rank, void *buf,
               size_t count);
/* Fills buf so that a value the collective did not write is caught. */
void perf_poison(coll_dtype_t dt, void *buf, size_t count);
/* Wrong elements in buf[0..count) against the reduction over all ranks of
 * their inputs at indices first..first+count-1. */
int64_t perf_check_reduced(const perf_opts_t *o, int world, const void *buf,
                           size_t first, size_t count);
/* Wrong elements in buf[0..count) against rank `src`'s input. */
int64_t perf_check_input(const perf_opts_t *o, int world, int src,
                         const void *buf, size_t count);

/* report.c (rank 0) */
void perf_report_begin(perf_report_t *r, const perf_opts_t *o, int world,
                       const char *mode, const char *backend);
void perf_report_row(perf_report_t *r, const perf_row_t *row);
/* failed: a call failed, so the table may be incomplete. */
void perf_report_end(perf_report_t *r, int failed);

/* cost.c: one rank's per-call cost of allreduce (f32 sum) at each size:
 * the time until coll_iallreduce returns and until coll_wait returned, the
 * slowest rank's mean, beside NCCL's own when dev has a raw path. Returns 0
 * or PERF_EXIT_FAILED. */
int perf_cost_bench(const perf_rank_t *pr, const perf_device_t *dev);

/* main.c: coll-perf with a device provider for --nccl (NULL: none); the
 * executable's main calls it. */
int perf_main(int argc, char **argv, const perf_device_t *(*device)(void));
/* device_cuda.c: device buffers through the CUDA runtime, loaded at run
 * time (NULL with the reason printed when it is not there). */
const perf_device_t *perf_device_cuda(void);

/* env_list.c */
void perf_print_env(void);

#endif
