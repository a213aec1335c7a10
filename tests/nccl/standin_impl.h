/* SPDX-License-Identifier: Apache-2.0 */
/* standin_impl.h: the stand-in's shared state (one lock for everything). */
#ifndef COLL_TEST_STANDIN_IMPL_H
#define COLL_TEST_STANDIN_IMPL_H

#include <stdint.h>
#include <uv.h>

#include "standin.h"

#define SI_MAXR 16   /* ranks per clique */
#define SI_MAXDEV 16 /* devices */

enum { SI_OP_COPY, SI_OP_EVENT, SI_OP_COLL, SI_OP_WAIT };

typedef struct si_slot si_slot_t;

typedef struct si_op {
  int kind;
  void *dst; /* copy */
  const void *src;
  size_t bytes;
  struct CUevent_st *ev; /* event marker */
  uint64_t seq;
  si_slot_t *slot; /* collective */
  int rank;
  /* Calls launched by one group onto one stream are one kernel in NCCL:
   * they progress together (fused point-to-point). 0: not fused. */
  uint64_t fuse;
  int finished; /* its slot ran (or its comm was aborted) */
  struct si_op *next;
} si_op_t;

struct CUstream_st {
  int dev;
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
  ncclResult_t fail_next;
  int fail_init_rank; /* -1: none */
  ncclResult_t fail_init;
  int hang;
  uint64_t uid_counter;
  standin_stats_t st;
  char misuse[256];
  char last_error[256]; /* ncclGetLastError's text */
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

struct ncclComm {
  si_clique_t *q;
  int rank, dev;
  int freed;        /* aborted or destroyed: NCCL must not see it again */
  int revoked;      /* shrunk with NCCL_SHRINK_ABORT: its work was ended */
  unsigned shrinks; /* ncclCommShrink calls on it (names the new clique) */
  int nonblocking;  /* config.blocking == 0 */
  /* ncclInProgress until init (or a launch waiting to connect) is done;
   * then ncclSuccess or the error. */
  ncclResult_t async_err;
  uint64_t coll_seq, send_seq[SI_MAXR], recv_seq[SI_MAXR];
  /* By op - ncclNumOps: the scalar (of the op's element type, held exactly
   * in a double) and the element type the op was created for. */
  double premul[SI_MAXOPS];
  ncclDataType_t premul_dt[SI_MAXOPS];
  int premul_live[SI_MAXOPS];
  struct ncclComm *next_all;
};

typedef struct si_arg {
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t dt;
  int op;        /* ncclRedOp_t, or -1 - index for a premul op */
  double factor; /* a premul op's scalar, exact for f16, bf16, f32, f64 */
  int root;
  int posted, at_head;
} si_arg_t;

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
/* Tries to run the collective op (at the head of its stream): 1 when the
 * op is over (ran, or its comm was aborted), 0 while it must wait. */
int si_coll_try(si_op_t *op);
/* NULL or freed comm: records a misuse, returns ncclInvalidUsage. */
ncclResult_t si_comm_ok(struct ncclComm *c, const char *what);
/* Comm lifecycle pieces that ncclCommShrink reuses (standin_comm.c):
 * joining a clique by id, and a blocking comm's wait for its peers. */
ncclResult_t si_join(ncclComm_t *out, int nranks, const char *id, int rank,
                     int nonblocking);
ncclResult_t si_wait_init(struct ncclComm *c);
/* ncclCommShrink (standin_shrink.c), in the table from NCCL 2.27.3. */
void si_shrink_fill(coll_nccl_table_t *t);
/* The collective calls of the NCCL half (standin_nccl.c). */
void si_nccl_fill_colls(coll_nccl_table_t *t);
void si_nccl_free_all(void);
void si_nccl_fill(coll_nccl_table_t *t);
/* Posts one call's work to its stream now (standin_nccl.c). */
void si_post_call(struct ncclComm *c, int kind, int peer, const si_arg_t *arg,
                  cudaStream_t st);
/* Launch rules (standin_launch.c): a call collected in the open group or
 * launched now; the outermost group end; launches unblocked by an arrival
 * or an abort; freeing what waits. */
ncclResult_t si_launch_call(struct ncclComm *c, int kind, int peer,
                            const si_arg_t *arg, cudaStream_t st);
ncclResult_t si_launch_group_end(void);
void si_launch_progress(void);
void si_launch_free_all(void);
void si_cuda_fill(coll_nccl_table_t *t);

#endif
