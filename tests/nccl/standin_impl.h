/* SPDX-License-Identifier: Apache-2.0 */
/* standin_impl.h: the stand-in's shared state. One lock (si.mu) keeps the
 * stand-in's own tables consistent; it is released between a call's entry
 * and its body (si_enter), so two threads inside calls on one comm at once
 * are seen and recorded instead of being serialised. */
#ifndef COLL_TEST_STANDIN_IMPL_H
#define COLL_TEST_STANDIN_IMPL_H

#include <stdint.h>
#include <uv.h>

#include "standin.h"

#define SI_MAXR 16   /* ranks per clique */
#define SI_MAXDEV 16 /* devices */
#define SI_BUS_ID_MAX 32

enum { SI_OP_COPY, SI_OP_EVENT, SI_OP_COLL, SI_OP_WAIT, SI_OP_HOLD };

typedef struct si_slot si_slot_t;

typedef struct si_op {
  int kind;
  void *dst; /* copy */
  const void *src;
  size_t bytes;
  struct CUevent_st *ev; /* event marker */
  uint64_t seq;
  int64_t until_ms; /* hold: the stream moves on at this time */
  si_slot_t *slot;  /* collective */
  struct ncclComm *comm;
  int rank;
  /* Calls launched by one group onto one stream are one kernel in NCCL:
   * they progress together (fused point-to-point). 0: not fused. */
  uint64_t fuse;
  int finished;   /* its slot ran (or its comm was aborted) */
  uint64_t order; /* when it was posted, among every stream's work */
  struct si_op *next;
} si_op_t;

struct CUstream_st {
  int dev;
  int legacy;      /* the device's legacy default stream (NULL) */
  int nonblocking; /* cudaStreamNonBlocking: no sync with the legacy one */
  si_op_t *head, *tail;
  struct CUstream_st *next_all;
};

struct CUevent_st {
  int dev;
  uint64_t recorded, passed; /* complete when passed >= recorded */
  struct CUevent_st *next_all;
  int destroyed;
};

typedef struct si_mem {
  char *p;
  size_t bytes;
  int dev; /* -1: pinned host */
  struct si_mem *next;
} si_mem_t;

typedef struct si_state {
  uv_mutex_t mu;
  uv_cond_t cv;
  standin_config_t cfg;
  struct CUstream_st *streams; /* every stream, default ones included */
  struct CUstream_st *defaults[SI_MAXDEV];
  struct CUevent_st *events;
  si_mem_t *mem;
  struct ncclComm *comms;
  struct si_clique *cliques;
  struct si_job *jobs; /* every job, until uninstall */
  ncclResult_t fail_next;
  int fail_skip;      /* collective calls to let through before fail_next */
  int fail_init_rank; /* -1: none */
  ncclResult_t fail_init;
  int hang;
  int stalled;         /* standin_stall */
  unsigned generation; /* installs so far (threads' per-thread streams) */
  uint64_t uid_counter;
  uint64_t post_order; /* of the last work posted (si_op_t.order) */
  standin_stats_t st;
  char misuse[256];
  char last_error[256]; /* ncclGetLastError's text */
  char hook_call[64];
  void (*hook_fn)(void *);
  void *hook_arg;
} si_state_t;

extern si_state_t si;
extern _Thread_local int si_cur_dev;
extern _Thread_local int si_group_depth;
/* This thread's current context: 0 none, else device + 1 (a thread starts
 * with none; cudaSetDevice or first runtime use makes one). */
extern _Thread_local int si_cur_ctx;
/* Comms initialised inside this thread's open group (NCCL waits for them
 * at the outermost ncclGroupEnd). */
extern _Thread_local struct ncclComm *si_group_inits[SI_MAXR];
extern _Thread_local int si_group_ninit;
/* An abort inside the open group: NCCL queues it to the group's end and
 * makes that group blocking (group.cc:36-66). */
extern _Thread_local struct ncclComm *si_group_aborts[SI_MAXR];
extern _Thread_local int si_group_naborts;

