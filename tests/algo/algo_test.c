/* SPDX-License-Identifier: Apache-2.0 */
/* algo_test.c: rank threads running algorithm cases, the test's data and
 * its reference results. */
#include "algo_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "reduce/reduce.h"
#include "test_util.h"

/* Sequence numbers start just below the 20-bit wrap of the tag field, so
 * the cases also cross it. */
#define AT_SEQ_BASE 0xFFFF0u

/* Sanitizer builds run several times slower: they take the quick matrix. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define AT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define AT_SANITIZED 1
#endif
#endif
#ifndef AT_SANITIZED
#define AT_SANITIZED 0
#endif

int at_quick(void) {
  const char *q = getenv("TEST_QUICK");
  if (q != NULL && q[0] != '\0') return strcmp(q, "0") != 0;
  return AT_SANITIZED;
}

int at_world_wanted(at_tp_t tp, int n) {
  return !at_quick() || tp != AT_MBOX_EAGER || n == 2 || n == 3 || n == 5 ||
         n == 8;
}

const char *at_tp_name(at_tp_t tp) {
  switch (tp) {
    case AT_INPROC: return "inproc";
    case AT_MBOX_RDV: return "mailbox-rendezvous";
    case AT_MBOX_EAGER: return "mailbox-eager";
    default: return "?";
  }
}

const char *at_kind_name(at_kind_t k) {
  static const char *const names[] = {
      "ring allreduce", "rd allreduce", "rh allreduce",
      "reduce-scatter", "allgather",    "broadcast",
      "reduce",         "barrier",      "bounded ring allreduce"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

int at_open(at_world_t *w, int n, at_tp_t tp) {
  memset(w, 0, sizeof *w);
  w->n = n;
  w->tp = tp;
  if (tp == AT_INPROC) {
    if (coll_inproc_create(n, w->t) != COLL_OK) {
      fprintf(stderr, "coll_inproc_create: %s\n", coll_last_error());
      return -1;
    }
    return 0;
  }
  return mbox_create(n, tp == AT_MBOX_EAGER, w->t, &w->mb);
}

size_t at_close(at_world_t *w) {
  size_t live = 0;
  int i;
  for (i = 0; i < w->n; i++) {
    if (w->mb != NULL) live += mbox_live(w->mb, i);
    coll_transport_destroy(w->t[i]);
    coll__scratch_free(&w->scratch[i]);
  }
  if (w->mb != NULL) mbox_world_release(w->mb);
  w->mb = NULL;
  return live;
}

void at_ctx(at_world_t *w, int rank, uint32_t seq, size_t seg_bytes,
            int64_t timeout_ms, coll_algo_ctx_t *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->t = w->t[rank];
  ctx->rank = rank;
  ctx->world = w->n;
  ctx->deadline_ms = coll__now_ms() + timeout_ms;
  ctx->seq = seq;
  ctx->scratch = &w->scratch[rank];
  ctx->seg_bytes = seg_bytes;
}

/* ---- data ---------------------------------------------------------- */

/* Small integers whose combination over 8 ranks is exact in every dtype
 * (no overflow, no rounding, even in bf16 and i8). */
int64_t at_value(coll_dtype_t dt, coll_op_t op, int rank, uint64_t salt,
                 size_t i) {
  uint64_t r = (uint64_t)rank, x = (uint64_t)i + salt * 7919u;
  int uns = dt == COLL_U8;
  switch (op) {
    case COLL_SUM: return (int64_t)((r * 37 + x * 11) % 9) - (uns ? 0 : 4);
    case COLL_PROD:
      if ((x + r) % 5 == 0) return 2;
      if (!uns && (x + 2 * r) % 7 == 3) return -1;
      return 1;
    default: return (int64_t)((r * 53 + x * 29) % 201) - (uns ? 0 : 100);
  }
}

