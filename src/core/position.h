/* SPDX-License-Identifier: Apache-2.0 */
/* position.h: where a comm is: the collective it is in (or last entered),
 * with its kind, op, dtype, count and root, whether it is inside it or back
 * in user code, and the blocking point-to-point call it waits in, if any.
 * When a collective times out, the ranks compare their positions and the
 * error says which ranks never entered it and which are in another call.
 *
 * Threads. One thread writes the collective part (the one running the
 * comm's collectives) and one the point-to-point part (the comm's user);
 * any thread, or another process over shared memory, reads a snapshot.
 * The collective part is a seqlock over atomics (release stores, acquire
 * loads, no fences), the point-to-point part one atomic word: a reader
 * never sees a torn position, and a write costs a few uncontended stores.
 * The struct holds no pointer, so it may live in memory shared between
 * processes. */
#ifndef COLL_CORE_POSITION_H
#define COLL_CORE_POSITION_H

#include <stdatomic.h>
#include <stdint.h>

/* A blocking point-to-point call a rank waits in. */
enum { COLL_POS_P2P_NONE = 0, COLL_POS_P2P_SEND = 1, COLL_POS_P2P_RECV = 2 };

typedef struct coll_pos_snap {
  uint64_t seq;   /* the collective it is in or last entered; 0: none yet */
  uint64_t count; /* of that collective */
  int kind;       /* coll_work_kind_t of it (0 when seq is 0) */
  int op, dtype;
  int root;    /* -1 where the collective has none */
  int in_call; /* 1: inside collective seq; 0: it returned */
  int p2p;     /* COLL_POS_P2P_*: the point-to-point call it waits in */
  int p2p_peer;
  uint32_t p2p_tag;
  /* 1: the writer stayed mid-write for the whole read (stopped or dead
   * there, or descheduled for long): the collective fields may mix two
   * collectives. */
  int unsettled;
} coll_pos_snap_t;

typedef struct coll_pos {
  _Atomic uint64_t ver; /* odd while the collective part is written */
  _Atomic uint64_t seq, count, meta;
  _Atomic uint64_t p2p;
} coll_pos_t;

/* Zeroes p (no collective yet). Before any other thread can see it. */
void coll__pos_init(coll_pos_t *p);
/* Enters the next collective (seq + 1). The collective writer. */
void coll__pos_enter(coll_pos_t *p, int kind, int op, int dtype, uint64_t count,
                     int root);
/* Back in user code after the collective (whatever it returned). */
void coll__pos_leave(coll_pos_t *p);
/* Enters (kind != NONE) or leaves (NONE) a blocking point-to-point call.
 * The comm's user thread. */
void coll__pos_p2p(coll_pos_t *p, int kind, int peer, uint32_t tag);
/* A consistent copy of p. Any thread. */
void coll__pos_read(const coll_pos_t *p, coll_pos_snap_t *out);

#endif
