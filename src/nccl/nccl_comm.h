/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_comm.h: the NCCL backend's per-comm state and requests, shared by the
 * files of src/nccl.
 *
 * Every NCCL comm is nonblocking. A call that must wait for peers (the first
 * use of an algorithm or of a point-to-point peer connects, NCCL >= 2.22)
 * returns ncclInProgress; the work reaches the stream only once
 * ncclCommGetAsyncError says ncclSuccess. Under the issue guard the backend
 * only enqueues; every wait for that state (be_settle) runs outside it, on
 * the comm's thread, watching the abort flag and the timeout. */
#ifndef COLL_NCCL_NCCL_COMM_H
#define COLL_NCCL_NCCL_COMM_H

#include <stdatomic.h>
#include <uv.h>

#include "core/comm.h"
#include "cuda/gpu_table.h"
#include "nccl/nccl_premul.h"

typedef struct coll_nccl_req coll_nccl_req_t;

#define COLL_NCCL_MAX_PEND_OPS COLL_DTYPE_COUNT

typedef struct coll_nccl_be {
  const coll_nccl_table_t *t;
  coll_comm_t *comm; /* back pointer: its abort handle, name, timeout */
  ncclComm_t nc;     /* freed by abort (torn = 1) or by destroy */
  int dev;           /* the comm's CUDA device */
  int version;       /* ncclGetVersion's code */
  /* mu guards nc between the comm's thread polling its state and another
   * thread aborting: once torn is 1 (set under mu), nc is never passed to
   * NCCL again. */
  uv_mutex_t mu;
  atomic_int torn;
  /* COLL_NCCL_SHRINKABLE with an NCCL that can shrink: abort marks the
   * comm torn but keeps nc (parked = 1, set under the guard) for a shrink
   * with NCCL_SHRINK_ABORT; destroy aborts it. Only shrink and destroy pass
   * a parked nc to NCCL, both under the guard or after the unlink. */
  int keep_for_shrink;
  int parked;
  /* A sticky failure (an NCCL error, an async error, a timeout): the comm
   * was aborted for it and every later call reports it. Written once,
   * published by failed (release). */
  atomic_int failed;
  coll_status_t fail_status;
  char fail_why[COLL_ERRMSG_MAX];
  /* The comm's thread only. */
  int lost_track; /* work was enqueued without an event to wait on */
  int inprogress; /* NCCL answered ncclInProgress; not yet settled */
  int64_t inprogress_deadline_ms; /* when waiting for that gives up */
  ncclRedOp_t pend_ops[COLL_NCCL_MAX_PEND_OPS]; /* destroyed once settled */
  int npend_ops;
  cudaEvent_t *events; /* free events, created on dev */
  int nevents, capevents;
  coll_nccl_req_t *live;               /* requests not yet waited */
  coll_nccl_req_t *batch, *batch_tail; /* p2p not yet given to NCCL */
  void *barrier_buf;                   /* one device float for barriers */
  /* Descriptor agreement (nccl_agree.c), when enabled: a row per rank on
   * the device and its pinned host copy, and the readback's event. */
  void *agree_dev;
  int64_t *agree_host;
  cudaEvent_t agree_ev;
} coll_nccl_be_t;

#define AGREE_WORDS 8 /* int64 per rank's row */

typedef enum {
  NREQ_QUEUED = 0, /* point-to-point held for the next fused launch */
  NREQ_LAUNCHING,  /* given to NCCL, which answered ncclInProgress */
  NREQ_RUNNING     /* on the stream: its completion event is recorded */
} coll_nreq_state_t;

struct coll_nccl_req {
  coll_request_t hdr;
  const coll_nccl_table_t *t;
  coll_nccl_be_t *be;           /* NULL once the comm was destroyed */
  coll_nccl_req_t *prev, *next; /* in be->live */
  coll_nccl_req_t *batch_next;  /* in be->batch while QUEUED */
  coll_nreq_state_t state;
  cudaStream_t st;
  cudaEvent_t start; /* recorded before the work: the caller's earlier
                        stream work is done once it completes */
  cudaEvent_t ev;    /* recorded after the work */
  coll_work_t w;     /* point-to-point: the call, until launched */
  coll_work_kind_t kind;
  int64_t deadline_ms; /* absolute once the start event completed; else -1 */
  size_t *received;    /* recv: set to count on success */
  size_t count;
  int done;
  coll_status_t status;
  char err[COLL_ERRMSG_MAX];
};

/* Wraps an initialized NCCL comm on device dev into a coll comm. Takes nc in
 * all cases (aborted if this fails). */
coll_status_t coll__nccl_comm_wrap(const coll_nccl_table_t *t, ncclComm_t nc,
                                   int dev, int rank, int world,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out);

/* COLL_OK if new work may be enqueued, else the sticky failure or
 * COLL_ERR_ABORTED (with text). */
coll_status_t coll__nccl_usable(coll_nccl_be_t *be, const char *what);

