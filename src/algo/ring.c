/* SPDX-License-Identifier: Apache-2.0 */
/* ring.c: the pipelined ring pass.
 *
 * Each block is cut into segments of the context's seg_bytes (whole
 * elements). A receive is kept posted ahead into a double-buffered scratch
 * while the current segment is reduced, and each segment is sent on as soon
 * as it was reduced, so sending, receiving and reducing overlap.
 *
 * A send may complete only once its receiver posted the receive, and the
 * receiver of step s's data posts it only after its own step s-1: so the
 * sends of a step wait roughly one step for their receiver. To keep the
 * number of pending sends (and of messages a transport must queue) bounded,
 * the blocks are walked in rounds of at most RING_ROUND_SEGS segments per
 * block (or fewer, to a bound in bytes the pass sets); a round is a
 * complete pass over one slice of every block. Within a
 * round the sends of step s-2 are reaped before step s is processed, so at
 * most three steps' sends are pending. Receives run at most one step ahead
 * of the step being processed. */
#include "algo/ring.h"

#include <limits.h>
#include <string.h>

#include "algo/algo_util.h"

#define RING_WINDOW 2
#define RING_ROUND_SEGS 16
#define RING_SEND_CAP (3 * RING_ROUND_SEGS)
/* Segments a block is cut into at least before they grow (ring_sizes). */
#define RING_GROW_SEGS 8

typedef struct ring {
  algo_run_t run;
  const coll_ring_pass_t *p;
  int n, rank, next, prev;
  size_t seg;         /* elements per segment */
  size_t round_elems; /* elements of each block per round */
  size_t round_off;   /* this round's start inside every block */
  char *slots;        /* RING_WINDOW segments of scratch (reduce steps) */
  algo_req_t recv[RING_WINDOW];
  algo_req_t send[RING_SEND_CAP]; /* FIFO, oldest at send_head */
  int send_step[RING_SEND_CAP];
  size_t send_head, send_count;
  int post_s, proc_s;       /* step of the next receive to post / process */
  size_t post_m, proc_m;    /* and its segment */
  size_t posted, processed; /* receives of this round */
} ring_t;

static int ring_mod(int a, int n) {
  a %= n;
  return a < 0 ? a + n : a;
}

static int send_block(const ring_t *R, int s) {
  return ring_mod(R->rank + R->p->shift - s, R->n);
}

static int recv_block(const ring_t *R, int s) { return send_block(R, s + 1); }

/* The slice of block b in this round: *off and the element count. */
static size_t slice(const ring_t *R, int b, size_t *off) {
  const coll_ring_pass_t *p = R->p;
  size_t ub = (size_t)(p->blocks != NULL ? p->blocks[b] : b);
  size_t len = p->q + (ub < p->rem);
  *off = ub * p->q + (ub < p->rem ? ub : p->rem) + R->round_off;
  if (len <= R->round_off) return 0;
  len -= R->round_off;
  return len < R->round_elems ? len : R->round_elems;
}

static size_t nsegs(const ring_t *R, int b) {
  size_t off, len = slice(R, b, &off);
  return (len + R->seg - 1) / R->seg;
}

/* Segment m of block b's slice: *off and the element count. */
static size_t segment(const ring_t *R, int b, size_t m, size_t *off) {
  size_t len = slice(R, b, off) - m * R->seg;
  *off += m * R->seg;
  return len < R->seg ? len : R->seg;
}

/* The first step from s on that receives anything (nsteps: none). Both
 * ends of a link compute the same slices, so empty ones are skipped on
 * both sides alike. */
static int first_step(const ring_t *R, int s) {
  while (s < R->p->nsteps && nsegs(R, recv_block(R, s)) == 0) s++;
  return s;
}

static void advance(const ring_t *R, int *s, size_t *m) {
  if (++*m < nsegs(R, recv_block(R, *s))) return;
  *m = 0;
  *s = first_step(R, *s + 1);
}

/* Waits for every pending send of a step <= upto (sends are queued in step
 * order). */
static coll_status_t send_reap(ring_t *R, int upto) {
  while (R->send_count > 0 && R->send_step[R->send_head] <= upto) {
    COLL_CHECK(coll__algo_wait(&R->run, &R->send[R->send_head], 0));
    R->send_head = (R->send_head + 1) % RING_SEND_CAP;
    R->send_count--;
  }
  return COLL_OK;
}

static coll_status_t send_post(ring_t *R, int s, size_t off, size_t len) {
  size_t i;
  /* Three steps of one round fit; this only guards the invariant. */
  if (R->send_count == RING_SEND_CAP)
    COLL_CHECK(send_reap(R, R->send_step[R->send_head]));
  i = (R->send_head + R->send_count) % RING_SEND_CAP;
  R->send_step[i] = s;
  COLL_CHECK(coll__algo_isend(&R->run, &R->send[i], R->next,
                              R->p->buf + off * R->p->esz, len * R->p->esz));
  R->send_count++;
  return COLL_OK;
}

/* Keeps up to RING_WINDOW receives posted, no further than one step past
 * the one being processed. */
