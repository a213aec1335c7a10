/* SPDX-License-Identifier: Apache-2.0 */
/* agree.h: the descriptor check, the one mechanism by which every CPU
 * collective learns that the ranks called it alike (the context's
 * `check`, algo.h).
 *
 * Its state and verdict (agree.c) travel in one of two forms, by what the
 * transport has:
 *  - over messages (check.c): recursive doubling on the tag ALGO_PH_AGREE
 *    of the collective's sequence number, with the ranks from p (the
 *    largest power of two below n) folded into rank - p first. Each
 *    message begins with the sender's state. An algorithm whose own
 *    messages follow that pattern carries its data right after the state
 *    (recursive doubling, the halving of halving-doubling: "carriers"),
 *    at most COLL_AGREE_PAYLOAD_MAX bytes; any other runs the pattern
 *    alone first (coll__check_alone). Every receive of the pattern has
 *    room for the largest payload, so ranks that took different paths
 *    (their descriptors differ) still read each other's state, and all
 *    report the mismatch;
 *  - over shared memory (allreduce_shm.c): the descriptor in each rank's
 *    note of a round, read once every rank posted it; the shared-memory
 *    allreduce carries it in its first round, anything else runs that
 *    round alone. Every rank sees every note, so every rank replays the
 *    same verdict (coll__agree_seen).
 * Where the transport has shared memory the check is always a round, so
 * that ranks on different algorithms meet. */
#ifndef COLL_ALGO_AGREE_H
#define COLL_ALGO_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo_util.h"

#define COLL_AGREE_DESC_BYTES 44
/* A full state: the descriptor, a flag word, the two ranks and the two
 * descriptors of a known disagreement. */
#define COLL_AGREE_BYTES \
  (COLL_AGREE_DESC_BYTES + 12 + 2 * COLL_AGREE_DESC_BYTES)
/* A state that knows of no disagreement travels compact: the descriptor and
 * a flag word of COLL_AGREE_COMPACT. On a link where every byte counts
 * (1 Gbit/s), the 96 bytes saved on each of a 4-rank agreement's two
 * messages are a tenth of what the check costs a 64 KiB allreduce. */
#define COLL_AGREE_MIN_BYTES (COLL_AGREE_DESC_BYTES + 4)
#define COLL_AGREE_COMPACT 0x80000000u
/* The largest result a folded allreduce message carries. Part of the
 * protocol: every rank must use the same value. */
#define COLL_AGREE_PAYLOAD_MAX ((size_t)64 * 1024)

typedef struct agree_state {
  coll_desc_t mine;
  uint32_t flag;
  int32_t ra, rb; /* a known disagreement, ra < rb (-1: none known) */
  coll_desc_t da, db;
} agree_state_t;

/* A descriptor's wire form (COLL_AGREE_DESC_BYTES, little-endian); an
 * unpacked one names no buffers. */
void coll__desc_pack(unsigned char *p, const coll_desc_t *d);
void coll__desc_unpack(const unsigned char *p, coll_desc_t *d);
/* 1 if a and b describe the same call (their buffers aside). */
int coll__desc_equal(const coll_desc_t *a, const coll_desc_t *b);

/* The state of a rank that knows only its own descriptor. */
void coll__agree_state_init(agree_state_t *st, const coll_desc_t *d);
/* The full form (COLL_AGREE_BYTES). */
void coll__agree_pack(unsigned char *p, const agree_state_t *st);
/* The compact form where st knows of no disagreement, else the full one;
 * returns its length. */
size_t coll__agree_pack_compact(unsigned char *p, const agree_state_t *st);
/* Reads either form from the n bytes at p; returns its length, or 0 if n
 * is shorter than the form its flag word names. */
size_t coll__agree_unpack(const unsigned char *p, size_t n, agree_state_t *st);
/* Folds in what rank `from` sent. */
void coll__agree_merge(agree_state_t *st, int self, int from,
                       const agree_state_t *in);
/* Takes the final state the rank we folded into computed. */
void coll__agree_adopt(agree_state_t *st, const agree_state_t *in);
/* COLL_ERR_LENGTH_MISMATCH with the text naming the disagreement. */
coll_status_t coll__agree_mismatch(const agree_state_t *st, int self,
                                   const coll_desc_t *mine);
