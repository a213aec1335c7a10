/* SPDX-License-Identifier: Apache-2.0 */
/* inproc.h: the in-process transport's objects, shared by its files. */
#ifndef COLL_TRANSPORT_INPROC_INPROC_H
#define COLL_TRANSPORT_INPROC_INPROC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "coll.h"
#include "core/desync.h"
#include "core/origin.h"
#include "core/position.h"
#include "transport/common/liveness.h"
#include "transport/common/match.h"
#include "transport/common/rounds.h"
#include "transport/transport.h"

/* Ranks of one process are threads; more than this is a caller's mistake. */
#define INPROC_MAX_WORLD 4096
/* Messages up to this size are copied while the receiver's lock is held:
 * cheaper than releasing and retaking it around a short memcpy. */
#define INPROC_INLINE_COPY 4096
/* How long a wait polls before it sleeps on its condition variable, when
 * every rank thread can have a core of its own. */
#define INPROC_SPIN_NS 20000u
/* Each slot and result area of the shared-memory collectives, per rank
 * (inproc_shared.c): as the shm transport's, so a round stays in cache. */
#define INPROC_COLL_SLOT (256u * 1024u)
/* Request objects are allocated this many at a time per endpoint. */
#define INPROC_REQ_BLOCK 32

/* A request's life: FREE (on its owner's free list), QUEUED (in a list at
 * its home, waiting for a match), BUSY (matched, its data being copied with
 * no lock held), DONE (status final, waiting for the owner's wait). */
enum { INPROC_FREE = 0, INPROC_QUEUED, INPROC_BUSY, INPROC_DONE };

/* Why an endpoint stopped: the text its peers' errors carry. */
enum { INPROC_OPEN = 0, INPROC_ABORTED, INPROC_DESTROYED };

typedef struct inproc_ep inproc_ep_t;
typedef struct inproc_req inproc_req_t;
typedef struct inproc_world inproc_world_t;

/* One send or receive. The fields below `state` are written only while
 * the home endpoint's lock is held (or before the request is published). */
struct inproc_req {
  /* In the home's posted or unexpected queue, keyed (sending rank, tag). */
  coll_match_item_t m;
  inproc_req_t *free_next; /* on the owner's free list */
  inproc_ep_t *owner;      /* the endpoint that posted it */
  inproc_ep_t *home;       /* the receiving endpoint: its lock guards us */
  int is_send;
  int peer; /* destination of a send, source of a receive */
  uint32_t tag;
  const void *sbuf; /* send: the caller's data, read in place */
  void *rbuf;       /* receive: the caller's buffer */
  size_t len;       /* send: bytes; receive: capacity */
  size_t got;       /* receive: bytes that arrived (sent length if longer) */
  atomic_int state; /* INPROC_FREE..INPROC_DONE; DONE stored with release */
  coll_status_t status;
  const inproc_ep_t *lost_by; /* the closed endpoint that failed it */
  int waiting;                /* the owner sleeps on cv */
  uv_cond_t cv;
};

struct inproc_req_block;

/* One rank's endpoint. Aligned so that two endpoints' locks never share a
 * cache line. */
struct inproc_ep {
  _Alignas(64) uv_mutex_t mu; /* guards the fields up to free_mu and the
                                 state of every request whose home this is */
  uv_cond_t idle_cv;          /* broadcast when a copy or a close finishes */
  int idle_waiters;
  coll_match_q_t posted;     /* receives posted here, in posting order */
  coll_match_q_t unexpected; /* sends to here not yet matched, in order */
  int close_state;           /* 0 open, 1 closing, 2 closed */
  atomic_int lost;           /* INPROC_OPEN until the endpoint closes */
  atomic_int closed;         /* 1 once a close finished: lists empty for good */
  /* Why it closed (kept before `lost` is set), and the first origin it
   * saw in a peer's close, which its own close forwards. */
  coll_origins_t origins;
  /* Request objects. The contract allows one calling thread at a time,
   * but a comm may post point-to-point messages from its caller's thread
   * while its worker runs a collective: a lock of their own, uncontended
   * in the common case, keeps that safe. */
  uv_mutex_t free_mu;
  inproc_req_t *free_reqs;
  struct inproc_req_block *blocks;
  /* Where this rank's comm is: written by its threads, read by a peer
   * whose collective timed out (inproc_desync.c). */
  coll_pos_t pos;
  /* The rounds of the collectives designed for shared memory
   * (inproc_shared.c, common/rounds.h): this rank's control (its flags
   * and notes, which every peer reads), its view of every rank's, and its
   * two slots and two result areas in coll_mem (NULL: the world has
   * none). Only this rank's collective thread writes them. */
  coll_round_ctl_t round_ctl;
  coll_rounds_t rounds;
  char *coll_mem;
  /* 1 while this rank's collective thread reads its peers' buffers (the
   * direct allreduce: read_begin / read_end of common/rounds.h). */
  _Atomic int coll_reading;
  /* Constant after creation. */
  inproc_world_t *w;
  int rank;
};

/* The endpoints of one coll_inproc_create call, freed with the last one. */
struct inproc_board; /* inproc_shrink.c */

struct inproc_world {
  int size;
  struct inproc_board *board; /* the survivors' agreement; NULL: none yet */
  int crowded;                /* the rank threads outnumber the cores */
  uint64_t spin_ns;           /* how long a wait polls; 0 when crowded */
  atomic_int live;            /* endpoints not yet destroyed */
  inproc_ep_t *eps;
  /* The desync report of the first rank that timed out. */
  coll_report_cell_t report;
  /* Every rank's round control and areas, as the endpoints' rounds see
   * them (inproc_shared.c). Waiters on the flags sleep on flag_cv; posts
   * and closes broadcast it. */
  coll_round_ctl_t **round_ctl;
  char **round_mem;
  uv_mutex_t flag_mu;
  uv_cond_t flag_cv;
  atomic_int flag_sleepers;
};