/* Records the comm's first fatal failure (this thread's error text is the
 * reason) and aborts it; returns the status with the sticky text. `locked`:
 * the caller holds the issue guard. */
coll_status_t coll__nccl_fail(coll_nccl_be_t *be, coll_status_t s, int locked);
/* An NCCL result from an enqueue or a group end: invalid argument/usage
 * stays the call's own error; anything else (a launch may have half
 * happened) is sticky. Under the guard. */
coll_status_t coll__nccl_enqueue_error(coll_nccl_be_t *be, ncclResult_t r,
                                       const char *what);

/* Enqueues w on stream st (the comm's device is current) inside its own
 * NCCL group, returning NCCL's answer for the group (ncclSuccess or
 * ncclInProgress) through *res. Validates everything before the group. */
coll_status_t coll__nccl_enqueue(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st, ncclResult_t *res);
/* The NCCL dtype of dt (bf16 needs NCCL >= 2.10). */
coll_status_t coll__nccl_dtype(const coll_nccl_be_t *be, coll_dtype_t dt,
                               ncclDataType_t *out, const char *what);
/* Enqueues one request's point-to-point call (inside an open group). */
ncclResult_t coll__nccl_enqueue_p2p(coll_nccl_be_t *be,
                                    const coll_nccl_req_t *r);

/* Requests (nccl_request.c). new: allocates with its events (the comm's
 * device current), records the start event on st. launched: the enqueue
 * returned res: records the completion event (ncclSuccess) or leaves the
 * request waiting for the comm to settle; links it to the comm. discard:
 * frees a request that was never launched. */
coll_status_t coll__nccl_req_new(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st, coll_nccl_req_t **out);
/* The two halves of new, for point-to-point requests held before launch:
 * alloc (no events), events (takes both, records the start on st). */
coll_nccl_req_t *coll__nccl_req_alloc(coll_nccl_be_t *be, const coll_work_t *w);
coll_status_t coll__nccl_req_events(coll_nccl_req_t *r, cudaStream_t st);
coll_status_t coll__nccl_req_launched(coll_nccl_req_t *r, ncclResult_t res);
void coll__nccl_req_discard(coll_nccl_req_t *r);
/* Completes the request (polling, see nccl_request.c) and frees it. */
coll_status_t coll__nccl_req_wait(coll_nccl_req_t *r);
/* Detaches every live request from a comm being destroyed (they complete
 * with COLL_ERR_ABORTED); returns 1 if any had work possibly running. */
int coll__nccl_req_orphan_all(coll_nccl_be_t *be);
/* Frees the comm's pool of events (the comm's device current). */
void coll__nccl_events_free(coll_nccl_be_t *be);

/* Settling (nccl_request.c): one look at an ncclInProgress comm; once NCCL
 * is done, records the events of the requests it held and destroys the
 * reduction ops it kept. *busy = 1 while still in progress. The comm's
 * thread, outside the guard. */
coll_status_t coll__nccl_settle_step(coll_nccl_be_t *be, int *busy,
                                     const char *what);
/* Steps until settled, failed or aborted. */
coll_status_t coll__nccl_settle(coll_nccl_be_t *be, const char *what);

/* Descriptor agreement (nccl_agree.c). wanted: COLL_CHECK_MISMATCH set to
 * a non-zero value explicitly. init/free: its buffers (on the comm's
 * device). agree: before w, outside the guard: COLL_OK when every rank
 * passes the same descriptor, COLL_ERR_LENGTH_MISMATCH on every rank
 * otherwise. */
int coll__nccl_agree_wanted(void);
coll_status_t coll__nccl_agree_init(coll_nccl_be_t *be);
void coll__nccl_agree_free(coll_nccl_be_t *be);
coll_status_t coll__nccl_agree(coll_nccl_be_t *be, const coll_work_t *w);

/* Shrink (nccl_shrink.c): the backend's shrink and shrink_exclude slots.
 * keep_wanted: COLL_NCCL_SHRINKABLE is 1 and t can shrink. */
int coll__nccl_keep_wanted(const coll_nccl_table_t *t);
coll_status_t coll__nccl_shrink(coll_comm_t *c, const coll_comm_config_t *cfg,
                                coll_comm_t **out);
coll_status_t coll__nccl_shrink_exclude(coll_comm_t *c, const int *exclude,
                                        int n, const coll_comm_config_t *cfg,
                                        coll_comm_t **out);

/* Point-to-point (nccl_p2p.c). queue: under the guard, holds the request.
 * flush: gives every held request to NCCL in one group (the fused launch
 * that lets an isend+irecv exchange complete); takes the guard itself; the
 * comm's thread. With wait = 0 it never blocks: while NCCL is still busy
 * with earlier work it launches nothing and returns COLL_OK. */
coll_status_t coll__nccl_p2p_queue(coll_nccl_be_t *be, const coll_work_t *w,
                                   coll_request_t **out);
coll_status_t coll__nccl_p2p_flush(coll_nccl_be_t *be, int wait,
                                   const char *what);

#endif
