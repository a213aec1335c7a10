/* SPDX-License-Identifier: Apache-2.0 */
/* agree.c: the descriptor check's state (agree.h): a descriptor's wire
 * form, merging what a peer knows, and the verdict's text, the same on
 * every rank; and the verdict where every rank sees every descriptor at
 * once (the shared-memory notes), which replays the message pattern's
 * merges on the descriptors at hand and reports the state position 0 ends
 * with: the same text the messages give there. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/agree.h"
#include "algo/algo_util.h"
#include "core/le.h"
#include "core/work.h"

/* The wire form: little-endian, fixed size. */
#define DESC_BYTES COLL_AGREE_DESC_BYTES
#define AGREE_BYTES COLL_AGREE_BYTES

void coll__desc_pack(unsigned char *p, const coll_desc_t *d) {
  coll__put_le32(p, d->kind);
  coll__put_le32(p + 4, (uint32_t)d->dtype);
  coll__put_le32(p + 8, (uint32_t)d->op);
  coll__put_le32(p + 12, (uint32_t)d->root);
  coll__put_le64(p + 16, d->count);
  coll__put_le64(p + 24, d->nbufs);
  coll__put_le64(p + 32, d->total);
  coll__put_le32(p + 40, d->list);
}

void coll__desc_unpack(const unsigned char *p, coll_desc_t *d) {
  d->kind = coll__get_le32(p);
  d->dtype = (int32_t)coll__get_le32(p + 4);
  d->op = (int32_t)coll__get_le32(p + 8);
  d->root = (int32_t)coll__get_le32(p + 12);
  d->count = coll__get_le64(p + 16);
  d->nbufs = coll__get_le64(p + 24);
  d->total = coll__get_le64(p + 32);
  d->list = coll__get_le32(p + 40);
  d->bufs = NULL; /* another rank's buffers are not ours to name */
}

void coll__desc_batch(coll_desc_t *d, uint32_t kind, coll_op_t op,
                      const coll_buffer_t *bufs, size_t nbufs) {
  uint32_t h = 2166136261u; /* FNV-1a over each (dtype, count) */
  size_t i;
  memset(d, 0, sizeof *d);
  d->kind = kind | COLL_DESC_BATCH;
  d->op = (int32_t)op;
  d->root = -1;
  d->dtype = nbufs > 0 ? (int32_t)bufs[0].dtype : -1;
  d->count = nbufs > 0 ? bufs[0].count : 0;
  d->nbufs = nbufs;
  for (i = 0; i < nbufs; i++) {
    uint64_t v = ((uint64_t)bufs[i].count << 4) | (uint64_t)bufs[i].dtype;
    int b;
    for (b = 0; b < 8; b++) h = (h ^ (uint8_t)(v >> (8 * b))) * 16777619u;
    d->total += bufs[i].count;
  }
  d->list = h;
  d->bufs = bufs;
}

void coll__agree_pack(unsigned char *p, const agree_state_t *st) {
  coll__desc_pack(p, &st->mine);
  coll__put_le32(p + DESC_BYTES, st->flag);
  coll__put_le32(p + DESC_BYTES + 4, (uint32_t)st->ra);
  coll__put_le32(p + DESC_BYTES + 8, (uint32_t)st->rb);
  coll__desc_pack(p + DESC_BYTES + 12, &st->da);
  coll__desc_pack(p + 2 * DESC_BYTES + 12, &st->db);
}

size_t coll__agree_pack_compact(unsigned char *p, const agree_state_t *st) {
  if (st->flag != 0 || st->ra >= 0) {
    coll__agree_pack(p, st);
    return AGREE_BYTES;
  }
  coll__desc_pack(p, &st->mine);
  coll__put_le32(p + DESC_BYTES, COLL_AGREE_COMPACT);
  return COLL_AGREE_MIN_BYTES;
}

size_t coll__agree_unpack(const unsigned char *p, size_t n, agree_state_t *st) {
  uint32_t word;
  if (n < COLL_AGREE_MIN_BYTES) return 0;
  word = coll__get_le32(p + DESC_BYTES);
  if (word == COLL_AGREE_COMPACT) {
    memset(st, 0, sizeof *st);
    st->ra = st->rb = -1;
    coll__desc_unpack(p, &st->mine);
    return COLL_AGREE_MIN_BYTES;
  }
  if (n < AGREE_BYTES) return 0;
  coll__desc_unpack(p, &st->mine);
  st->flag = word != 0;
  st->ra = (int32_t)coll__get_le32(p + DESC_BYTES + 4);
  st->rb = (int32_t)coll__get_le32(p + DESC_BYTES + 8);
  coll__desc_unpack(p + DESC_BYTES + 12, &st->da);
  coll__desc_unpack(p + 2 * DESC_BYTES + 12, &st->db);
  return AGREE_BYTES;
}

