/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_comm.h: the NCCL backend's per-comm state and requests, shared by the
 * files of src/nccl. */
#ifndef COLL_NCCL_NCCL_COMM_H
#define COLL_NCCL_NCCL_COMM_H

#include <stdatomic.h>
#include <uv.h>

#include "core/comm.h"
#include "cuda/gpu_table.h"

typedef struct coll_nccl_req coll_nccl_req_t;

typedef struct coll_nccl_be {
  const coll_nccl_table_t *t;
  coll_comm_t *comm; /* back pointer: its abort handle, name, timeout */
  ncclComm_t nc;     /* freed by abort (torn = 1) or by destroy */
  int dev;           /* the comm's CUDA device */
  int version;       /* ncclGetVersion's code */
  /* mu guards nc between the comm's thread polling for async errors and
   * another thread aborting: once torn is 1 (set under mu), nc is never
   * passed to NCCL again. */
  uv_mutex_t mu;
  atomic_int torn;
  /* A sticky failure found by a wait (async error, timeout): the comm was
   * aborted for it and every later call reports it. Written by the comm's
   * thread only, published by failed (release). */
  atomic_int failed;
  coll_status_t fail_status;
  char fail_why[COLL_ERRMSG_MAX];
  /* The comm's thread only. */
  int lost_track;      /* work was enqueued without an event to wait on */
  cudaEvent_t *events; /* free events, created on dev */
  int nevents, capevents;
  coll_nccl_req_t *live; /* requests not yet waited */
  void *barrier_buf;     /* one device float for barriers */
} coll_nccl_be_t;

struct coll_nccl_req {
  coll_request_t hdr;
  const coll_nccl_table_t *t;
  coll_nccl_be_t *be; /* NULL once the comm was destroyed */
  coll_nccl_req_t *prev, *next;
  cudaEvent_t ev;
  coll_work_kind_t kind;
  int64_t deadline_ms; /* absolute; < 0 none */
  size_t *received;    /* recv: set to count on success */
  size_t count;
  int done;
  coll_status_t status;
  char err[COLL_ERRMSG_MAX];
};

/* Wraps an initialized NCCL comm on device dev into a coll comm. Takes nc in
 * all cases (destroyed if this fails). */
coll_status_t coll__nccl_comm_wrap(const coll_nccl_table_t *t, ncclComm_t nc,
                                   int dev, int rank, int world,
                                   const coll_comm_config_t *cfg,
                                   coll_comm_t **out);

/* COLL_OK if new work may be enqueued, else the sticky failure or
 * COLL_ERR_ABORTED (with text). */
coll_status_t coll__nccl_usable(coll_nccl_be_t *be, const char *what);

/* Enqueues w on stream st (the comm's device is current). Records nothing
 * after it: the caller records the completion event once the outermost NCCL
 * group ended. */
coll_status_t coll__nccl_enqueue(coll_nccl_be_t *be, const coll_work_t *w,
                                 cudaStream_t st);

/* Requests (nccl_request.c). new: allocates and takes an event (the comm's
 * device must be current). arm: records the event on st and links the
 * request to the comm. discard: frees a request that was never armed. */
coll_status_t coll__nccl_req_new(coll_nccl_be_t *be, const coll_work_t *w,
                                 coll_nccl_req_t **out);
coll_status_t coll__nccl_req_arm(coll_nccl_req_t *r, cudaStream_t st);
void coll__nccl_req_discard(coll_nccl_req_t *r);
/* Completes the request (polling, see nccl_request.c) and frees it. */
coll_status_t coll__nccl_req_wait(coll_nccl_req_t *r);
/* Detaches every live request from a comm being destroyed (they complete
 * with COLL_ERR_ABORTED); returns 1 if any had work still running. */
int coll__nccl_req_orphan_all(coll_nccl_be_t *be);
/* Frees the comm's pool of events (the comm's device current). */
void coll__nccl_events_free(coll_nccl_be_t *be);

#endif
