/* SPDX-License-Identifier: Apache-2.0 */
/* algo.h: the CPU collective algorithms. They see only a context (rank,
 * world, transport calls, a deadline, scratch) and never a socket.
 *
 * Every algorithm runs in place on host memory in a "work dtype" that the
 * CPU backend chose (I8/U8 SUM/AVG arrive widened to I32); op is one of SUM,
 * PROD, MAX, MIN (the backend turns AVG into SUM and scales afterwards).
 * Float results are bit-identical on every rank: each element is combined in
 * one order, on one rank, and then copied.
 *
 * On any failure except a mismatch of the ranks' arguments (coll__agree,
 * coll__fedavg), an algorithm aborts the transport (so no buffer is touched
 * after it returns, and peers waiting on this rank fail at once instead of
 * at their deadline), reaps every request it posted, and returns the first
 * error with a sentence in coll_last_error().
 * One thread per context. */
#ifndef COLL_ALGO_ALGO_H
#define COLL_ALGO_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "transport/transport.h"

/* Tags: bit 31 set (COLL_TAG_RESERVED), then the low 20 bits of the comm's
 * collective sequence number, then an 11-bit phase chosen by the algorithm.
 * Messages of different collectives never match each other. */
#define COLL_ALGO_TAG(seq, phase)                           \
  (COLL_TAG_RESERVED | (((uint32_t)(seq)&0xFFFFFu) << 11) | \
   ((uint32_t)(phase)&0x7FFu))

/* A per-comm scratch area, grown on demand and reused (no malloc per
 * message on the hot path). */
typedef struct coll_scratch {
  void *ptr;
  size_t cap;
} coll_scratch_t;

/* Returns scratch of at least `bytes` (64-byte aligned), or NULL with
 * COLL_ERR_NO_MEMORY recorded. */
void *coll__scratch_get(coll_scratch_t *s, size_t bytes);
void coll__scratch_free(coll_scratch_t *s);

/* Ranks in a context are positions in the walk order: the algorithms send
 * to position rank+1, to the peer rank^2^k, and so on, and coll__algo_isend
 * / irecv turn a position into the comm rank ranks[] names. A CPU comm
 * orders positions by host (topo.h); a sub-context of the two-level
 * allreduce is one host's ranks, or one rank of each host. Roots and block
 * layouts the caller sees stay in comm ranks. */
typedef struct coll_topo coll_topo_t;

typedef struct coll_algo_ctx {
  coll_transport_t *t;
  int rank;                /* this rank's position */
  int world;               /* number of positions */
  const int *ranks;        /* position -> comm rank; NULL: the identity */
  const int *pos;          /* comm rank -> position; NULL: the identity (only a
                              context of the whole comm has a comm rank for each) */
  const coll_topo_t *topo; /* the comm's hosts; NULL: one host */
  uint32_t sub_phase;      /* or'ed into the tag's phase: sub-collectives */
  int64_t deadline_ms;     /* absolute (coll__now_ms); < 0: none */
  uint32_t seq;            /* this collective's sequence number on the comm */
  coll_scratch_t *scratch;
  size_t seg_bytes; /* ring pipeline segment (> 0) */
  /* Longer blocks' segments grow up to this (ring.c); <= seg_bytes: the
   * segment is seg_bytes at every size. */
  size_t seg_max_bytes;
  /* The descriptor every rank must have passed to this collective, or NULL
   * (no check: it is off, or it ran already). An algorithm whose first
   * messages follow the check's pattern carries it in them (agree.h); the
   * caller runs it alone (coll__check_alone) before any other. */
  const struct coll_desc *check;
} coll_algo_ctx_t;

/* The descriptor every rank must agree on for one collective. A batch
 * (allreduce_batch, premul_sum) sets COLL_DESC_BATCH in kind and describes
 * its buffers by their number, the first one, the total and a hash of the
 * whole (dtype, count) list, so that an error can say what differs. */
typedef struct coll_desc {
  uint32_t kind; /* coll_work_kind_t, | COLL_DESC_BATCH for a batch */
  int32_t dtype; /* batch: the first buffer's (-1: none) */
  int32_t op;
  int32_t root;   /* -1 where the collective has none */
  uint64_t count; /* batch: the first buffer's */
  uint64_t nbufs; /* batch: number of buffers; else 0 */
  uint64_t total; /* batch: elements in all buffers */
  uint32_t list;  /* batch: hash of every (dtype, count), in order */
  /* This rank's buffers, named in full in an error; never sent. */
  const coll_buffer_t *bufs;
} coll_desc_t;
#define COLL_DESC_BATCH 0x10000u

/* Fills d for a batch of nbufs buffers of collective `kind` with op. */
void coll__desc_batch(coll_desc_t *d, uint32_t kind, coll_op_t op,
                      const coll_buffer_t *bufs, size_t nbufs);

