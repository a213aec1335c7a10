/* SPDX-License-Identifier: Apache-2.0 */
/* fault_job.h: one job of rank processes with one fault in it, for the
 * fault tests and the fault soak (tools/fault-harness.sh).
 *
 * The ranks are forked from the calling process (which must have no
 * threads: a child of a threaded process may not start its own under
 * ThreadSanitizer). They meet as a launcher's ranks do
 * (coll_comm_init_env): on one host, through shared memory (the default)
 * or TCP; or on two hosts as the host identity hook makes them (even
 * ranks on one, odd on the other), so the comm takes the two-level path.
 * With `proxy`, they meet instead through a store served by a helper
 * process, which also runs a proxy (tests/common/tcp_proxy.h) on the TCP
 * link of one pair of ranks: the fault can then blackhole that link or
 * corrupt a frame header on it.
 *
 * Every rank runs `before` allreduces, then the fault's allreduce, then
 * `after` more (or a stream of them, which the ranks end together: each
 * allreduce carries a flag that says whether the parent asked to stop),
 * each checked against the exact sum (small integers in f32). One rank may be
 * late to the fault's allreduce: it stays in its own code until every other
 * rank ended, or late_ms. The fault is injected once every rank that is not
 * late is inside that allreduce. */
#ifndef COLL_TESTS_FAULT_JOB_H
#define COLL_TESTS_FAULT_JOB_H

#include <stddef.h>
#include <stdint.h>

#define FJ_MAXW 8
#define FJ_TEXT 480
#define FJ_STREAM (-1)

typedef enum fj_path {
  FJ_SHM = 0, /* one host, shared memory: COLL_TRANSPORT unset */
  FJ_TCP,     /* one host, COLL_TRANSPORT=tcp */
  FJ_ROUTE,   /* two hosts: shared memory within each, TCP between */
} fj_path_t;

typedef enum fj_fault {
  FJ_NONE = 0,
  FJ_KILL,      /* kill -9 of the victim */
  FJ_ABORT,     /* a thread of the victim calls coll_abort */
  FJ_STOP,      /* SIGSTOP of the victim for stop_ms, then SIGCONT */
  FJ_GARBAGE,   /* the victim's bytes turn to garbage: over the proxy a
                   frame header from it, in shared memory (the two-level
                   path's messages) its ring to the next rank of its
                   host claiming more cells than it holds */
  FJ_PARTITION, /* the proxied link is blackholed both ways */
} fj_fault_t;

typedef struct fj_spec {
  fj_path_t path;
  int world;          /* 2..FJ_MAXW */
  size_t count;       /* floats per allreduce */
  int64_t timeout_ms; /* the comms' timeout */
  int64_t hb_ms;      /* COLL_HEARTBEAT_TIMEOUT_MS; < 0: unset */
  int proxy;          /* meet through the helper; a proxy on proxy_lo,
                         proxy_hi (TCP and two-level paths only) */
  int proxy_lo, proxy_hi;
  int before, after; /* allreduces before and after the fault's;
                        after FJ_STREAM: a stream until the parent ends
                        it, tail_ms after the fault (or the stall) */
  int64_t tail_ms;
  int late;        /* the rank late to the fault's allreduce, or -1 */
  int64_t late_ms; /* the longest it stays out */
  fj_fault_t fault;
  int victim;
  int64_t stop_ms;   /* FJ_STOP: how long it stays stopped */
  int garbage_shm;   /* FJ_GARBAGE in shared memory despite the proxy */
  int64_t settle_ms; /* from all inside the fault's allreduce to the
                        fault */
  int64_t bound_ms;  /* every rank ends within this after the fault (a
                        rank still running then hung) */
} fj_spec_t;

/* A spec with the defaults: 4 ranks over `path`, 4096 floats, a 30 s
 * timeout, heartbeats at their default, one allreduce before and none
 * after (a stream's tail 500 ms), nobody late, no fault, 30 ms settle, a
 * 20 s bound. */
fj_spec_t fj_spec_default(fj_path_t path);

typedef struct fj_rank_out {
  int exit_code; /* 128+signal when killed; -1 when it hung */
  int up;        /* its comm stood */
  int status;    /* the first failing call's coll_status_t; 0: none */
  char text[FJ_TEXT];
  int failed_at;    /* which allreduce failed (1-based); 0: none */
  int ok_calls;     /* allreduces that returned COLL_OK */
  int wrong;        /* of those, how many summed wrong */
  int64_t enter_ms; /* when it entered the failing (else the fault's) call */
  int64_t end_ms;   /* when that call returned */
} fj_rank_out_t;

typedef struct fj_result {
  int64_t fault_ms;  /* just before the fault went in; 0: never */
  int64_t resume_ms; /* FJ_STOP: just after SIGCONT */
  int hung;          /* a rank ran past the bound and was killed */
  char why[320];     /* what broke the job itself, "" if nothing */
  fj_rank_out_t r[FJ_MAXW];
} fj_result_t;

/* Runs one job. 0 when the job ran (whatever the ranks reported: see
 * fault_judge.h), -1 with res->why when the job itself broke (a comm
 * never stood, a rank never reached the fault's allreduce, the helper
 * failed). Never leaves a process behind. One thread; the caller must
 * have no other thread. */
int fj_run(const fj_spec_t *spec, fj_result_t *res);

/* Names for messages. */
const char *fj_path_name(fj_path_t p);
const char *fj_fault_name(fj_fault_t f);

#endif