/* The vtable slots (inproc_match.c, inproc_wait.c, inproc_close.c). */
coll_status_t coll__inproc_isend(void *ctx, int peer, uint32_t tag,
                                 const void *buf, size_t len, void **req);
coll_status_t coll__inproc_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                                 size_t cap, void **req);
coll_status_t coll__inproc_wait(void *ctx, void *req, int64_t timeout_ms,
                                size_t *len);
void coll__inproc_abort(void *ctx);
void coll__inproc_destroy(void *ctx);
/* The probe hook (transport.h), inproc_probe.c. */
int coll__inproc_probe(void *ctx, int peer, uint32_t tag);

/* Marks `ep` lost for `why` (INPROC_ABORTED / _DESTROYED), a failure that
 * started at o (or at the origin ep saw first), fails every request that
 * involves it and waits for the copies in flight that touch its buffers.
 * Idempotent: a later call returns once the first one finished. Any
 * thread. */
void coll__inproc_close(inproc_ep_t *ep, int why, const coll_origin_t *o);
/* The failure hook of libcoll's transports (transport.h): closes ep as
 * aborted, for the origin it saw first, else o. Any thread. */
void coll__inproc_fail(void *ctx, const coll_origin_t *o);
int coll__inproc_origin(void *ctx, coll_origin_t *o);
/* Notes o as the origin `ep` saw in a peer's close (the first one sticks).
 * Any thread. */
/* The desync hooks (transport.h): the peers' positions read from the
 * world, the report left in it. Any thread. */
void coll__inproc_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                      unsigned char *answered);
void coll__inproc_tell(void *ctx, const char *report);
int coll__inproc_heard(void *ctx, char *buf, size_t n);
void coll__inproc_note_origin(inproc_ep_t *ep, const coll_origin_t *o);

/* Records the text of self's failed send/receive with `peer`, ended by
 * the close of x (self: ABORTED; a peer: the status of x's origin), and
 * returns its status. */
coll_status_t coll__inproc_fail_text(const inproc_ep_t *self, int is_send,
                                     int peer, uint32_t tag,
                                     const inproc_ep_t *x);

/* Sets a request's final status and wakes its owner; lost_by: the closed
 * endpoint that ends it, or NULL. Home lock held. */
/* inproc_shrink.c: shrinking (see coll__t_shrink). The board is made
 * with the world and freed with it; a rank is gone for the agreement once
 * its owner aborted it (leave) or destroyed it. */
coll_status_t coll__inproc_board_new(inproc_world_t *w);
void coll__inproc_board_free(inproc_world_t *w);
void coll__inproc_board_gone(inproc_world_t *w, int rank);
coll_status_t coll__inproc_shrink(void *ctx, int64_t deadline_ms,
                                  coll_transport_t **out);
void coll__inproc_leave(void *ctx);

void coll__inproc_complete(inproc_req_t *r, coll_status_t s,
                           const inproc_ep_t *lost_by);

/* inproc_shared.c: the rounds' memory. alloc gives every rank its slots
 * and sets up every endpoint's rounds, or gives none (returns 0) when
 * memory is short; free releases them; rounds is the rank's, or NULL when
 * there are none; wake ends every flag wait's sleep (a close calls it). */
int coll__inproc_shared_alloc(inproc_world_t *w);
void coll__inproc_shared_free(inproc_world_t *w);
coll_rounds_t *coll__inproc_rounds(inproc_ep_t *ep);
void coll__inproc_shared_wake(inproc_world_t *w);
/* Returns once no endpoint but x is reading its peers' buffers (x is
 * closed: none starts again). */
void coll__inproc_shared_quiesce(inproc_world_t *w, const inproc_ep_t *x);

/* A request from the owner's free list (NULL when out of memory) / back to
 * it. Any thread calling into the endpoint. */
inproc_req_t *coll__inproc_req_get(inproc_ep_t *ep);
void coll__inproc_req_put(inproc_ep_t *ep, inproc_req_t *r);
/* Frees every request object of the endpoint, at destroy. */
void coll__inproc_req_free_all(inproc_ep_t *ep);

static inline int inproc_state(const inproc_req_t *r) {
  return atomic_load_explicit(&((inproc_req_t *)r)->state,
                              memory_order_acquire);
}

/* The request a queue item belongs to. */
static inline inproc_req_t *inproc_req_of(const coll_match_item_t *it) {
  return COLL_MATCH_OWNER(it, inproc_req_t, m);
}

/* Waits on the endpoint's idle_cv. Its lock held. */
static inline void inproc_idle_wait(inproc_ep_t *ep) {
  ep->idle_waiters++;
  uv_cond_wait(&ep->idle_cv, &ep->mu);
  ep->idle_waiters--;
}

static inline const char *inproc_why_text(int why) {
  return why == INPROC_DESTROYED ? "destroyed" : "aborted";
}

/* Where x's failure started: valid once x->lost is set. */
static inline const coll_origin_t *inproc_origin(const inproc_ep_t *x) {
  return &x->origins.own.o;
}

/* The status a peer's request ends with when x closed. */
/* Never TIMEOUT: a request it ends is over (coll__origin_req_status). */
static inline coll_status_t inproc_peer_status(const inproc_ep_t *x) {
  return coll__origin_req_status(inproc_origin(x));
}

#endif