/* The verdict of an algorithm that carried the agreement in its messages
 * (`what`: "the small allreduce"): the mismatch st knows of, else, if a
 * peer with this rank's descriptor took another path (`odd`: a tuning
 * variable set differently), a mismatch saying so, else COLL_OK. */
coll_status_t coll__agree_verdict(const agree_state_t *st, int odd, int self,
                                  const coll_desc_t *mine, const char *what);

/* ---- over messages (check.c) --------------------------------------------- */

/* Where a carried message's data begins in its area: the sender's state
 * goes right before it (a compact one from COLL_CHECK_HEAD - 48, a full one
 * from COLL_CHECK_HEAD - 144), and a compact state received lands so that
 * the data after it starts here too. A multiple of 64. */
#define COLL_CHECK_HEAD 192
/* One message area: the head, then room for anything any path sends. */
#define COLL_CHECK_AREA                                        \
  (COLL_CHECK_HEAD - COLL_AGREE_MIN_BYTES + COLL_AGREE_BYTES + \
   COLL_AGREE_PAYLOAD_MAX)

/* A carrier's check: the state, and whether a peer with this rank's
 * descriptor took another path (a tuning variable set differently). */
typedef struct coll_check {
  agree_state_t st;
  int odd;
  unsigned char *out, *in; /* COLL_CHECK_AREA bytes each */
} coll_check_t;

/* 1 if an algorithm of ctx whose messages follow the pattern carries the
 * check in them for `payload` bytes per message at most: a check is due,
 * the world has two ranks or more, the ranks talk by messages, and the
 * payload fits. Else the algorithm runs coll__check_alone first. */
int coll__check_carried(const coll_algo_ctx_t *ctx, size_t payload);

/* Starts K for ctx's check in `mem` (2 * COLL_CHECK_AREA bytes). */
void coll__check_init(coll_check_t *K, const coll_algo_ctx_t *ctx, void *mem);

/* One step of the pattern with the peer at position `peer`: sends out_n
 * bytes at `out` (if send), receives the peer's in_n bytes (if recv), both
 * posted before either is waited. With K (a check carried), each message
 * is this rank's state then the data (copied after the state, unless `out`
 * is K's own coll__check_mine already), the received state is merged (or
 * adopted: the final one a folded-out rank takes back), and *got points at
 * the peer's data in K's area, or is NULL where the peer sent none this
 * rank can use (a disagreement known, another path: the verdict says
 * which); once either is known this rank sends its state alone. Without K,
 * the data goes straight from `out` and into `in`, and *got is `in`. On a
 * failure the run recorded it. */
typedef struct coll_check_step {
  int peer;
  int send, recv;
  const void *out;
  size_t out_n;
  void *in;
  size_t in_n;
  int adopt;
} coll_check_step_t;
coll_status_t coll__check_swap(coll_check_t *K, algo_run_t *run,
                               algo_req_t req[2], const coll_check_step_t *x,
                               char **got);
/* Where an algorithm may keep the data it sends, so that a step sends it
 * with no copy: right after the room for the state in K's out area. */
static inline char *coll__check_mine(const coll_check_t *K) {
  return (char *)K->out + COLL_CHECK_HEAD;
}
/* Swaps K's areas: the peer's data that the last step received (*got)
 * becomes coll__check_mine, and the old one takes the next receive. For an
 * algorithm that combines into what it received. */
static inline void coll__check_flip(coll_check_t *K) {
  unsigned char *t = K->out;
  K->out = K->in;
  K->in = t;
}

/* The verdict of a carried check once the pattern ended: what coll__agree
 * returns on this rank for the same descriptors, or a mismatch saying that
 * a rank with this one's descriptor ran another path (`what`: "the small
 * allreduce"). */
coll_status_t coll__check_verdict(const coll_check_t *K,
                                  const coll_algo_ctx_t *ctx, const char *what);

/* The verdict from every rank's descriptor at once (all[p]: the one at
 * position p of ctx), for an algorithm where every rank sees them all
 * (allreduce_shm.c): COLL_OK if they agree, else COLL_ERR_LENGTH_MISMATCH
 * with the text the agreement gives at position 0, so that every rank
 * reports the same. `mine` is this rank's own descriptor. */
coll_status_t coll__agree_seen(const coll_algo_ctx_t *ctx,
                               const coll_desc_t *all, const coll_desc_t *mine);

#endif