static int64_t combine(coll_op_t op, int64_t a, int64_t b) {
  switch (op) {
    case COLL_SUM: return a + b;
    case COLL_PROD: return a * b;
    case COLL_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

static int64_t reference(coll_dtype_t dt, coll_op_t op, int n, uint64_t salt,
                         size_t i) {
  int64_t v = at_value(dt, op, 0, salt, i);
  int r;
  for (r = 1; r < n; r++) v = combine(op, v, at_value(dt, op, r, salt, i));
  return v;
}

/* IEEE binary16 of a value it holds exactly (normal or zero). */
static uint16_t f16_exact(double v) {
  uint16_t sign = v < 0 ? 0x8000u : 0;
  int e;
  double m;
  if (v == 0) return sign;
  m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                    (uint16_t)((m * 2 - 1) * 1024));
}

static double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0)
    v = ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = ldexp(m + 1024, e - 25);
  return (h & 0x8000u) ? -v : v;
}

void at_encode(coll_dtype_t dt, double v, void *elem) {
  switch (dt) {
    case COLL_F16: {
      uint16_t h = f16_exact(v);
      memcpy(elem, &h, 2);
      break;
    }
    case COLL_BF16: {
      float f = (float)v;
      uint32_t b;
      uint16_t h;
      memcpy(&b, &f, 4);
      h = (uint16_t)(b >> 16); /* exact: the test's values fit in 8 bits */
      memcpy(elem, &h, 2);
      break;
    }
    case COLL_F32: {
      float f = (float)v;
      memcpy(elem, &f, 4);
      break;
    }
    case COLL_F64: memcpy(elem, &v, 8); break;
    case COLL_I8: *(int8_t *)elem = (int8_t)v; break;
    case COLL_U8: *(uint8_t *)elem = (uint8_t)v; break;
    case COLL_I32: {
      int32_t x = (int32_t)v;
      memcpy(elem, &x, 4);
      break;
    }
    case COLL_I64: {
      int64_t x = (int64_t)v;
      memcpy(elem, &x, 8);
      break;
    }
    default: break;
  }
}

double at_decode(coll_dtype_t dt, const void *elem) {
  switch (dt) {
    case COLL_F16: {
      uint16_t h;
      memcpy(&h, elem, 2);
      return f16_value(h);
    }
    case COLL_BF16: {
      uint16_t h;
      uint32_t b;
      float f;
      memcpy(&h, elem, 2);
      b = (uint32_t)h << 16;
      memcpy(&f, &b, 4);
      return f;
    }
    case COLL_F32: {
      float f;
      memcpy(&f, elem, 4);
      return f;
    }
    case COLL_F64: {
      double d;
      memcpy(&d, elem, 8);
      return d;
    }
    case COLL_I8: return *(const int8_t *)elem;
    case COLL_U8: return *(const uint8_t *)elem;
    case COLL_I32: {
      int32_t x;
      memcpy(&x, elem, 4);
      return x;
    }
    case COLL_I64: {
      int64_t x;
      memcpy(&x, elem, 8);
      return (double)x;
    }
    default: return 0;
  }
}

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a * 0x9E3779B97F4A7C15ull ^ b * 0xC2B2AE3D27D4EB4Full ^ c;
  return test_rand(&s);
}

/* A random value dt holds exactly, in [-1, 1]. */
static double random_value(coll_dtype_t dt, int rank, uint64_t salt, size_t i) {
  uint64_t u = mix((uint64_t)rank + 1, salt, i);
  switch (dt) {
    case COLL_F16: return ((double)(u % 2049) - 1024) / 1024;
    case COLL_BF16: return ((double)(u % 257) - 128) / 128;
    case COLL_F32: return (float)((double)(u >> 11) / 4503599627370496.0 - 1);
    default: return (double)(u >> 11) / 4503599627370496.0 - 1;
  }
}

static double unit_roundoff(coll_dtype_t dt) {
  switch (dt) {
    case COLL_F16: return ldexp(1, -11);
    case COLL_BF16: return ldexp(1, -8);
    case COLL_F32: return ldexp(1, -24);
    default: return ldexp(1, -53);
  }
}