/* Checks that every rank passed the same descriptor d, over messages
 * (check.c): recursive doubling over the 44-byte descriptor plus a
 * "mismatch seen" flag, so every rank learns of any disagreement in
 * ceil(log2 n) (+2) steps with a fixed message pattern. Returns
 * COLL_ERR_LENGTH_MISMATCH on every rank if any two differ, with a text
 * naming what differs and a rank that differs. */
coll_status_t coll__agree(const coll_algo_ctx_t *ctx, const coll_desc_t *d);
/* Runs ctx's check (ctx->check; nothing when NULL or for one rank) before
 * an algorithm that does not carry it, in the form the transport needs: a
 * round of notes where it maps shared memory (coll__agree_shm), else the
 * messages (coll__agree). Statuses as coll__agree. */
coll_status_t coll__check_alone(const coll_algo_ctx_t *ctx);

/* The comm rank at position p of ctx, and the position of comm rank r. */
static inline int coll__ctx_rank(const coll_algo_ctx_t *ctx, int p) {
  return ctx->ranks != NULL ? ctx->ranks[p] : p;
}
static inline int coll__ctx_pos(const coll_algo_ctx_t *ctx, int r) {
  return ctx->pos != NULL ? ctx->pos[r] : r;
}

/* Allreduce of count elements of dt in place on buf. None of these
 * carries ctx->check: the caller runs it first. */
coll_status_t coll__allreduce_ring(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t count, coll_dtype_t dt, coll_op_t op);
/* The ring allreduce of a world of 2, its two passes woven into one
 * stream (allreduce_pair.c). */
coll_status_t coll__allreduce_pair(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t count, coll_dtype_t dt, coll_op_t op);
/* The ring allreduce with rounds bounded in bytes to the pair's lead of
 * raw data (allreduce_ring.c): what a world of 2 runs in a build without
 * the pair, for measuring the two side by side. */
coll_status_t coll__allreduce_ring_bounded(const coll_algo_ctx_t *ctx,
                                           void *buf, size_t count,
                                           coll_dtype_t dt, coll_op_t op);
/* Two-level allreduce over ctx->topo's hosts (coll__topo_two_level must
 * hold, else it runs coll__allreduce_ring): a ring reduce-scatter among the
 * ranks of each host, a ring allreduce of each slice among the ranks with
 * the same local index on every host (every rank is a leader for its
 * slice), a ring allgather within each host. Only 1/local of the buffer
 * crosses between hosts per rank. */
coll_status_t coll__allreduce_two_level(const coll_algo_ctx_t *ctx, void *buf,
                                        size_t count, coll_dtype_t dt,
                                        coll_op_t op);

/* The allreduces that carry ctx->check in their first messages or round
 * (agree.h): they read count elements at src and write the result to dst
 * (may be src), dst only once every rank is known to have passed the same
 * descriptor; on a mismatch they return what coll__agree would, on every
 * rank, with dst untouched. Where they cannot carry it (the size, the
 * world, the transport) they run it alone first. Each consumes one
 * sequence number, as coll__agree does, so ranks that disagree stay in
 * step. */
/* Recursive doubling. */
coll_status_t coll__allreduce_rd(const coll_algo_ctx_t *ctx, const void *src,
                                 void *dst, size_t count, coll_dtype_t dt,
                                 coll_op_t op);
/* Reduce-scatter by recursive halving, allgather by recursive doubling:
 * the ring's bytes in 2 log2(n) steps (allreduce_rh.c); the check rides in
 * the halving. */
coll_status_t coll__allreduce_rh(const coll_algo_ctx_t *ctx, const void *src,
                                 void *dst, size_t count, coll_dtype_t dt,
                                 coll_op_t op);
/* Through the transport's shared memory (coll__t_rounds(t) must not be
 * NULL): every element combined in rank order 0..world-1; the check rides
 * in the first round, which runs even when count is 0. */
coll_status_t coll__allreduce_shm(const coll_algo_ctx_t *ctx, const void *src,
                                  void *dst, size_t count, coll_dtype_t dt,
                                  coll_op_t op);
/* The check alone over the transport's shared memory: one round with no
 * data, that meets the first round of coll__allreduce_shm on ranks that
 * run it. Statuses as coll__agree. */
coll_status_t coll__agree_shm(const coll_algo_ctx_t *ctx, const coll_desc_t *d);
/* Tests: called by the direct shared-memory allreduce on every rank each
 * time it starts reading its peers' buffers (NULL: not called). */
extern void (*coll__shm_direct_read_hook)(int rank);
/* The other collectives designed for shared memory (shm_round.h), with
 * the same requirement. */
