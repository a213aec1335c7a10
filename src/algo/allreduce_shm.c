/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_shm.c: allreduce designed for shared memory, for ranks on one
 * host whose transport maps every rank's memory (transport/common/
 * rounds.h). No messages: the buffer moves in rounds of at most one
 * slot (256 KiB per rank, so a round's inputs stay in cache), and ranks
 * wait on each other's progress flags.
 *
 * A round: every rank copies its piece into its own slot and posts IN.
 * Then, by size:
 *  - "whole" (small pieces): every rank reduces the whole piece itself,
 *    reading every rank's slot in rank order 0, 1, ..., into its buffer,
 *    and posts OUT. One wait per round: latency is what counts here.
 *  - "slices": rank k reduces only slice k of the piece, reading slice k
 *    of every rank's slot in rank order into its result area, and posts
 *    RED; once every rank did, every rank copies every slice out of its
 *    owner's result area and posts OUT. Each input is read once and each
 *    result written once: bandwidth is what counts here.
 * Slots and result areas alternate between two buffers from one round to
 * the next; before reusing one, a rank waits until every rank posted OUT
 * for the round two before (it no longer reads them).
 *
 * Numerics: every element is combined in rank order 0, 1, ..., world-1,
 * the same order for every element, whatever the size or the mode; every
 * rank ends with the same bits (a slice is computed once and copied, and
 * in "whole" every rank runs the same kernel on the same operands in the
 * same order).
 *
 * The descriptor check (the context's, agree.h) rides in the first round:
 * before it posts IN, every rank writes its descriptor into its
 * note (transport.h); after every rank's IN it compares every note with
 * its own, before it reads any data. Every rank sees the same notes, so
 * every rank reaches the same verdict (coll__agree_seen), and on a mismatch
 * every rank posts OUT and returns without having written its output. A
 * collective that is not this allreduce runs the check alone, as a round
 * with no data (coll__agree_shm), so ranks that disagree on which
 * collective they run still meet in the same round.
 *
 * "direct" (threads of one process, from the transport's direct_from):
 * one round for the whole buffer and no slots. Every rank publishes where
 * its input and output are in its note and posts IN; rank k reduces slice
 * k straight from every rank's input, in rank order, into its own output
 * and posts RED; then every rank copies every other slice from its
 * owner's output, posts OUT, and returns only once every rank posted OUT:
 * until then a peer may still read its buffers. The slots' copy-in and
 * copy-out are gone. In place, rank k reduces its slice in chunks of
 * scratch, since its own input is one of the operands. A rank reads its
 * peers' buffers only between the transport's read_begin and read_end,
 * and an endpoint that closes (an abort, a failure) returns only once no
 * peer is between the two: no buffer is read after its owner's call
 * returned.
 *
 * "single copy" (processes of one host, from the transport's copy_from):
 * the direct mode over memory this rank cannot address: it copies what it
 * needs out of its peers' buffers once, through the kernel (the provider's
 * peer_read). Rank k reduces slice k in chunks of CMA_CHUNK: each peer's
 * piece of the chunk is copied into scratch and combined, in rank order,
 * then the chunk goes to k's output; after every rank's RED it copies
 * every other slice out of its owner's output straight into its own. Two
 * copies per byte fewer than the slots (in, and out of, shared memory),
 * at the price of one more wait (RED) and a system call per chunk.
 *
 * On a failure (a rank lost or unresponsive, an abort, the deadline) it
 * fails the transport, so peers waiting on this rank's flags learn of it
 * at once. */
#include <stdlib.h>
#include <string.h>

#include "algo/agree.h"
#include "algo/shm_direct.h"
#include "algo/shm_round.h"

/* Up to this many bytes in all, every rank reduces the whole piece.
 * Measured (coll-perf, f32 SUM in place, COLL_CHECK_MISMATCH=0, processes
 * over COLL_TRANSPORT=shm on a loaded 2-vCPU VM, medians of 3, "whole" at
 * every size against "slices" above 32 KiB): 2 ranks, 64 KiB took 16.3 us
 * whole against 22.1 sliced, 256 KiB 179 us against 136; 4 ranks, 64 KiB
 * 178 us against 197, 256 KiB 400 against 247. Below 64 KiB both are one
 * round of the same cost. */
#define SHM_WHOLE_MAX (64u * 1024u)

typedef struct shm_ar {
  shm_run_t S; /* the round protocol (shm_round.h) */
  coll_rounds_t *R;
  coll_reduce_fn_t fn;
  size_t es;
  int rank, world;
  int copies; /* the direct mode copies through the kernel (single copy) */
  /* The descriptor the first round publishes and checks, or NULL. */
  const coll_desc_t *check;
} shm_ar_t;

/* A note: the descriptor's wire form, then whether the round carries the
 * allreduce's data through the slots (1), straight from the callers'
 * buffers (NOTE_DIRECT), or only the check (0); in the direct mode the
 * input's and the output's addresses follow (shm_direct.h). */
#define NOTE_DATA COLL_AGREE_DESC_BYTES
#define NOTE_BYTES (COLL_AGREE_DESC_BYTES + 1)
#define NOTE_DIRECT 2
_Static_assert(SHM_DIRECT_NOTE_PTRS >= NOTE_BYTES,
               "the direct mode's addresses follow the check");
/* The direct mode's in-place reduction goes through scratch this large. */
#define DIRECT_CHUNK (64u * 1024u)
/* The single copy's chunk: each peer's piece of it is copied into scratch
 * by one system call, then combined; two of them (the sum and the piece
 * arriving) stay within the second-level cache, and one call moves enough
 * to make its fixed cost small. */
#define CMA_CHUNK (256u * 1024u)

/* Reduces n elements at offset `off` (bytes) of every rank's slot b into
 * dst, in rank order. */
static void reduce_in_order(shm_ar_t *A, void *dst, int b, size_t off,
                            size_t n) {
  memcpy(dst, (char *)coll__rounds_slot(A->R, 0, b) + off, n * A->es);
  for (int r = 1; r < A->world; r++)
    A->fn(dst, (char *)coll__rounds_slot(A->R, r, b) + off, n);
}

/* Slice k of n elements: [*lo, *lo + *cnt), split on cache lines so that
 * two ranks never write one. */
static void slice_of(const shm_ar_t *A, size_t n, int k, size_t *lo,
                     size_t *cnt) {
  size_t per_line = 64 / A->es, lines = (n + per_line - 1) / per_line;
  size_t a = lines * (size_t)k / (size_t)A->world * per_line;
  size_t z = lines * (size_t)(k + 1) / (size_t)A->world * per_line;
  if (a > n) a = n;
  if (z > n) z = n;
  *lo = a;
  *cnt = z - a;
}

/* Writes this round's note of buffer b: the descriptor and whether data
 * follows. */
static void note_write(shm_ar_t *A, int b, int data) {
  unsigned char *note = coll__rounds_note(A->R, A->rank, b);
  coll__desc_pack(note, A->check);
  note[NOTE_DATA] = (unsigned char)data;
}

/* Rank r's input (k 0) or output (k 1) in the direct mode, from its note
 * of the current round. */
static char *note_ptr(const shm_ar_t *A, int r, int k) {
  return coll__shm_direct_ptr(&A->S, r, k);
}

/* After every rank's IN: COLL_OK if every rank's note of buffer b says what
 * this rank's says, else the mismatch, the same on every rank. Reads the
 * notes only: no data. */
static coll_status_t note_check(shm_ar_t *A, int b) {
  const unsigned char *mine = coll__rounds_note(A->R, A->rank, b);
  coll_desc_t *all;
  coll_status_t s;
  int r, differ = 0, same_desc = 1;
  for (r = 0; r < A->world; r++) {
    const unsigned char *theirs = coll__rounds_note(A->R, r, b);
    if (memcmp(theirs, mine, NOTE_BYTES) == 0) continue;
    differ = 1;
    if (memcmp(theirs, mine, COLL_AGREE_DESC_BYTES) != 0) {
      same_desc = 0;
      break;
    }
  }
  if (!differ) return COLL_OK;
  if (same_desc)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "ranks disagree: a rank with the same arguments ran the "
                     "shared-memory allreduce with the check folded in, and "
                     "another did not (COLL_ALGO set differently?)");
  all = calloc((size_t)A->world, sizeof *all);
  if (all == NULL) {
    /* Every rank still reports a mismatch, without the details. */
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "ranks disagree: another rank reported a mismatch");
  }
  for (r = 0; r < A->world; r++)
    coll__desc_unpack(coll__rounds_note(A->R, r, b), &all[r]);
  s = coll__agree_seen(A->S.run.ctx, all, A->check);
  free(all);
  return s;
}

/* Posts IN for buffer b and waits for every rank's; with A->check set,
 * then checks the notes (once per call), posting OUT on a mismatch. */
static coll_status_t post_in(shm_ar_t *A, int b, const char *what) {
  coll__shm_round_post(&A->S, COLL_T_FLAG_IN);
  COLL_CHECK(coll__shm_round_wait(&A->S, COLL_T_FLAG_IN, what));
  if (A->check != NULL) {
    coll_status_t s = note_check(A, b);
    A->check = NULL;
    if (s != COLL_OK) {
      coll__shm_round_post(&A->S, COLL_T_FLAG_OUT);
      return s;
    }
  }
  return COLL_OK;
}

/* One round: n elements from src (NULL when n is 0) reduced into dst. With
 * A->check set, the round also publishes and checks the descriptor, and
 * reads no data on a mismatch. */
static coll_status_t round_run(shm_ar_t *A, const char *src, char *dst,
                               size_t n, int whole) {
  size_t bytes = n * A->es;
  int b;
  COLL_CHECK(coll__shm_round_next(&A->S));
  b = A->S.b;
  if (bytes > 0) memcpy(coll__rounds_slot(A->R, A->rank, b), src, bytes);
  if (A->check != NULL) note_write(A, b, 1);
  COLL_CHECK(post_in(A, b, "inputs"));
  if (n == 0) {
    /* A checked call of no elements: the round only checked. */
  } else if (whole) {
    reduce_in_order(A, dst, b, 0, n);
  } else {
    size_t lo, cnt;
    slice_of(A, n, A->rank, &lo, &cnt);
    if (cnt > 0)
      reduce_in_order(
          A, (char *)coll__rounds_result(A->R, A->rank, b) + lo * A->es, b,
          lo * A->es, cnt);
    coll__shm_round_post(&A->S, COLL_T_FLAG_RED);
    COLL_CHECK(coll__shm_round_wait(&A->S, COLL_T_FLAG_RED, "slices"));
    for (int r = 0; r < A->world; r++) {
      slice_of(A, n, r, &lo, &cnt);
      if (cnt > 0)
        memcpy(dst + lo * A->es,
               (char *)coll__rounds_result(A->R, r, b) + lo * A->es,
               cnt * A->es);
    }
  }
  coll__shm_round_post(&A->S, COLL_T_FLAG_OUT);
  return COLL_OK;
}

void (*coll__shm_direct_read_hook)(int rank) = NULL;

/* Reads from the peers' buffers: between the transport's read_begin and
 * read_end (transport.h), which keep a closing peer from returning while
 * this rank still reads its memory. On failure nothing was read. */
static coll_status_t reading(shm_ar_t *A, const char *what) {
  coll_status_t s = coll__rounds_read_begin(A->R);
  if (s != COLL_OK) return coll__algo_fail(&A->S.run, s, "%s", what);
  if (coll__shm_direct_read_hook != NULL) coll__shm_direct_read_hook(A->rank);
  return COLL_OK;
}

/* Slice [lo, lo + cnt) of every rank's input, reduced in rank order into
 * this rank's output: in place through `tmp` in chunks of DIRECT_CHUNK
 * bytes (this rank's input is an operand), else straight into the
 * output. */
static void direct_reduce(shm_ar_t *A, char *dst, char *tmp, size_t lo,
                          size_t cnt) {
  size_t chunk = DIRECT_CHUNK / A->es, done;
  for (done = 0; done < cnt; done += chunk) {
    size_t n = cnt - done < chunk ? cnt - done : chunk;
    size_t off = (lo + done) * A->es;
    char *to = tmp != NULL ? tmp : dst + off;
    memcpy(to, note_ptr(A, 0, 0) + off, n * A->es);
    for (int r = 1; r < A->world; r++) A->fn(to, note_ptr(A, r, 0) + off, n);
    if (tmp != NULL) memcpy(dst + off, tmp, n * A->es);
  }
}

/* The single copy's reduction of slice [lo, lo + cnt): chunk by chunk,
 * every rank's piece (this rank's from src, the peers' copied into `in`)
 * combined in rank order into `acc`, then written to the output. */
static coll_status_t copy_reduce(shm_ar_t *A, const char *src, char *dst,
                                 char *acc, char *in, size_t lo, size_t cnt) {
  size_t chunk = CMA_CHUNK / A->es, done;
  for (done = 0; done < cnt; done += chunk) {
    size_t n = cnt - done < chunk ? cnt - done : chunk;
    size_t off = (lo + done) * A->es, len = n * A->es;
    for (int r = 0; r < A->world; r++) {
      const char *from = r == A->rank ? src + off : note_ptr(A, r, 0) + off;
      if (r == 0) {
        COLL_CHECK(coll__shm_direct_read(&A->S, r, acc, from, len, "inputs"));
      } else if (r == A->rank) {
        A->fn(acc, from, n);
      } else {
        COLL_CHECK(coll__shm_direct_read(&A->S, r, in, from, len, "inputs"));
        A->fn(acc, in, n);
      }
    }
    memcpy(dst + off, acc, len);
  }
  return COLL_OK;
}

/* Every other rank's slice, from its output into this rank's. */
static coll_status_t gather_slices(shm_ar_t *A, char *dst, size_t count) {
  size_t lo, cnt;
  if (!A->copies) COLL_CHECK(reading(A, "copying the peers' slices"));
  for (int r = 0; r < A->world; r++) {
    if (r == A->rank) continue;
    slice_of(A, count, r, &lo, &cnt);
    if (cnt == 0) continue;
    if (A->copies)
      COLL_CHECK(coll__shm_direct_read(&A->S, r, dst + lo * A->es,
                                       note_ptr(A, r, 1) + lo * A->es,
                                       cnt * A->es, "slices"));
    else
      memcpy(dst + lo * A->es, note_ptr(A, r, 1) + lo * A->es, cnt * A->es);
  }
  if (!A->copies) coll__rounds_read_end(A->R);
  return COLL_OK;
}

/* The whole call in the direct mode, src to dst (see the top). */
static coll_status_t direct_run(shm_ar_t *A, const char *src, char *dst,
                                size_t count) {
  char *tmp = NULL;
  size_t lo, cnt;
  if (A->copies || src == dst) {
    size_t need = A->copies ? 2 * (size_t)CMA_CHUNK : DIRECT_CHUNK;
    tmp = coll__scratch_get(A->S.run.ctx->scratch, need);
    if (tmp == NULL)
      return coll__algo_fail(&A->S.run, COLL_ERR_NO_MEMORY, "reduce chunk");
  }
  COLL_CHECK(coll__shm_round_next(&A->S));
  if (A->check != NULL) note_write(A, A->S.b, NOTE_DIRECT);
  coll__shm_direct_publish(&A->S, src, dst);
  COLL_CHECK(post_in(A, A->S.b, "addresses"));
  slice_of(A, count, A->rank, &lo, &cnt);
  if (A->copies) {
    if (cnt > 0)
      COLL_CHECK(copy_reduce(A, src, dst, tmp, tmp + CMA_CHUNK, lo, cnt));
  } else {
    COLL_CHECK(reading(A, "reducing from the peers' inputs"));
    if (cnt > 0) direct_reduce(A, dst, tmp, lo, cnt);
    coll__rounds_read_end(A->R);
  }
  coll__shm_round_post(&A->S, COLL_T_FLAG_RED);
  COLL_CHECK(coll__shm_round_wait(&A->S, COLL_T_FLAG_RED, "slices"));
  COLL_CHECK(gather_slices(A, dst, count));
  coll__shm_round_post(&A->S, COLL_T_FLAG_OUT);
  /* Peers may still be copying this rank's slice out of its output. */
  COLL_CHECK(coll__shm_round_wait(&A->S, COLL_T_FLAG_OUT, "readers"));
  return coll__algo_done(&A->S.run);
}

/* Fills A for a call on ctx; COLL_OK, or why the call cannot run. */
static coll_status_t setup(shm_ar_t *A, const coll_algo_ctx_t *ctx,
                           const char *what, coll_dtype_t dt, coll_op_t op) {
  COLL_CHECK(coll__shm_round_init(&A->S, ctx, what));
  A->R = A->S.R;
  A->es = coll_dtype_size(dt);
  A->rank = A->S.self;
  A->world = A->S.world;
  A->check = NULL;
  A->copies = 0;
  A->fn = coll__algo_kernel(A->S.run.what, dt, op);
  if (A->fn == NULL) return COLL_ERR_INVALID_ARG;
  return COLL_OK;
}

/* Every round of a call, src to dst; the first one checks A->check. */
static coll_status_t run_rounds(shm_ar_t *A, const char *src, char *dst,
                                size_t count) {
  size_t per_round = A->R->slot_bytes / A->es, done = 0;
  /* Every round of this call runs in one mode, chosen from the whole
   * size: the same on every rank. */
  int whole = count * A->es <= SHM_WHOLE_MAX;
  if (coll__rounds_direct(A->R) && count * A->es >= A->R->direct_from)
    return direct_run(A, src, dst, count);
  if (coll__shm_direct_copies(&A->S, count * A->es)) {
    A->copies = 1;
    return direct_run(A, src, dst, count);
  }
  do {
    size_t n = count - done < per_round ? count - done : per_round;
    COLL_CHECK(round_run(A, n > 0 ? src + done * A->es : NULL,
                         n > 0 ? dst + done * A->es : NULL, n, whole));
    done += n;
  } while (done < count);
  return coll__algo_done(&A->S.run);
}

coll_status_t coll__allreduce_shm(const coll_algo_ctx_t *ctx, const void *src,
                                  void *dst, size_t count, coll_dtype_t dt,
                                  coll_op_t op) {
  shm_ar_t A;
  COLL_CHECK(setup(&A, ctx, "shm allreduce", dt, op));
  if (ctx->world < 2 || (count == 0 && ctx->check == NULL)) {
    if (dst != src && count > 0) memcpy(dst, src, count * A.es);
    return COLL_OK;
  }
  /* The check rides in the first round, a round even when count is 0, so
   * that a rank passing count 0 (or any other size) meets the others. */
  A.check = ctx->check;
  return run_rounds(&A, src, dst, count);
}

coll_status_t coll__agree_shm(const coll_algo_ctx_t *ctx,
                              const coll_desc_t *d) {
  shm_ar_t A;
  coll_status_t s;
  if (ctx->world < 2) return COLL_OK;
  COLL_CHECK(coll__shm_round_init(&A.S, ctx, "shm agree"));
  A.R = A.S.R;
  A.rank = A.S.self;
  A.world = A.S.world;
  A.check = d;
  COLL_CHECK(coll__shm_round_next(&A.S));
  note_write(&A, A.S.b, 0);
  coll__shm_round_post(&A.S, COLL_T_FLAG_IN);
  COLL_CHECK(coll__shm_round_wait(&A.S, COLL_T_FLAG_IN, "notes"));
  s = note_check(&A, A.S.b);
  coll__shm_round_post(&A.S, COLL_T_FLAG_OUT);
  return s;
}
