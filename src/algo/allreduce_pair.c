/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_pair.c: the ring allreduce of two ranks, with its two passes
 * woven into one stream.
 *
 * The buffer is the ring's two blocks ("halves"); position 0 reduces half
 * 1 and position 1 half 0, as the ring of two does. Each half is cut into
 * S segments. Segment k of the half the peer reduces goes out raw (X_k);
 * segment k of the own half goes back reduced (R_k) as soon as the peer's
 * X_k has come in and was added to it. Both ranks send, and receive, in
 * one order:
 *
 *   X_0 .. X_{L-1}, X_L R_0, X_{L+1} R_1, ..., X_{S-1} R_{S-1-L},
 *   R_{S-L} .. R_{S-1}
 *
 * (segments past the end of a half are left out on both sides). The ring
 * sends a whole slice of raw segments first and the reduced ones after
 * them: over sockets that puts megabytes in flight, which are cold by the
 * time the peer copies them out of the socket buffers. Here at most L
 * segments of raw data are ahead (PAIR_LEAD_BYTES). Same bytes and same
 * numerics as the ring: each element is combined once, own value first,
 * on the rank that reduces its half, and copied to the other. */
#include <string.h>

#include "algo/algo_util.h"
#include "algo/ring.h"

/* Raw data sent ahead of the reduced stream, in whole segments (at least
 * one). About a core's L2 cache: what is in flight is still in cache when
 * the receiver copies it out and reduces it. Measured in the peers' timing
 * loop (bench/vs-peers.sh, 2 ranks over loopback TCP, 256 KiB segments,
 * medians of 3, busbw GB/s at 16 MiB): lead 1 segment 2.67, 2 segments
 * 3.39, 4 segments 2.02, the ring 1.60; 128 KiB segments with 512 KiB
 * ahead 3.42, 512 KiB segments with 1 MiB ahead 1.55. */
#define PAIR_LEAD_BYTES COLL_RING_PAIR_LEAD_BYTES
/* Receives posted ahead, at most 2L + 1: a receive of R_k is posted only
 * once X_k, which reads the same region, has gone out; a deeper window
 * would reach R_k's receive before X_k is due (recv_fill holds back, and
 * pair_run would report the stall). */
#define PAIR_WINDOW 2
/* The lead in segments is at most this, whatever the segment size... */
#define PAIR_LEAD_MAX 8
/* ...so that the sends pending at once (at most the lead, the reduced
 * segments the peer has not yet taken and the window) stay below this
 * bound: reaping the oldest send when the queue is full blocks on a
 * receive the peer may not have posted yet, which with rendezvous
 * semantics waits for this rank in turn. A guard only. */
#define PAIR_SEND_CAP 64

typedef struct pair_item {
  int reduced; /* 0: X (raw segment of the peer's half), 1: R */
  size_t k;
} pair_item_t;

typedef struct pair {
  algo_run_t run;
  char *buf;
  size_t esz, seg;       /* element size, elements per segment */
  size_t off[2], len[2]; /* the halves, by position */
  int peer;              /* the other position */
  int own, peer_own;     /* the half this rank reduces, and the peer's */
  size_t nseg, lead, nitems;
  char *slots; /* PAIR_WINDOW segments of scratch for X receipts */
  algo_req_t recv[PAIR_WINDOW];
  size_t recv_item[PAIR_WINDOW];
  size_t recv_head, recv_count;
  algo_req_t send[PAIR_SEND_CAP];
  pair_item_t send_what[PAIR_SEND_CAP];
  size_t send_head, send_count;
  size_t sent, posted;  /* items of the order sent, receives posted */
  size_t done_reducing; /* X receipts added in: R_k may go once k < this */
} pair_t;

