/* SPDX-License-Identifier: Apache-2.0 */
/* rounds.h: the slot-and-flag rounds of the collectives designed for
 * shared memory, over any memory every rank of a world can read: threads
 * of one process (the in-process transport) or processes that map each
 * other's regions (the shared-memory transport). One implementation;
 * a provider brings the memory, and says how a rank sleeps, how a post
 * wakes the sleepers, and which peer is gone.
 *
 * Every rank owns a control block (coll_round_ctl_t: three progress
 * flags, COLL_T_FLAG_*, each on a cache line of its own, and two notes)
 * and four areas of slot_bytes: a slot and a result area for each of two
 * buffers, used in alternate rounds. Only its rank writes them; every
 * rank reads them. Rounds count up from 1 on every rank alike: ranks run
 * the same collectives in the same order. A round (algo/shm_round.h):
 * wait until every rank is done with this round's buffer from two rounds
 * before (OUT), write into this rank's slot and note, post IN; wait for
 * every IN; read what the collective needs; post OUT.
 *
 * A peer that closed (aborted, failed, left) before it finished the round
 * (its flag short of the round, or its OUT) gave up on the collective: a
 * wait that meets it fails, naming it, and so does every wait of an
 * endpoint that closed itself. One thread per endpoint. */
#ifndef COLL_TRANSPORT_COMMON_ROUNDS_H
#define COLL_TRANSPORT_COMMON_ROUNDS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "transport/common/waiter.h"

enum { COLL_T_FLAG_IN = 0, COLL_T_FLAG_RED = 1, COLL_T_FLAG_OUT = 2 };
#define COLL_T_NOTE_BYTES 64

/* One rank's control of the rounds. It holds no pointer, so it may live in
 * memory processes map at different addresses. */
typedef struct coll_round_ctl {
  struct {
    _Alignas(64) _Atomic uint64_t v; /* the last round posted */
  } flag[3];
  /* What the rank says about its collective in a round (the descriptor
   * the check compares, where its buffers are), one per buffer; written
   * before its IN of the round, read once a peer saw that IN. */
  _Alignas(64) unsigned char note[2][COLL_T_NOTE_BYTES];
} coll_round_ctl_t;

typedef struct coll_rounds coll_rounds_t;

/* What the provider brings. `arg` is its endpoint. */
typedef struct coll_rounds_ops {
  /* 1 once rank p (this rank included) closed: its flags are final. Any
   * thread; never blocks. */
  int (*gone)(void *arg, int p);
  /* Why a wait on rank p ends: COLL_OK while p may still post; else p's
   * failure (p == this rank: this endpoint's own close) with what happened
   * in buf ("rank 2 aborted, seen by rank 0"; n bytes). May take the
   * provider's lock. */
  coll_status_t (*why)(void *arg, int p, char *buf, size_t n);
  /* A flag was posted: wake the ranks that sleep on the flags. */
  void (*wake)(void *arg);
  /* Sleeps at most ms (< 0: no bound) or until a post or a close: after
   * announcing the sleep, so that wake cannot be missed, it sleeps only
   * while coll__rounds_blocked(R, which, v) holds. */
  void (*sleep)(void *arg, const coll_rounds_t *R, int which, uint64_t v,
                int64_t ms);
  /* Optional (NULL: no direct mode): where every rank's own memory is
   * addressable by the others (threads of one process), a rank reads its
   * peers' buffers only between read_begin, which fails (with a text)
   * where any rank of the world closed, and read_end; a closing endpoint
   * returns only once no peer is between the two, so no buffer is read
   * after its owner's call returned. */
  coll_status_t (*read_begin)(void *arg);
  void (*read_end)(void *arg);
} coll_rounds_ops_t;

struct coll_rounds {
  const char *name; /* the provider's, in texts */
  int rank, world;
  size_t slot_bytes; /* a multiple of 64 */
  /* Every rank's control and areas (slot 0, slot 1, result 0, result 1),
   * as this rank addresses them: the provider's arrays. */
  coll_round_ctl_t *const *ctl;
  char *const *mem;
  uint64_t round; /* the last round this rank began */
  /* This rank's threads waiting on the flags (a heartbeat judges a silent
   * peer only while one does). */
  atomic_int waiters;
  coll_wait_policy_t policy;
  const coll_rounds_ops_t *ops;
  void *arg;
  /* What the rounds suit, for the CPU backend's choice: allreduces of at
   * least allreduce_below bytes take the ring (0: none do); broadcast and
   * allgather run in rounds only below others_below bytes (their largest
   * buffer; 0: never, SIZE_MAX: always), reduce-scatter below
   * reduce_scatter_below; allreduces of at least direct_from bytes read
   * the callers' buffers directly (0: never; needs read_begin). */
  size_t allreduce_below;
  size_t others_below;
  size_t reduce_scatter_below;
  size_t direct_from;
};

/* Sets R up for `rank` of `world` over ctl[] and mem[] (world entries
 * each, the caller's, kept), with ops over arg. Before any other thread
 * uses R. */
void coll__rounds_init(coll_rounds_t *R, const char *name, int rank, int world,
                       size_t slot_bytes, coll_round_ctl_t *const *ctl,
                       char *const *mem, const coll_rounds_ops_t *ops,
                       void *arg, const coll_wait_policy_t *policy);
/* Zeroes a control block. Before any other rank can see it. */
void coll__round_ctl_init(coll_round_ctl_t *c);

/* The next round's number (1, 2, ...). */
static inline uint64_t coll__rounds_next(coll_rounds_t *R) {
  return ++R->round;
}
/* Rank r's slot / result area / note of buffer b (0 or 1). */
static inline char *coll__rounds_slot(const coll_rounds_t *R, int r, int b) {
  return R->mem[r] + (size_t)b * R->slot_bytes;
}
static inline char *coll__rounds_result(const coll_rounds_t *R, int r, int b) {
  return R->mem[r] + (size_t)(2 + b) * R->slot_bytes;
}
static inline unsigned char *coll__rounds_note(const coll_rounds_t *R, int r,
                                               int b) {
  return R->ctl[r]->note[b];
}
/* Rank r's flag `which`. Any thread. */
static inline uint64_t coll__rounds_flag(const coll_rounds_t *R, int r,
                                         int which) {
  return atomic_load_explicit(&R->ctl[r]->flag[which].v, memory_order_acquire);
}

/* Sets this rank's flag `which` to round v (a release: what this rank
 * wrote before is visible to a rank that saw it) and wakes the sleepers. */
void coll__rounds_post(coll_rounds_t *R, int which, uint64_t v);
/* Waits until every rank's flag `which` reached v, before the absolute
 * deadline (coll__now_ms based; < 0 none). Fails with the endpoint's
 * failure (its close, a peer gone before it finished round v, naming it)
 * or COLL_ERR_TIMEOUT naming the first rank behind, with a text; the
 * caller then fails the transport. */
coll_status_t coll__rounds_wait(coll_rounds_t *R, int which, uint64_t v,
                                int64_t deadline_ms);
/* 1 while a wait for `which` at v must go on: some peer is behind, this
 * endpoint is open, and no peer gave up on the round. For the provider's
 * sleep, after it announced itself. Any thread. */
int coll__rounds_blocked(const coll_rounds_t *R, int which, uint64_t v);

/* The direct mode (ops read_begin/read_end): 1 where R has it. */
static inline int coll__rounds_direct(const coll_rounds_t *R) {
  return R->ops->read_begin != NULL && R->direct_from > 0;
}
coll_status_t coll__rounds_read_begin(coll_rounds_t *R);
void coll__rounds_read_end(coll_rounds_t *R);

#endif
