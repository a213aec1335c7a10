/* SPDX-License-Identifier: Apache-2.0 */
/* agree.c: checking that every rank passed the same collective descriptor.
 *
 * Recursive doubling: in round k each rank swaps its state with rank ^ 2^k.
 * A state is the rank's own descriptor, a "mismatch seen" flag, and a
 * disagreement it knows of (two ranks and their descriptors). After
 * round k a rank knows whether the 2^(k+1) ranks of its group agree: its
 * half agrees with its own descriptor (else the flag is set), the partner's
 * half with the partner's, and it compares the two. With n not a power of
 * two, ranks from p (the largest power of two below n) first fold their
 * state into rank - p and get the result back at the end. The messages are
 * the same whatever the descriptors hold, so disagreeing ranks never wait
 * for a message that does not come. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo_util.h"
#include "core/le.h"
#include "core/work.h"

/* The wire form: little-endian, fixed size. */
#define DESC_BYTES 24
#define AGREE_BYTES (DESC_BYTES + 12 + 2 * DESC_BYTES)

typedef struct agree_state {
  coll_desc_t mine;
  uint32_t flag;
  int32_t ra, rb; /* a known disagreement, ra < rb (-1: none known) */
  coll_desc_t da, db;
} agree_state_t;

static void put_desc(unsigned char *p, const coll_desc_t *d) {
  coll__put_le32(p, d->kind);
  coll__put_le32(p + 4, (uint32_t)d->dtype);
  coll__put_le32(p + 8, (uint32_t)d->op);
  coll__put_le32(p + 12, (uint32_t)d->root);
  coll__put_le64(p + 16, d->count);
}

static void get_desc(const unsigned char *p, coll_desc_t *d) {
  d->kind = coll__get_le32(p);
  d->dtype = (int32_t)coll__get_le32(p + 4);
  d->op = (int32_t)coll__get_le32(p + 8);
  d->root = (int32_t)coll__get_le32(p + 12);
  d->count = coll__get_le64(p + 16);
}

static void pack(unsigned char *p, const agree_state_t *st) {
  put_desc(p, &st->mine);
  coll__put_le32(p + DESC_BYTES, st->flag);
  coll__put_le32(p + DESC_BYTES + 4, (uint32_t)st->ra);
  coll__put_le32(p + DESC_BYTES + 8, (uint32_t)st->rb);
  put_desc(p + DESC_BYTES + 12, &st->da);
  put_desc(p + 2 * DESC_BYTES + 12, &st->db);
}

static void unpack(const unsigned char *p, agree_state_t *st) {
  get_desc(p, &st->mine);
  st->flag = coll__get_le32(p + DESC_BYTES);
  st->ra = (int32_t)coll__get_le32(p + DESC_BYTES + 4);
  st->rb = (int32_t)coll__get_le32(p + DESC_BYTES + 8);
  get_desc(p + DESC_BYTES + 12, &st->da);
  get_desc(p + 2 * DESC_BYTES + 12, &st->db);
}

static int desc_equal(const coll_desc_t *a, const coll_desc_t *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
         a->root == b->root && a->count == b->count;
}

/* Keeps the disagreement between ranks a and b (lower rank first) if it is
 * the first known or names lower ranks than the one kept: ranks that learn
 * of several then tend to report the same one. */
static void consider(agree_state_t *st, int a, const coll_desc_t *da, int b,
                     const coll_desc_t *db) {
  if (a > b) {
    consider(st, b, db, a, da);
    return;
  }
  if (st->ra >= 0 && (st->ra < a || (st->ra == a && st->rb <= b))) return;
  st->ra = a;
  st->da = *da;
  st->rb = b;
  st->db = *db;
}

/* Folds in what rank `from` sent. Its own descriptor stands for every rank
 * it already agreed with; a disagreement it knows of travels on, so every
 * rank can name two ranks that differ. */
static void merge(agree_state_t *st, int self, int from,
                  const agree_state_t *in) {
  if (!desc_equal(&st->mine, &in->mine))
    consider(st, self, &st->mine, from, &in->mine);
  if (in->ra >= 0) consider(st, in->ra, &in->da, in->rb, &in->db);
  st->flag |= in->flag | (st->ra >= 0);
}

/* The final state, as the rank that folded into us computed it. */
static void adopt(agree_state_t *st, const agree_state_t *in) {
  coll_desc_t mine = st->mine;
  *st = *in;
  st->mine = mine;
}