typedef struct si_clique {
  char id[NCCL_UNIQUE_ID_BYTES];
  unsigned coll_arrived; /* ranks at their first collective */
  unsigned char p2p_arrived[SI_MAXR][SI_MAXR]; /* [r][peer]: r reached peer */
  int world, joined;
  int init_done; /* every rank joined and the device check ran */
  struct ncclComm *comms[SI_MAXR];
  si_slot_t *slots;
  /* A clique made by ncclCommShrink: the exclude list of its first rank,
   * which every later one must match (bad = 1 once one did not). */
  int shrunk, nexcl, bad;
  int excl[SI_MAXR];
  struct si_clique *next;
} si_clique_t;

#define SI_MAXOPS 8
#define SI_MAXCALLS 64

typedef struct si_call {
  struct ncclComm *c;
  int kind, peer; /* peer: -1 for collectives */
  struct si_arg {
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    int op;        /* ncclRedOp_t, or -1 - index for a premul op */
    double factor; /* a premul op's scalar, exact for f16, bf16, f32, f64 */
    int root;
    int posted, at_head;
  } arg;
  cudaStream_t st;
} si_call_t;

typedef struct si_arg si_arg_t;

/* A job NCCL runs on a thread of its own for nonblocking comms: a group's
 * launch, or the making of a child comm (split, shrink). Every comm it
 * serves reports ncclInProgress until it ends; the first
 * ncclCommGetAsyncError that sees it ended joins the thread. */
typedef enum { SI_JOB_LAUNCH, SI_JOB_CHILD } si_job_kind_t;

typedef struct si_job {
  si_job_kind_t kind;
  uv_thread_t th;
  int started, done, joined;
  int refs;     /* comms whose job it still is */
  int delay_us; /* the launch delay when the job was made */
  ncclResult_t result;
  /* launch */
  si_call_t calls[SI_MAXCALLS];
  int n;
  /* child */
  struct ncclComm *parent;
  ncclComm_t *out; /* the caller's slot, written when the job ends */
  char id[NCCL_UNIQUE_ID_BYTES];
  int world, rank, nonblocking, nexcl;
  int excl[SI_MAXR];
  struct si_job *next_all;
} si_job_t;

struct ncclComm {
  si_clique_t *q;
  int rank, dev;
  char bus[SI_BUS_ID_MAX]; /* its device's PCI bus id, as the rank saw it */
  int freed;      /* aborted or destroyed: NCCL must not see it again */
  int abort_flag; /* abort, revoke or NCCL_SHRINK_ABORT: its kernels exit */
  int destroy_flag;
  int revoked;       /* ncclCommRevoke accepted: collectives are refused */
  int revoking;      /* its revoke waits for the streams to pass its work */
  unsigned children; /* split and shrink calls on it (names the child) */
  int nonblocking;   /* config.blocking == 0 (or NCCL_COMM_BLOCKING=0) */
  /* ncclInProgress while init, a launch or a child job runs; then
   * ncclSuccess or the error. */
  ncclResult_t async_err;
  si_job_t *job;
  /* A thread inside an NCCL call on this comm (si_enter). */
  int busy;
  uv_thread_t busy_tid;
  const char *busy_call;
  uint64_t coll_seq, send_seq[SI_MAXR], recv_seq[SI_MAXR];
  /* By op - ncclNumOps: the scalar (of the op's element type, held exactly
   * in a double) and the element type the op was created for. */
  double premul[SI_MAXOPS];
  ncclDataType_t premul_dt[SI_MAXOPS];
  int premul_live[SI_MAXOPS];
  struct ncclComm *next_all;
};

struct si_slot {
  si_clique_t *q;
  int chan; /* -1: collectives; else src * SI_MAXR + dst */
  uint64_t seq;
  int kind, hang, done, queued;
  unsigned want; /* participating ranks */
  si_arg_t a[SI_MAXR];
  si_slot_t *next;
};

/* Under si.mu. */
void si_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct CUstream_st *si_stream(cudaStream_t s, int dev);
void si_post(struct CUstream_st *s, si_op_t *op);
/* The fuse id for the calls of the next launched group (under si.mu). */
extern uint64_t si_fuse_next;
extern uint64_t si_fuse_cur;
void si_progress(struct CUstream_st *s);
void si_progress_all(void);
/* Waits on si.cv for up to 1 ms (the stand-in's polling step). */
void si_wait_a_bit(void);
int64_t si_now_ms(void);
/* Tries to run the collective op (at the head of its stream): 1 when the
 * op is over (ran, or its comm was aborted), 0 while it must wait. */