/* Eight bytes a step: the sanitizers check each load. */
uint64_t at_hash(const void *p, size_t bytes) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull, x;
  size_t i;
  for (i = 0; i + 8 <= bytes; i += 8) {
    memcpy(&x, b + i, 8);
    h = (h ^ x) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int at_has_kernel(coll_dtype_t dt, coll_op_t op) {
  return coll__reduce_fn(dt, op) != NULL;
}

/* ---- running a case ------------------------------------------------ */

static void fill(const at_case_t *c, int rank, uint64_t salt, char *buf,
                 size_t first, size_t count) {
  size_t es = coll_dtype_size(c->dt), i;
  for (i = 0; i < count; i++) {
    double v = c->random
                   ? random_value(c->dt, rank, salt, first + i)
                   : (double)at_value(c->dt, c->op, rank, salt, first + i);
    at_encode(c->dt, v, buf + i * es);
  }
}

/* Compares count elements of buf (global indices from `first`) with the
 * reference; returns the number that differ. */
static size_t check(const at_case_t *c, int n, uint64_t salt, const char *buf,
                    size_t first, size_t count, size_t *first_bad) {
  size_t es = coll_dtype_size(c->dt), i, bad = 0;
  unsigned char want[8];
  for (i = 0; i < count; i++) {
    int ok;
    if (c->random) {
      double ref = 0, mag = 0, got = at_decode(c->dt, buf + i * es);
      int r;
      for (r = 0; r < n; r++) {
        double x = random_value(c->dt, r, salt, first + i);
        ref += x;
        mag += fabs(x);
      }
      ok = fabs(got - ref) <= 2.0 * n * unit_roundoff(c->dt) * mag + 1e-300;
    } else {
      at_encode(c->dt, (double)reference(c->dt, c->op, n, salt, first + i),
                want);
      ok = memcmp(want, buf + i * es, es) == 0;
    }
    if (!ok && bad++ == 0) *first_bad = first + i;
  }
  return bad;
}

static unsigned char pattern(int block, uint64_t salt, size_t j) {
  return (unsigned char)((size_t)block * 131u + j * 7u + salt * 13u + (j >> 8));
}

static void fill_pattern(unsigned char *p, int block, uint64_t salt,
                         size_t bytes) {
  size_t j;
  for (j = 0; j < bytes; j++) p[j] = pattern(block, salt, j);
}

static size_t check_pattern(const unsigned char *p, int block, uint64_t salt,
                            size_t bytes, size_t *first_bad) {
  size_t j, bad = 0;
  for (j = 0; j < bytes; j++)
    if (p[j] != pattern(block, salt, j) && bad++ == 0) *first_bad = j;
  return bad;
}

#define AT_TREE_BELOW (64u * 1024u)

coll_status_t at_call(const at_case_t *c, const coll_algo_ctx_t *ctx,
                      void *buf) {
  size_t es = coll_dtype_size(c->dt);
  switch (c->kind) {
    case AT_AR_RING:
      return coll__allreduce_ring(ctx, buf, c->count, c->dt, c->op);
    case AT_AR_RD:
      return coll__allreduce_rd(ctx, buf, buf, c->count, c->dt, c->op);
    case AT_AR_RING_BOUNDED:
      return coll__allreduce_ring_bounded(ctx, buf, c->count, c->dt, c->op);
    case AT_AR_RH:
      return coll__allreduce_rh(ctx, buf, buf, c->count, c->dt, c->op);
    case AT_RS:
      return coll__reduce_scatter_ring(ctx, buf, c->count, c->dt, c->op);
    case AT_AG: return coll__allgather_ring(ctx, buf, c->count * es);
    /* Both ways of each, split where auto splits them (cpu/rooted.c). */
    case AT_BCAST:
      return c->count * es < AT_TREE_BELOW
                 ? coll__broadcast_tree(ctx, buf, c->count * es, c->root)
                 : coll__broadcast_chain(ctx, buf, c->count * es, c->root);
    case AT_REDUCE:
      return c->count * es < AT_TREE_BELOW
                 ? coll__reduce_tree(ctx, buf, c->count, c->dt, c->op, c->root)
                 : coll__reduce_ring(ctx, buf, c->count, c->dt, c->op, c->root);
    case AT_BARRIER: return coll__barrier(ctx);
  }
  return COLL_ERR_INTERNAL;
}

static size_t case_bytes(const at_case_t *c, int n) {
  size_t blk = c->count * coll_dtype_size(c->dt);
  return (c->kind == AT_RS || c->kind == AT_AG) ? (size_t)n * blk : blk;
}

/* buf holds case_bytes(c) bytes (reused across cases: fresh pages for
 * every case cost more than the collectives under the sanitizers). */
static void run_case(at_world_t *w, int rank, const at_case_t *c, size_t ci,
                     at_out_t *o, int64_t timeout_ms, char *buf) {
  int n = w->n;
  size_t es = coll_dtype_size(c->dt), blk = c->count * es;
  size_t total = case_bytes(c, n);
  uint64_t salt = ci;
  coll_algo_ctx_t ctx;
  memset(o, 0, sizeof *o);
  memset(buf, 0xEE, total);
  switch (c->kind) {
    case AT_RS: fill(c, rank, salt, buf, 0, (size_t)n * c->count); break;
    case AT_AG:
      fill_pattern((unsigned char *)buf + (size_t)rank * blk, rank, salt, blk);
      break;
    case AT_BCAST:
      if (rank == c->root) fill_pattern((unsigned char *)buf, 0, salt, blk);
      break;
    default: fill(c, rank, salt, buf, 0, c->count); break;
  }
  at_ctx(w, rank, AT_SEQ_BASE + (uint32_t)ci, c->seg, timeout_ms, &ctx);
  ctx.seg_max_bytes = c->seg_max;
  o->status = at_call(c, &ctx, buf);
  if (o->status != COLL_OK) {
    snprintf(o->err, sizeof o->err, "%s", coll_last_error());
    return;
  }
  /* Where every rank must end with the same bits, rank 0 checks the
   * values and the others' hashes are compared with its hash. */
  switch (c->kind) {
    case AT_AR_RING:
    case AT_AR_RD:
    case AT_AR_RH:
    case AT_AR_RING_BOUNDED:
      if (rank == 0)
        o->nbad = check(c, n, salt, buf, 0, c->count, &o->first_bad);
      o->hash = at_hash(buf, blk);
      break;
    case AT_RS:
      o->nbad = check(c, n, salt, buf + (size_t)rank * blk,
                      (size_t)rank * c->count, c->count, &o->first_bad);
      break;
    case AT_AG: {
      int b;
      for (b = 0; b < n && rank == 0; b++)
        o->nbad += check_pattern((unsigned char *)buf + (size_t)b * blk, b,
                                 salt, blk, &o->first_bad);
      o->hash = at_hash(buf, total);
      break;
    }
    case AT_BCAST:
      if (rank == 0)
        o->nbad =
            check_pattern((unsigned char *)buf, 0, salt, blk, &o->first_bad);
      o->hash = at_hash(buf, blk);
      break;
    case AT_REDUCE:
      if (rank == c->root)
        o->nbad = check(c, n, salt, buf, 0, c->count, &o->first_bad);
      break;
    case AT_BARRIER: break;
  }
}

typedef struct run_arg {
  at_world_t *w;
  const at_case_t *cases;
  size_t ncases;
  at_out_t *out;
  int64_t timeout_ms;
} run_arg_t;

static void rank_main(int rank, int world, void *p) {
  run_arg_t *a = p;
  size_t i, max = 1;
  char *buf;
  for (i = 0; i < a->ncases; i++)
    if (case_bytes(&a->cases[i], world) > max)
      max = case_bytes(&a->cases[i], world);
  buf = malloc(max);
  for (i = 0; i < a->ncases; i++) {
    at_out_t *o = &a->out[i * (size_t)world + rank];
    if (buf == NULL) {
      o->status = COLL_ERR_NO_MEMORY;
      snprintf(o->err, sizeof o->err, "test: out of memory");
      continue;
    }
    run_case(a->w, rank, &a->cases[i], i, o, a->timeout_ms, buf);
  }
  free(buf);
}

void at_run_cases(at_world_t *w, const at_case_t *cases, size_t ncases,
                  at_out_t *out, int64_t timeout_ms) {
  run_arg_t a = {w, cases, ncases, out, timeout_ms};
  char what[96];
  snprintf(what, sizeof what, "%zu algorithm cases, world %d, %s", ncases, w->n,
           at_tp_name(w->tp));
  /* Cases run one after another; the bound covers them all. */
  test_run_ranks(w->n, rank_main, &a, 600000, what);
}

static int same_bits_everywhere(at_kind_t k) {
  return k == AT_AR_RING || k == AT_AR_RING_BOUNDED || k == AT_AR_RD ||
         k == AT_AR_RH || k == AT_AG || k == AT_BCAST;
}

size_t at_report(const at_world_t *w, const at_case_t *cases, size_t ncases,
                 const at_out_t *out) {
  size_t i, failed = 0;
  int r, n = w->n;
  for (i = 0; i < ncases; i++) {
    const at_case_t *c = &cases[i];
    const at_out_t *o = &out[i * (size_t)n];
    int bad = 0;
    for (r = 0; r < n; r++) {
      if (o[r].status == COLL_OK && o[r].nbad == 0) continue;
      if (!bad++ && failed < 8)
        fprintf(stderr,
                "FAIL %s world %d: case %zu %s count %zu %s %s seg %zu "
                "root %d%s on rank %d: %s %s (%zu wrong, first at %zu)\n",
                at_tp_name(w->tp), n, i, at_kind_name(c->kind), c->count,
                coll_dtype_name(c->dt), coll_op_name(c->op), c->seg, c->root,
                c->random ? " random" : "", r,
                coll_status_name((coll_status_t)o[r].status), o[r].err,
                o[r].nbad, o[r].first_bad);
    }
    if (!bad && same_bits_everywhere(c->kind))
      for (r = 1; r < n; r++)
        if (o[r].hash != o[0].hash) {
          if (!bad++ && failed < 8)
            fprintf(stderr,
                    "FAIL %s world %d: case %zu %s count %zu %s %s: rank %d's "
                    "result bits differ from rank 0's\n",
                    at_tp_name(w->tp), n, i, at_kind_name(c->kind), c->count,
                    coll_dtype_name(c->dt), coll_op_name(c->op), r);
        }
    if (bad) failed++;
  }
  return failed;
}

size_t at_run_world(at_tp_t tp, int n, const at_case_t *cs, size_t nc) {
  at_world_t w;
  at_out_t *out = calloc(nc * (size_t)n + 1, sizeof *out);
  int64_t t0 = test_now_ms();
  size_t failed, leaked;
  if (out == NULL || at_open(&w, n, tp) != 0) {
    fprintf(stderr, "%s world %d: cannot set up the ranks\n", at_tp_name(tp),
            n);
    free(out);
    return 1;
  }
  at_run_cases(&w, cs, nc, out, 60000);
  if (getenv("ALGO_TEST_VERBOSE") != NULL)
    fprintf(stderr, "%s world %d: %zu cases, %lld ms\n", at_tp_name(tp), n, nc,
            (long long)(test_now_ms() - t0));
  failed = at_report(&w, cs, nc, out);
  leaked = at_close(&w);
  if (leaked) fprintf(stderr, "%zu requests never waited\n", leaked);
  free(out);
  return failed + leaked;
}