/* Item t of the order above. */
static pair_item_t item(const pair_t *P, size_t t) {
  size_t S = P->nseg, L = P->lead, u;
  if (t < L) return (pair_item_t){0, t};
  u = t - L;
  if (u < 2 * (S - L))
    return (u % 2 == 0) ? (pair_item_t){0, u / 2 + L} : (pair_item_t){1, u / 2};
  return (pair_item_t){1, S - L + (u - 2 * (S - L))};
}

/* Where X_k stands in the order. */
static size_t raw_pos(const pair_t *P, size_t k) {
  return k < P->lead ? k : P->lead + 2 * (k - P->lead);
}

/* Segment k of half h: *off (elements) and the element count (0: past the
 * end of the half). */
static size_t seg_of(const pair_t *P, int h, size_t k, size_t *off) {
  size_t lo = k * P->seg;
  *off = P->off[h] + lo;
  if (lo >= P->len[h]) return 0;
  return P->len[h] - lo < P->seg ? P->len[h] - lo : P->seg;
}

/* The half an item's segment lies in, as the sender of the item sees it:
 * X carries the receiver's half, R the sender's. */
static int sent_half(const pair_t *P, pair_item_t it) {
  return it.reduced ? P->own : P->peer_own;
}
static int received_half(const pair_t *P, pair_item_t it) {
  return it.reduced ? P->peer_own : P->own;
}

/* Waits for the oldest pending send. */
static coll_status_t send_reap_one(pair_t *P) {
  COLL_CHECK(coll__algo_wait(&P->run, &P->send[P->send_head], 0));
  P->send_head = (P->send_head + 1) % PAIR_SEND_CAP;
  P->send_count--;
  return COLL_OK;
}

/* Posts every send whose data is ready, in the order. */
static coll_status_t send_fill(pair_t *P) {
  while (P->sent < P->nitems) {
    pair_item_t it = item(P, P->sent);
    size_t off, len = seg_of(P, sent_half(P, it), it.k, &off), i;
    if (len > 0 && it.reduced && it.k >= P->done_reducing) break;
    P->sent++;
    if (len == 0) continue;
    if (P->send_count == PAIR_SEND_CAP) COLL_CHECK(send_reap_one(P));
    i = (P->send_head + P->send_count) % PAIR_SEND_CAP;
    P->send_what[i] = it;
    COLL_CHECK(coll__algo_isend(&P->run, &P->send[i], P->peer,
                                P->buf + off * P->esz, len * P->esz));
    P->send_count++;
  }
  return COLL_OK;
}

/* Before R_k from the peer lands on segment k of the peer's half, X_k,
 * which sends that segment, must be over. 1 if it is (waited for here),
 * 0 if X_k is not even posted yet. */
static coll_status_t raw_send_over(pair_t *P, size_t k, int *over) {
  size_t j;
  *over = 0;
  for (j = 0; j < P->send_count; j++) {
    size_t i = (P->send_head + j) % PAIR_SEND_CAP;
    if (P->send_what[i].reduced || P->send_what[i].k != k) continue;
    /* Sends complete in order on one link: the older ones go first. */
    while (P->send_head != i) COLL_CHECK(send_reap_one(P));
    COLL_CHECK(send_reap_one(P));
    *over = 1;
    return COLL_OK;
  }
  /* Not pending: reaped already if the order has passed it. */
  *over = P->sent > raw_pos(P, k);
  return COLL_OK;
}

/* Keeps up to PAIR_WINDOW receives posted, in the order. */
static coll_status_t recv_fill(pair_t *P) {
  while (P->posted < P->nitems && P->recv_count < PAIR_WINDOW) {
    pair_item_t it = item(P, P->posted);
    size_t off, len = seg_of(P, received_half(P, it), it.k, &off), i;
    char *dst;
    if (len == 0) {
      P->posted++;
      continue;
    }
    i = (P->recv_head + P->recv_count) % PAIR_WINDOW;
    if (it.reduced) {
      int over;
      COLL_CHECK(raw_send_over(P, it.k, &over));
      if (!over) break;
      dst = P->buf + off * P->esz;
    } else {
      dst = P->slots + i * P->seg * P->esz;
    }
    COLL_CHECK(
        coll__algo_irecv(&P->run, &P->recv[i], P->peer, dst, len * P->esz));
    P->recv_item[i] = P->posted;
    P->recv_count++;
    P->posted++;
  }
  return COLL_OK;
}

