/* SPDX-License-Identifier: Apache-2.0 */
/* cpu.h: the CPU ring backend's state (a comm over a transport, an executor
 * that runs collectives in issue order) and the helpers every part of the
 * backend shares (cpu_util.c). The layers above it: the host path of each
 * collective (host.h), the dispatcher, executor and point-to-point requests
 * (exec.h), and the comm's constructor (cpu_comm.h). */
#ifndef COLL_CPU_CPU_H
#define COLL_CPU_CPU_H

#include <stdatomic.h>

#include "algo/algo.h"
#include "algo/topo.h"
#include "core/comm.h"
#include "core/env.h"
#include "cpu/tuning.h"

typedef struct cpu_req cpu_req_t;
typedef struct p2p_req p2p_req_t;

typedef struct coll_cpu {
  coll_comm_t *comm;
  coll_transport_t *t;

  /* Executor: work not run inline waits here, in issue order. Guarded by mu. */
  uv_mutex_t mu;
  uv_cond_t cv;
  cpu_req_t *head, *tail;
  p2p_req_t *p2p; /* outstanding point-to-point requests */
  int busy;       /* the worker is running an item */
  int stop;
  int thread_started;
  uv_thread_t thread;

  /* Touched only by the thread running work (one at a time). */
  uint32_t seq;
  coll_scratch_t scratch; /* the algorithms' */
  coll_scratch_t work;    /* copies, widened 8-bit sums, packed batches */
  coll_scratch_t extra;   /* second area (negotiate, reduce-scatter) */
  coll_fedavg_t *fed;

  /* Sends not yet handed to the transport (a staged copy still running,
   * or an earlier send of the pair and tag still waiting), in issue order.
   * Touched only by the thread that uses the comm (p2p.c). */
  p2p_req_t *unposted;

  /* Sticky failure (guarded by mu: point-to-point calls on the user's
   * thread and the worker both set and read it). */
  coll_status_t broken; /* COLL_OK while healthy */
  char broken_msg[COLL_ERRMSG_MAX];

  atomic_int aborted;

  /* The ranks' hosts and the order the algorithms walk them in. */
  coll_topo_t topo;

  /* What it chooses algorithms and segments by, computed at creation
   * (tuning.c). */
  coll_tuning_t tune;
} coll_cpu_t;

/* tuning.c ---------------------------------------------------------------- */

/* Fills cpu->tune from the transport's hints, the hosts (cpu->topo) and
 * the knobs, agrees on one segment with the other ranks where theirs may
 * differ, and runs the link probe where auto's thresholds depend on the
 * links. Collective: every rank of the comm calls it at creation, with the
 * comm otherwise ready. */
coll_status_t coll__cpu_tune(coll_cpu_t *cpu);

/* cpu_util.c ------------------------------------------------------------- */

/* A context for one collective: takes the next sequence number; no check
 * (ctx->check NULL). Positions follow the comm's host order
 * (algo/topo.h). */
void coll__cpu_ctx(coll_cpu_t *cpu, coll_algo_ctx_t *ctx);
/* A context for one collective that checks descriptor d (kept by the
 * caller until the collective ends) where the comm checks: the
 * algorithm carries the check, or the caller runs coll__check_alone before
 * one that does not. */
void coll__cpu_ctx_checked(coll_cpu_t *cpu, coll_algo_ctx_t *ctx,
                           const coll_desc_t *d);
/* The check of descriptor d alone, as a step of its own, where the comm
 * checks (a context of its own: one sequence number, as a carrier
 * takes). */
coll_status_t coll__cpu_check_alone(coll_cpu_t *cpu, const coll_desc_t *d);

/* An algorithm as a row of its collective's table. COLL_ALGO=auto takes
 * the first row that can run on the comm and fits the size; another word
 * takes the row it names where that can run, else the table's last row,
 * the one that runs everywhere. A table is an array of structs whose
 * member `row` is this, with the algorithm's entry point beside it. */
typedef struct coll_cpu_row {
  int word; /* COLL_ALGO's word that names it (core/env.h); -1: none */
  int (*can)(const coll_cpu_t *cpu);                /* NULL: every comm */
  int (*fits)(const coll_cpu_t *cpu, size_t bytes); /* NULL: every size */
} coll_cpu_row_t;
/* The index of the row to run for `bytes` (the collective's largest
 * buffer, in the work dtype) among n rows, the first at `first` and each
 * `stride` bytes after the one before. */
size_t coll__cpu_choose(const coll_cpu_t *cpu, const coll_cpu_row_t *first,
                        size_t stride, size_t n, size_t bytes);
#define COLL_CPU_CHOOSE(cpu, table, bytes)                     \
  coll__cpu_choose((cpu), &(table)[0].row, sizeof((table)[0]), \
                   sizeof(table) / sizeof((table)[0]), (bytes))
/* Rows' `can` for the collectives designed for the transport's shared
 * memory: it has some, and there are peers to share it with. */
int coll__cpu_shared(const coll_cpu_t *cpu);
/* Work dtype of (dt, op): I32 for 8-bit SUM/AVG, else dt. */
coll_dtype_t coll__cpu_work_dtype(coll_dtype_t dt, coll_op_t op);
/* Rows' `fits` for broadcast and allgather through the transport's
 * shared memory (algo/broadcast_shm.c and the like): `bytes` is below its
 * others_below; for reduce-scatter, below reduce_scatter_below. */
int coll__cpu_shm_others_fit(const coll_cpu_t *cpu, size_t bytes);
int coll__cpu_shm_reduce_scatter_fits(const coll_cpu_t *cpu, size_t bytes);
/* Turns a sum in the work dtype into the user's result: narrow, scale. */
void coll__cpu_finish(coll_cpu_t *cpu, void *dst, const void *src, size_t count,
                      coll_dtype_t dt, coll_op_t op);

/* Records the comm's first fatal failure (this thread's error text) and
 * aborts the transport so peers learn at once. Any thread. */
void coll__cpu_set_broken(coll_cpu_t *cpu, coll_status_t s);
/* After a failure s with this thread's text set: when the failure started
 * with a timeout and the transport holds the desync report, the report
 * goes into the text: in place of it on the rank that timed out, after it
 * on the others. Any thread. */
void coll__cpu_note_report(coll_cpu_t *cpu, coll_status_t s);
/* COLL_OK, or the sticky failure with "what: the comm is unusable..."
 * recorded as this thread's error. Any thread. */
coll_status_t coll__cpu_check_usable(coll_cpu_t *cpu, const char *what);

#endif