/* Reduce-scatter through shared memory: src holds world blocks of count
 * elements, block r destined for comm rank r; dst (count elements) gets
 * this rank's block reduced over the ranks in rank order 0..world-1.
 * src is only read. */
coll_status_t coll__reduce_scatter_shm(const coll_algo_ctx_t *ctx,
                                       const void *src, void *dst, size_t count,
                                       coll_dtype_t dt, coll_op_t op);
/* Allgather through shared memory: buf holds world blocks of block_bytes,
 * this rank's filled in; on return every block is. */
coll_status_t coll__allgather_shm(const coll_algo_ctx_t *ctx, void *buf,
                                  size_t block_bytes);
/* Broadcast through shared memory of bytes at buf from comm rank root. */
coll_status_t coll__broadcast_shm(const coll_algo_ctx_t *ctx, void *buf,
                                  size_t bytes, int root);
/* buf holds world*count elements, block r being comm rank r's; on return
 * this rank's block holds its reduced values (other blocks hold partial
 * sums: scratch for the caller). */
coll_status_t coll__reduce_scatter_ring(const coll_algo_ctx_t *ctx, void *buf,
                                        size_t count, coll_dtype_t dt,
                                        coll_op_t op);
/* buf holds world blocks of `block_bytes`, one per comm rank; this rank's
 * is filled in; on return every block is. */
coll_status_t coll__allgather_ring(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t block_bytes);
/* Broadcast of `bytes` at buf from comm rank root: down a binomial tree,
 * or down a pipelined chain (broadcast.c). */
coll_status_t coll__broadcast_tree(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t bytes, int root);
coll_status_t coll__broadcast_chain(const coll_algo_ctx_t *ctx, void *buf,
                                    size_t bytes, int root);
/* Reduce count elements in place on buf; the result is valid on comm rank
 * root only: up a binomial tree, or a ring reduce-scatter and a gather of
 * the blocks (reduce.c). */
coll_status_t coll__reduce_tree(const coll_algo_ctx_t *ctx, void *buf,
                                size_t count, coll_dtype_t dt, coll_op_t op,
                                int root);
coll_status_t coll__reduce_ring(const coll_algo_ctx_t *ctx, void *buf,
                                size_t count, coll_dtype_t dt, coll_op_t op,
                                int root);
coll_status_t coll__barrier(const coll_algo_ctx_t *ctx);

/* Gather (gather.c): every rank's `block` bytes at mine go to comm rank
 * root, which receives rank r's into buf + r * block (its own block it
 * places itself; mine is not read there). */
coll_status_t coll__gather(const coll_algo_ctx_t *ctx, const void *mine,
                           void *buf, size_t block, int root);
/* Scatter: root's buf holds a block of `block` bytes per comm rank; rank r
 * receives block r into mine (the root places its own). */
coll_status_t coll__scatter(const coll_algo_ctx_t *ctx, const void *buf,
                            void *mine, size_t block, int root);

/* One rank's blocks of an all-to-all, indexed by comm rank: send[r] and
 * send_bytes[r] go to rank r; from rank r, recv_bytes[r] are expected at
 * recv[r]. A block's pointer may be NULL when its length is 0. */
typedef struct coll_a2a {
  const void *const *send;
  const size_t *send_bytes;
  void *const *recv;
  const size_t *recv_bytes;
} coll_a2a_t;
/* All-to-all (alltoall.c), this rank's own block copied. A block that
 * arrives longer or shorter than expected (the callers' counts differ) is
 * consumed, nothing is written past recv_bytes, and the run goes on: then
 * COLL_ERR_LENGTH_MISMATCH naming the first such block, its sender in
 * *bad_from (-1 otherwise), with the transport still up. Any other
 * failure is fatal, as for every algorithm. */
coll_status_t coll__alltoallv(const coll_algo_ctx_t *ctx, const coll_a2a_t *a,
                              int *bad_from);

/* Federated averaging with a deadline (coll_federated_average): rank 0
 * averages its own data and the contributions that arrive before
 * deadline_ms (absolute, like the context's), and sends the mean and the
 * participant count to every rank, into data and *participants (may be NULL). A
 * late contribution never stalls a round: rank 0 receives it later and drops
 * it. *state (NULL at first, allocated here) carries the round counter and
 * those late requests from one round to the next. */
typedef struct coll_fedavg coll_fedavg_t;
coll_status_t coll__fedavg(const coll_algo_ctx_t *ctx, coll_fedavg_t **state,
                           float *data, size_t count, int64_t deadline_ms,
                           int *participants);
/* Ends the late requests still pending (aborting t if there are any) and
 * frees state; NULL is a no-op. */
void coll__fedavg_free(coll_fedavg_t *state, coll_transport_t *t);

#endif
