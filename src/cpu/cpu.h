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
  /* Host receives not yet handed to the transport: a receive from any
   * source until a probe finds its sender, and receives on its tag issued
   * after it, in issue order; and the rank a receive from any source
   * probes first (the one after the last it matched). Same thread. */
  p2p_req_t *unmatched;
  int any_next;

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
 * caller until the collective ends) where the comm checks: an algorithm
 * that carries the check gets it in ctx->check (the tables' rows get it
 * through coll__cpu_pick, choose.h). */
void coll__cpu_ctx_checked(coll_cpu_t *cpu, coll_algo_ctx_t *ctx,
                           const coll_desc_t *d);
/* The check of descriptor d alone, as a step of its own, where the comm
 * checks (a context of its own: one sequence number, as a carrier
 * takes): for a batch, checked once before its allreduces. */
coll_status_t coll__cpu_check_alone(coll_cpu_t *cpu, const coll_desc_t *d);

/* Work dtype of (dt, op): I32 for 8-bit SUM/AVG, else dt. */
coll_dtype_t coll__cpu_work_dtype(coll_dtype_t dt, coll_op_t op);
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