static coll_status_t recv_fill(ring_t *R) {
  const coll_ring_pass_t *p = R->p;
  while (R->posted - R->processed < RING_WINDOW && R->post_s < p->nsteps &&
         R->post_s <= R->proc_s + 1) {
    int s = R->post_s;
    size_t k = R->posted % RING_WINDOW, off;
    size_t len = segment(R, recv_block(R, s), R->post_m, &off);
    char *dst;
    if (s < p->nreduce) {
      dst = R->slots + k * R->seg * p->esz;
    } else {
      /* This receive overwrites the block this rank sent, partly reduced,
       * at step s+1-n: that send must be over before the region is handed
       * to the transport again. */
      if (s + 1 - R->n >= 0) COLL_CHECK(send_reap(R, s + 1 - R->n));
      dst = p->buf + off * p->esz;
    }
    COLL_CHECK(
        coll__algo_irecv(&R->run, &R->recv[k], R->prev, dst, len * p->esz));
    R->posted++;
    advance(R, &R->post_s, &R->post_m);
  }
  return COLL_OK;
}

static coll_status_t ring_round(ring_t *R) {
  const coll_ring_pass_t *p = R->p;
  int b0 = send_block(R, 0);
  size_t m, off, len, n0 = nsegs(R, b0);
  R->posted = R->processed = 0;
  R->post_s = R->proc_s = first_step(R, 0);
  R->post_m = R->proc_m = 0;
  /* Sends first: a receive posted below may overwrite the block sent at
   * step 0 (allreduce, n = 2, a rank with nothing to reduce), and must then
   * find that send to reap. */
  for (m = 0; m < n0; m++) {
    len = segment(R, b0, m, &off);
    COLL_CHECK(send_post(R, 0, off, len));
  }
  COLL_CHECK(recv_fill(R));
  while (R->proc_s < p->nsteps) {
    int s = R->proc_s;
    size_t k = R->processed % RING_WINDOW;
    len = segment(R, recv_block(R, s), R->proc_m, &off);
    COLL_CHECK(coll__algo_wait(&R->run, &R->recv[k], len * p->esz));
    if (s < p->nreduce)
      p->fn(p->buf + off * p->esz, R->slots + k * R->seg * p->esz, len);
    /* What arrived at step s is what this rank sends at step s+1. */
    if (s + 1 < p->nsteps) COLL_CHECK(send_post(R, s + 1, off, len));
    R->processed++;
    advance(R, &R->proc_s, &R->proc_m);
    if (R->proc_s != s) COLL_CHECK(send_reap(R, R->proc_s - 2));
    COLL_CHECK(recv_fill(R));
  }
  return send_reap(R, INT_MAX);
}

/* Segment size in elements, and the slice of a block one round covers.
 * The segment is seg_bytes, grown towards seg_max_bytes where a block
 * holds more than RING_GROW_SEGS of them: short blocks need segments to
 * overlap the transfer with the reduction at all, long ones lose to each
 * segment's own cost (a send, a receive, a wakeup). Every rank computes
 * the same from the same block. */
static void ring_sizes(ring_t *R, const coll_algo_ctx_t *ctx,
                       size_t max_block) {
  size_t seg = ctx->seg_bytes / R->p->esz;
  if (ctx->seg_max_bytes > ctx->seg_bytes) {
    size_t cap = ctx->seg_max_bytes / R->p->esz;
    size_t grown = max_block / RING_GROW_SEGS;
    if (grown > cap) grown = cap;
    if (grown > seg) seg = grown;
  }
  if (seg == 0) seg = 1;
  if (seg > max_block) seg = max_block;
  R->seg = seg;
  R->round_elems =
      seg <= max_block / RING_ROUND_SEGS ? seg * RING_ROUND_SEGS : max_block;
  if (R->p->round_bytes > 0) {
    size_t segs = R->p->round_bytes / (seg * R->p->esz);
    if (segs == 0) segs = 1;
    if (segs * seg < R->round_elems) R->round_elems = segs * seg;
  }
}

coll_status_t coll__ring_run(const coll_algo_ctx_t *ctx,
                             const coll_ring_pass_t *p) {
  ring_t R;
  size_t max_block = p->q + (p->rem > 0);
  coll_status_t s = COLL_OK;
  if (ctx->world == 1 || max_block == 0) return COLL_OK;
  memset(&R, 0, sizeof R);
  coll__algo_run_init(&R.run, ctx, p->what, ALGO_PH_RING);
  R.p = p;
  R.n = ctx->world;
  R.rank = ctx->rank;
  R.next = (ctx->rank + 1) % ctx->world;
  R.prev = (ctx->rank + ctx->world - 1) % ctx->world;
  ring_sizes(&R, ctx, max_block);
  if (p->nreduce > 0) {
    R.slots = coll__scratch_get(ctx->scratch, RING_WINDOW * R.seg * p->esz);
    if (R.slots == NULL)
      return coll__algo_fail(&R.run, COLL_ERR_NO_MEMORY, "receive buffers");
  }
  for (R.round_off = 0; R.round_off < max_block && s == COLL_OK;
       R.round_off += R.round_elems)
    s = ring_round(&R);
  if (s != COLL_OK) {
    coll__algo_cancel(&R.run, R.recv, RING_WINDOW);
    coll__algo_cancel(&R.run, R.send, RING_SEND_CAP);
  }
  return coll__algo_done(&R.run);
}