int si_coll_try(si_op_t *op);
/* 1 if some stream still holds work of c. */
int si_comm_has_work(struct ncclComm *c);
/* Waits (bounded) until no stream holds work of c, as NCCL's teardown
 * synchronises its device stream, which waits on the user's stream. */
void si_wait_streams(struct ncclComm *c, const char *what);
/* NULL or freed comm: records a misuse, returns ncclInvalidUsage. */
ncclResult_t si_comm_ok(struct ncclComm *c, const char *what);
/* A call's entry: runs the hook named `what`, takes si.mu, checks c (a
 * NULL or freed comm is misuse: ncclInvalidUsage) and marks it busy, recording
 * a misuse when another thread is inside a call on it; then drops and retakes
 * the lock, so an overlapping call is seen. si_leave unmarks (under si.mu) and
 * unlocks. */
ncclResult_t si_enter(struct ncclComm *c, const char *what);
void si_leave(struct ncclComm *c);
/* ncclCommEnsureReady (init.cc:373-389): the comm's state unless it is
 * success; ncclInProgress becomes ncclInvalidArgument. With the abort flag
 * set, it joins a pending job instead (and answers success). */
ncclResult_t si_ensure_ready(struct ncclComm *c);
/* Joins the comm's job once it ended (or, aborting, ends and joins it);
 * drops si.mu while it joins. */
void si_job_join(struct ncclComm *c);
/* ncclCommAbort's teardown of c, now (under si.mu). */
void si_reclaim_abort(struct ncclComm *c);
/* Comm lifecycle pieces that split and shrink reuse (standin_comm.c):
 * joining a clique by id, and a blocking comm's wait for its peers. */
ncclResult_t si_join(ncclComm_t *out, int nranks, const char *id, int rank,
                     int dev, const char *bus, int nonblocking);
/* The PCI bus id of device dev as this thread sees it (standin_bus_id). */
const char *si_bus_id(int dev);
ncclResult_t si_wait_init(struct ncclComm *c);
/* The config's blocking, overridden by NCCL_COMM_BLOCKING=0/1 as NCCL does
 * (init.cc:1647-1649). */
int si_nonblocking(const ncclConfig_t *config, int inherit);
/* Split and shrink (standin_shrink.c); free_all drops their records. */
void si_shrink_fill(coll_nccl_table_t *t);
void si_shrink_free_all(void);
/* The collective calls of the NCCL half (standin_nccl.c). */
void si_nccl_fill_colls(coll_nccl_table_t *t);
void si_nccl_free_all(void);
void si_nccl_fill(coll_nccl_table_t *t);
/* Posts one call's work to its stream now (standin_nccl.c). */
void si_post_call(struct ncclComm *c, int kind, int peer, const si_arg_t *arg,
                  cudaStream_t st);
/* Launch rules (standin_launch.c): a call collected in the open group or
 * launched now; the outermost group end; launches unblocked by an arrival
 * or an abort; starting a job's thread; freeing what is left. */
ncclResult_t si_launch_call(struct ncclComm *c, int kind, int peer,
                            const si_arg_t *arg, cudaStream_t st);
ncclResult_t si_launch_group_end(int force_blocking);
/* An error met inside this thread's open group: the group's end fails with
 * it (ncclGroupErrCheck, include/group.h:89-94). */
void si_group_set_error(ncclResult_t r);
void si_launch_progress(void);
ncclResult_t si_job_start(si_job_t *job, void (*run)(void *));
void si_jobs_free_all(void);
void si_cuda_fill(coll_nccl_table_t *t);
/* The CUDA half's shared pieces (standin_cuda.c): the lock and condition
 * made once; the current device's primary context made on first use
 * (under si.mu). A runtime call without a driver fails as CUDA's does. */
void si_init_once(void);
void si_touch_ctx(void);
#define SI_NO_DRIVER()                                        \
  do {                                                        \
    if (si.cfg.no_driver) return cudaErrorInsufficientDriver; \
  } while (0)
/* Streams and events (standin_stream.c): the runtime's stream, event and
 * copy calls into the table; each device's legacy default stream made at
 * install, and every stream, its work and every event freed at uninstall
 * (both under si.mu). */
void si_stream_fill(coll_nccl_table_t *t);
void si_streams_install(void);
void si_streams_free_all(void);

#endif