static coll_status_t pair_run(pair_t *P, coll_reduce_fn_t fn) {
  COLL_CHECK(send_fill(P));
  COLL_CHECK(recv_fill(P));
  while (P->recv_count > 0) {
    size_t i = P->recv_head;
    pair_item_t it = item(P, P->recv_item[i]);
    size_t off, len = seg_of(P, received_half(P, it), it.k, &off);
    COLL_CHECK(coll__algo_wait(&P->run, &P->recv[i], len * P->esz));
    if (!it.reduced) {
      fn(P->buf + off * P->esz, P->slots + i * P->seg * P->esz, len);
      P->done_reducing = it.k + 1;
    }
    P->recv_head = (P->recv_head + 1) % PAIR_WINDOW;
    P->recv_count--;
    COLL_CHECK(send_fill(P));
    COLL_CHECK(recv_fill(P));
  }
  /* Every receive is in; what is left to send has nothing to wait for. */
  P->done_reducing = P->nseg;
  COLL_CHECK(send_fill(P));
  if (P->posted < P->nitems)
    return coll__algo_fail(&P->run, COLL_ERR_INTERNAL,
                           "schedule stalled at item %zu of %zu", P->posted,
                           P->nitems);
  while (P->send_count > 0) COLL_CHECK(send_reap_one(P));
  return COLL_OK;
}

coll_status_t coll__allreduce_pair(const coll_algo_ctx_t *ctx, void *buf,
                                   size_t count, coll_dtype_t dt,
                                   coll_op_t op) {
  pair_t P;
  coll_reduce_fn_t fn = coll__algo_kernel("ring allreduce", dt, op);
  size_t longest, h;
  coll_status_t s;
  if (fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (count == 0) return COLL_OK;
  memset(&P, 0, sizeof P);
  coll__algo_run_init(&P.run, ctx, "ring allreduce", ALGO_PH_RING);
  P.buf = buf;
  P.esz = coll_dtype_size(dt);
  P.peer = 1 - ctx->rank;
  /* Position 0 reduces half 1 and position 1 half 0, as the ring of two
   * does: each element is combined in the ring's order (own value first),
   * so the bits are the ring's for every op. */
  P.own = P.peer;
  P.peer_own = ctx->rank;
  for (h = 0; h < 2; h++)
    P.len[h] = coll__ring_block(count, 2, (int)h, &P.off[h]);
  longest = P.len[0] > P.len[1] ? P.len[0] : P.len[1];
  P.seg = ctx->seg_bytes / P.esz;
  if (P.seg == 0) P.seg = 1;
  if (P.seg > longest) P.seg = longest;
  P.nseg = (longest + P.seg - 1) / P.seg;
  P.lead = PAIR_LEAD_BYTES / (P.seg * P.esz);
  if (P.lead == 0) P.lead = 1;
  if (P.lead > PAIR_LEAD_MAX) P.lead = PAIR_LEAD_MAX;
  if (P.lead > P.nseg) P.lead = P.nseg;
  P.nitems = 2 * P.nseg;
  P.slots = coll__scratch_get(ctx->scratch, PAIR_WINDOW * P.seg * P.esz);
  if (P.slots == NULL)
    return coll__algo_fail(&P.run, COLL_ERR_NO_MEMORY, "receive buffers");
  s = pair_run(&P, fn);
  if (s != COLL_OK) {
    coll__algo_cancel(&P.run, P.recv, PAIR_WINDOW);
    coll__algo_cancel(&P.run, P.send, PAIR_SEND_CAP);
  }
  return coll__algo_done(&P.run);
}