typedef struct agree {
  algo_run_t run;
  agree_state_t st;
  unsigned char out[AGREE_BYTES], in[AGREE_BYTES];
  algo_req_t req[2];
} agree_t;

/* Sends this rank's state to peer (if send) and receives peer's (if recv),
 * both posted before either is waited. */
static coll_status_t swap(agree_t *A, int peer, int send, int recv,
                          agree_state_t *got) {
  pack(A->out, &A->st);
  if (recv)
    COLL_CHECK(coll__algo_irecv(&A->run, &A->req[0], peer, A->in, AGREE_BYTES));
  if (send)
    COLL_CHECK(
        coll__algo_isend(&A->run, &A->req[1], peer, A->out, AGREE_BYTES));
  if (recv) COLL_CHECK(coll__algo_wait(&A->run, &A->req[0], AGREE_BYTES));
  if (send) COLL_CHECK(coll__algo_wait(&A->run, &A->req[1], 0));
  if (recv) unpack(A->in, got);
  return COLL_OK;
}

static coll_status_t agree_body(agree_t *A, int rank, int n) {
  agree_state_t in;
  int p = 1, mask;
  while (p <= n / 2) p <<= 1;
  if (rank >= p) {
    COLL_CHECK(swap(A, rank - p, 1, 0, NULL));
    COLL_CHECK(swap(A, rank - p, 0, 1, &in));
    adopt(&A->st, &in);
    return COLL_OK;
  }
  if (rank + p < n) {
    COLL_CHECK(swap(A, rank + p, 0, 1, &in));
    merge(&A->st, rank, rank + p, &in);
  }
  for (mask = 1; mask < p; mask <<= 1) {
    COLL_CHECK(swap(A, rank ^ mask, 1, 1, &in));
    merge(&A->st, rank, rank ^ mask, &in);
  }
  if (rank + p < n) COLL_CHECK(swap(A, rank + p, 1, 0, NULL));
  return COLL_OK;
}

/* printf into dst at *len, never past cap, ", " between items. */
static void append(char *dst, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *dst, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  int w;
  if (*len > 0 && *len + 2 < cap) {
    memcpy(dst + *len, ", ", 3);
    *len += 2;
  }
  va_start(ap, fmt);
  w = vsnprintf(dst + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

/* "count 100, dtype f32": the fields where d differs from other. */
static void describe(char *dst, size_t cap, const coll_desc_t *d,
                     const coll_desc_t *other) {
  size_t len = 0;
  dst[0] = '\0';
  if (d->kind != other->kind)
    append(dst, cap, &len, "collective %s",
           coll__work_name((coll_work_kind_t)d->kind));
  if (d->count != other->count)
    append(dst, cap, &len, "count %llu", (unsigned long long)d->count);
  if (d->dtype != other->dtype)
    append(dst, cap, &len, "dtype %s", coll_dtype_name((coll_dtype_t)d->dtype));
  if (d->op != other->op)
    append(dst, cap, &len, "op %s", coll_op_name((coll_op_t)d->op));
  if (d->root != other->root) append(dst, cap, &len, "root %d", (int)d->root);
}

static coll_status_t mismatch(const agree_state_t *st) {
  char a[160], b[160];
  if (st->ra < 0)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "ranks disagree: another rank reported a mismatch");
  describe(a, sizeof a, &st->da, &st->db);
  describe(b, sizeof b, &st->db, &st->da);
  return coll__err(COLL_ERR_LENGTH_MISMATCH,
                   "ranks disagree: rank %d has %s; rank %d has %s",
                   (int)st->ra, a, (int)st->rb, b);
}

coll_status_t coll__agree(const coll_algo_ctx_t *ctx, const coll_desc_t *d) {
  agree_t A;
  if (ctx->world == 1) return COLL_OK;
  memset(&A, 0, sizeof A);
  coll__algo_run_init(&A.run, ctx, "agree", ALGO_PH_AGREE);
  A.st.mine = *d;
  A.st.ra = A.st.rb = -1;
  if (agree_body(&A, ctx->rank, ctx->world) != COLL_OK) {
    coll__algo_cancel(&A.run, A.req, 2);
    return coll__algo_done(&A.run);
  }
  return A.st.flag ? mismatch(&A.st) : COLL_OK;
}
