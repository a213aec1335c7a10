/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_comm.h: the NCCL backend's per-comm state and requests, shared by the
 * files of src/nccl. The design (src/nccl/README.md) in short:
 *
 * Every NCCL comm is nonblocking. NCCL 2.28 answers ncclInProgress for
 * every group end of a multi-rank comm and launches the work from a thread
 * of its own (group.cc:706-738), so every call settles before it returns:
 * outside the issue guard, on the caller's thread, it polls
 * ncclCommGetAsyncError until NCCL took the work (bounded by the comm's
 * timeout, ended by its abort handle). When a call returns COLL_OK its work
 * is on the stream, before anything the caller queues next.
 *
 * coll_abort never calls into NCCL in a way that waits for a stream:
 * ncclCommRevoke (2.28+) stops the comm's kernels and returns; older NCCLs
 * get ncclCommAbort on a reaper thread. Freeing NCCL's comm is left to
 * coll_comm_destroy. */
#ifndef COLL_NCCL_NCCL_COMM_H
#define COLL_NCCL_NCCL_COMM_H

#include <stdatomic.h>
#include <uv.h>

#include "core/comm.h"
#include "cuda/gpu_table.h"
#include "nccl/nccl_premul.h"

typedef struct coll_nccl_req coll_nccl_req_t;

typedef struct coll_nccl_be {
  const coll_nccl_table_t *t;
  coll_comm_t *comm; /* back pointer: its abort handle, name, timeout */
  ncclComm_t nc;     /* freed by destroy (or by the reaper, nc_gone) */
  int dev;           /* the comm's CUDA device */
  int version;       /* ncclGetVersion's code */
  /* mu orders every NCCL call on nc made by the comm's thread while it
   * waits (polling) against the one another thread makes when it aborts:
   * NCCL has no lock of its own there. torn, set under mu by whoever took
   * the teardown, ends every wait and makes abort a no-op; from then on
   * only the comm's own thread (shrink, destroy) passes nc to NCCL. */
  uv_mutex_t mu;
  atomic_int torn;
  /* How the abort left nc (set under mu with torn): revoked (NCCL 2.28's
   * ncclCommRevoke: the kernels stopped, nc kept for a shrink and for
   * destroy), parked (NCCL 2.27 with COLL_NCCL_SHRINKABLE=1: nc untouched
   * until a shrink with NCCL_SHRINK_ABORT or destroy), or reaped
   * (ncclCommAbort on the reaper thread, which destroy joins; nc_gone). */
  int keep_for_shrink;
  int revoked, parked, reaping, nc_gone;
  uv_thread_t reaper;
  /* A sticky failure (an NCCL error, an async error, a timeout): the comm
   * was aborted for it and every later call reports it. Written once,
   * published by failed (release). */
  atomic_int failed;
  coll_status_t fail_status;
  char fail_why[COLL_ERRMSG_MAX];
  /* 1 while an outer NCCL group (coll_group_*) is open over this comm: a
   * failure is recorded, and the abort waits until the group is closed
   * (NCCL would queue it to the group's end and make that blocking). */
  int in_group;
  /* The comm's thread only. */
  int lost_track; /* work was enqueued without an event to wait on */
  int inprogress; /* NCCL answered ncclInProgress; not yet settled */
  int64_t inprogress_deadline_ms; /* when waiting for that gives up */
  ncclComm_t *child_slot; /* where NCCL writes a split's or shrink's comm */
  cudaEvent_t *events;    /* free events, created on dev */
  int nevents, capevents;
  coll_nccl_req_t *live;               /* requests not yet waited */
  coll_nccl_req_t *batch, *batch_tail; /* p2p not yet given to NCCL */
  void *barrier_buf;                   /* one device float for barriers */
  /* Descriptor agreement (nccl_agree.c), when enabled: a row per rank on
   * the device and its pinned host copy. */
  void *agree_dev;
  int64_t *agree_host;
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
  int64_t start_by_ms; /* work that has not started by then times out (twice
                          the timeout from the call); -1: no timeout */
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
 * the caller holds the issue guard. Inside an outer group (in_group) the
 * abort waits for coll__nccl_fail_flush, after the group's end. */
coll_status_t coll__nccl_fail(coll_nccl_be_t *be, coll_status_t s, int locked);
/* Aborts a comm whose failure was recorded inside an outer group. Under the
 * issue guard, the group closed. */
void coll__nccl_fail_flush(coll_nccl_be_t *be);
/* An error NCCL returned for a call on the comm (an enqueue, a group end,
 * an op): NCCL keeps it as the nonblocking comm's state, which fails every
 * later call (enqueue.cc:2660-2661, group.cc:381-390), so it is sticky here
 * too, invalid argument included. Under the guard. */
coll_status_t coll__nccl_enqueue_error(coll_nccl_be_t *be, ncclResult_t r,
                                       const char *what);
/* COLL_OK unless `stream` is cudaStreamPerThread, which NCCL's launch
 * thread would resolve to a stream of its own (INVALID_ARG naming it). */
coll_status_t coll__nccl_check_stream(const void *stream, const char *what);

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
 * took the work, records the completion events of the requests it held.
 * *busy = 1 while still in progress. The comm's thread, outside the
 * guard. */
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
 * keep_wanted: an abort must park the comm for a shrink (NCCL 2.27, which
 * can shrink but not revoke, with COLL_NCCL_SHRINKABLE=1). */
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