int coll__desc_equal(const coll_desc_t *a, const coll_desc_t *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
         a->root == b->root && a->count == b->count && a->nbufs == b->nbufs &&
         a->total == b->total && a->list == b->list;
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
void coll__agree_merge(agree_state_t *st, int self, int from,
                       const agree_state_t *in) {
  if (!coll__desc_equal(&st->mine, &in->mine))
    consider(st, self, &st->mine, from, &in->mine);
  if (in->ra >= 0) consider(st, in->ra, &in->da, in->rb, &in->db);
  st->flag |= in->flag | (st->ra >= 0);
}

void coll__agree_state_init(agree_state_t *st, const coll_desc_t *d) {
  memset(st, 0, sizeof *st);
  st->mine = *d;
  st->ra = st->rb = -1;
}

/* The final state, as the rank that folded into us computed it. */
void coll__agree_adopt(agree_state_t *st, const agree_state_t *in) {
  coll_desc_t mine = st->mine;
  *st = *in;
  st->mine = mine;
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

/* "allreduce_batch" for a batch of allreduce, else the collective's name. */
static const char *desc_name(const coll_desc_t *d) {
  coll_work_kind_t k = (coll_work_kind_t)(d->kind & ~COLL_DESC_BATCH);
  if ((d->kind & COLL_DESC_BATCH) && k == COLL_WORK_ALLREDUCE)
    return "allreduce_batch";
  return coll__work_name(k);
}

/* Appends text as it is, never past cap. */
static void cat(char *dst, size_t cap, size_t *len, const char *text) {
  size_t n = strlen(text);
  if (*len + n >= cap) n = cap - *len - 1;
  memcpy(dst + *len, text, n);
  *len += n;
  dst[*len] = '\0';
}

/* "3 buffers (f32 1000, f16 8, i32 3)": every buffer where this rank's own
 * list is at hand and fits, else as many as fit, then "...". Another rank's
 * list is known by its first buffer only. */
static void describe_batch(char *dst, size_t cap, size_t *len,
                           const coll_desc_t *d) {
  size_t i, known = d->bufs != NULL ? (size_t)d->nbufs : d->nbufs > 0;
  char item[48];
  append(dst, cap, len, "%llu buffer%s", (unsigned long long)d->nbufs,
         d->nbufs == 1 ? "" : "s");
  if (d->nbufs == 0) return;
  cat(dst, cap, len, " (");
  for (i = 0; i < known; i++) {
    coll_dtype_t dt = d->bufs ? d->bufs[i].dtype : (coll_dtype_t)d->dtype;
    unsigned long long n = d->bufs ? d->bufs[i].count : d->count;
    snprintf(item, sizeof item, "%s%s %llu", i > 0 ? ", " : "",
             coll_dtype_name(dt), n);
    if (*len + strlen(item) + sizeof ", ...)" >= cap) break;
    cat(dst, cap, len, item);
  }
  if (i < d->nbufs) cat(dst, cap, len, i > 0 ? ", ..." : "...");
  cat(dst, cap, len, ")");
}

/* "count 100, dtype f32": the fields where d differs from other. */
static void describe(char *dst, size_t cap, const coll_desc_t *d,
                     const coll_desc_t *other) {
  size_t len = 0;
  int batch = (d->kind & COLL_DESC_BATCH) != 0;
  /* A batch against a single buffer: their fields mean different things,
   * so both are shown whole. */
  int cross = batch != ((other->kind & COLL_DESC_BATCH) != 0);
  dst[0] = '\0';
  if (d->kind != other->kind)
    append(dst, cap, &len, "collective %s", desc_name(d));
  if (batch) {
    /* The buffers, whenever the lists may differ. */
    if (d->kind != other->kind || d->nbufs != other->nbufs ||
        d->dtype != other->dtype || d->count != other->count ||
        d->total != other->total || d->list != other->list)
      describe_batch(dst, cap, &len, d);
    if (d->total != other->total)
      append(dst, cap, &len, "%llu elements in all",
             (unsigned long long)d->total);
    else if (d->kind == other->kind && d->nbufs == other->nbufs &&
             d->list != other->list)
      append(dst, cap, &len, "a different list");
  } else {
    if (d->count != other->count || cross)
      append(dst, cap, &len, "count %llu", (unsigned long long)d->count);
    if (d->dtype != other->dtype || cross)
      append(dst, cap, &len, "dtype %s",
             coll_dtype_name((coll_dtype_t)d->dtype));
    if (d->root != other->root) append(dst, cap, &len, "root %d", (int)d->root);
  }
  if (d->op != other->op)
    append(dst, cap, &len, "op %s", coll_op_name((coll_op_t)d->op));
}

/* The disagreement as text; `self` is this rank, whose own buffers it can
 * name in full. */
coll_status_t coll__agree_mismatch(const agree_state_t *st, int self,
                                   const coll_desc_t *mine) {
  char a[224], b[224];
  coll_desc_t da = st->da, db = st->db;
  if (st->ra < 0)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "ranks disagree: another rank reported a mismatch");
  if (st->ra == self) da.bufs = mine->bufs;
  if (st->rb == self) db.bufs = mine->bufs;
  describe(a, sizeof a, &da, &db);
  describe(b, sizeof b, &db, &da);
  return coll__err(COLL_ERR_LENGTH_MISMATCH,
                   "ranks disagree: rank %d has %s; rank %d has %s",
                   (int)st->ra, a, (int)st->rb, b);
}

coll_status_t coll__agree_verdict(const agree_state_t *st, int odd, int self,
                                  const coll_desc_t *mine, const char *what) {
  if (st->flag) return coll__agree_mismatch(st, self, mine);
  if (odd)
    return coll__err(COLL_ERR_LENGTH_MISMATCH,
                     "ranks disagree: a rank with the same arguments ran "
                     "another algorithm than %s here (COLL_ALGO or "
                     "COLL_RING_THRESHOLD set differently?)",
                     what);
  return COLL_OK;
}

/* ---- the verdict where every rank sees every descriptor ---------------- */

/* Folds position `from`'s state into position `at`'s, naming comm ranks. */
static void merge_at(const coll_algo_ctx_t *ctx, agree_state_t *st, int at,
                     int from, const agree_state_t *in) {
  coll__agree_merge(st, coll__ctx_rank(ctx, at), coll__ctx_rank(ctx, from), in);
}

/* The agreement's final state at position 0, as agree_body computes it at
 * every position at once: the ranks from p fold into rank - p, then the
 * ranks below p swap states with rank ^ mask (both sides of a swap read
 * the other's state from before it). */
static agree_state_t replay(const coll_algo_ctx_t *ctx, const coll_desc_t *all,
                            agree_state_t *st, agree_state_t *prev) {
  int n = ctx->world, p = 1, r, mask;
  while (p <= n / 2) p <<= 1;
  for (r = 0; r < n; r++) coll__agree_state_init(&st[r], &all[r]);
  for (r = p; r < n; r++) merge_at(ctx, &st[r - p], r - p, r, &st[r]);
  for (mask = 1; mask < p; mask <<= 1) {
    for (r = 0; r < p; r++) prev[r] = st[r];
    for (r = 0; r < p; r++) merge_at(ctx, &st[r], r, r ^ mask, &prev[r ^ mask]);
  }
  return st[0];
}

coll_status_t coll__agree_seen(const coll_algo_ctx_t *ctx,
                               const coll_desc_t *all,
                               const coll_desc_t *mine) {
  agree_state_t *st, *prev, verdict;
  int r, n = ctx->world;
  for (r = 0; r < n && coll__desc_equal(&all[r], mine); r++) {
  }
  if (r == n) return COLL_OK;
  st = calloc((size_t)n, sizeof *st);
  prev = calloc((size_t)n, sizeof *prev);
  if (st == NULL || prev == NULL) {
    /* Still a mismatch on every rank, without the details. */
    free(st);
    free(prev);
    coll__agree_state_init(&verdict, mine);
    return coll__agree_mismatch(&verdict, coll__ctx_rank(ctx, ctx->rank), mine);
  }
  verdict = replay(ctx, all, st, prev);
  free(st);
  free(prev);
  return coll__agree_mismatch(&verdict, coll__ctx_rank(ctx, ctx->rank), mine);
}
