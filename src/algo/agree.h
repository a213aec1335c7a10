/* SPDX-License-Identifier: Apache-2.0 */
/* agree.h: the descriptor agreement's state and its wire form, shared by
 * the standalone agreement (agree.c) and the small allreduce that carries
 * the agreement in its own messages (allreduce_rd_checked.c).
 *
 * Both send the same message pattern on the same tag (ALGO_PH_AGREE of the
 * collective's sequence number): recursive doubling, with the ranks from p
 * (the largest power of two below n) folded into rank - p first. Each
 * message begins with the sender's state (COLL_AGREE_BYTES); a message of
 * the folded allreduce carries the sender's partial result after it, at
 * most COLL_AGREE_PAYLOAD_MAX bytes. Every agreement receive has room for
 * that much, so ranks that took different paths (their descriptors differ)
 * still read each other's state and all report the mismatch. */
#ifndef COLL_ALGO_AGREE_H
#define COLL_ALGO_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"

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

/* The verdict from every rank's descriptor at once (all[p]: the one at
 * position p of ctx), for an algorithm where every rank sees them all
 * (allreduce_shm.c): COLL_OK if they agree, else COLL_ERR_LENGTH_MISMATCH
 * with the text the agreement gives at position 0, so that every rank
 * reports the same. `mine` is this rank's own descriptor. */
coll_status_t coll__agree_seen(const coll_algo_ctx_t *ctx,
                               const coll_desc_t *all, const coll_desc_t *mine);

#endif
