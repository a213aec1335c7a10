/* SPDX-License-Identifier: Apache-2.0 */
/* test_collectives.c: every collective, dtype and op on worlds 1..8 of
 * in-process comms, checked bit for bit against a serial reference (inputs
 * are chosen so that the reference is exact), plus random floats checked for
 * bit-identity across ranks and a tolerance against an f64 reference.
 *
 * Per world and count (0, 1, world-1, world+1, large) and dtype: allreduce,
 * reduce_scatter and reduce to the last root with every op; in place with
 * SUM and one other op in turn; reduce to every other root and broadcast
 * from every root; allgather out of place and in place. Count 0 runs each
 * collective once per dtype. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define MAX_WORLD 8
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 240000 /* per world; ctest allows 600 s */
#define LARGE_COUNT 30011     /* odd, and large enough for the ring */
#define QUICK_LARGE_COUNT 3001

static const coll_dtype_t k_dtypes[] = {COLL_F16, COLL_BF16, COLL_F32,
                                        COLL_F64, COLL_I8,   COLL_U8,
                                        COLL_I32, COLL_I64};
static const coll_op_t k_ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN,
                                  COLL_AVG};
#define NDT ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))
#define NOP ((int)(sizeof k_ops / sizeof k_ops[0]))

enum {
  K_AR,
  K_AR_INPLACE,
  K_RS,
  K_RS_INPLACE,
  K_REDUCE,
  K_BCAST,
  K_AG,
  K_AG_INPLACE
};

typedef struct world_ctx {
  int world;
  int quick;
  coll_comm_t *comms[MAX_WORLD];
  size_t counts[5];
  int ncounts;
  t_fail_t fails;
} world_ctx_t;

/* A case id unique per (kind, world, count, dtype, op, root): the inputs of
 * different cases differ. */
static uint64_t case_id(int kind, int world, size_t count, int dt, int op,
                        int root) {
  return t_mix(
      ((uint64_t)kind << 8) | (uint64_t)world, (uint64_t)count,
      ((uint64_t)dt << 16) | ((uint64_t)op << 8) | (uint64_t)(root + 1));
}

/* Per-rank buffers, sized for the largest case. */
typedef struct bufs {
  unsigned char *send, *recv;
} bufs_t;

static void describe(char *out, size_t cap, const char *kind, int world,
                     int rank, size_t count, coll_dtype_t dt, coll_op_t op,
                     int root) {
  snprintf(out, cap, "%s world %d rank %d count %zu %s %s root %d", kind, world,
           rank, count, coll_dtype_name(dt), coll_op_name(op), root);
}

static void run_allreduce(world_ctx_t *c, int rank, bufs_t *b, size_t count,
                          int di, int oi, int inplace) {
  coll_dtype_t dt = k_dtypes[di];
  coll_op_t op = k_ops[oi];
  uint64_t cas =
      case_id(inplace ? K_AR_INPLACE : K_AR, c->world, count, di, oi, -1);
  size_t es = t_size(dt);
  char what[160];
  coll_status_t s;
  describe(what, sizeof what, inplace ? "allreduce(in place)" : "allreduce",
           c->world, rank, count, dt, op, -1);
  t_gen_n(dt, op, rank, 0, cas, b->send, count);
  if (inplace) {
    s = coll_allreduce(c->comms[rank], b->send, b->send, count, dt, op, NULL);
    if (t_expect(&c->fails, s, COLL_OK, "%s", what))
      t_check_reduced(&c->fails, what, dt, op, c->world, 0, cas, b->send,
                      count);
    return;
  }
  memset(b->recv, 0xA5, count * es);
  s = coll_allreduce(c->comms[rank], b->send, b->recv, count, dt, op, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) return;
  t_check_reduced(&c->fails, what, dt, op, c->world, 0, cas, b->recv, count);
  t_check_input(&c->fails, what, dt, op, rank, 0, cas, b->send, count);
}

static void run_reduce_scatter(world_ctx_t *c, int rank, bufs_t *b,
                               size_t count, int di, int oi, int inplace) {
  coll_dtype_t dt = k_dtypes[di];
  coll_op_t op = k_ops[oi];
  uint64_t cas =
      case_id(inplace ? K_RS_INPLACE : K_RS, c->world, count, di, oi, -1);
  size_t es = t_size(dt), n = (size_t)c->world;
  unsigned char *recv;
  char what[160];
  coll_status_t s;
  describe(what, sizeof what,
           inplace ? "reduce_scatter(in place)" : "reduce_scatter", c->world,
           rank, count, dt, op, -1);
  /* Element j of a rank's send buffer is input index j: rank r's result
   * block covers indices r*count .. r*count+count-1. */
  t_gen_n(dt, op, rank, 0, cas, b->send, count * n);
  recv = inplace ? b->send + (size_t)rank * count * es : b->recv;
  if (!inplace) memset(recv, 0xA5, count * es);
  s = coll_reduce_scatter(c->comms[rank], b->send, recv, count, dt, op, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) return;
  t_check_reduced(&c->fails, what, dt, op, c->world, (size_t)rank * count, cas,
                  recv, count);
  if (!inplace)
    t_check_input(&c->fails, what, dt, op, rank, 0, cas, b->send, count * n);
}

static void run_reduce(world_ctx_t *c, int rank, bufs_t *b, size_t count,
                       int di, int oi, int root) {
  coll_dtype_t dt = k_dtypes[di];
  coll_op_t op = k_ops[oi];
  uint64_t cas = case_id(K_REDUCE, c->world, count, di, oi, root);
  size_t es = t_size(dt);
  char what[160];
  coll_status_t s;
  describe(what, sizeof what, "reduce", c->world, rank, count, dt, op, root);
  t_gen_n(dt, op, rank, 0, cas, b->send, count);
  memset(b->recv, 0xA5, count * es);
  /* recv only on the root: NULL elsewhere. */
  s = coll_reduce(c->comms[rank], b->send, rank == root ? b->recv : NULL, count,
                  dt, op, root, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) return;
  if (rank == root)
    t_check_reduced(&c->fails, what, dt, op, c->world, 0, cas, b->recv, count);
  t_check_input(&c->fails, what, dt, op, rank, 0, cas, b->send, count);
}

static void check_bytes(t_fail_t *f, const char *what, int src, uint64_t cas,
                        const unsigned char *got, size_t n,
                        unsigned char *tmp) {
  size_t i;
  t_bytes(src, cas, tmp, n);
  if (memcmp(got, tmp, n) == 0) return;
  for (i = 0; i < n && got[i] == tmp[i]; i++) {
  }
  t_fail(f, "%s: byte %zu of rank %d's data is 0x%02x, expected 0x%02x", what,
         i, src, got[i], tmp[i]);
}

static void run_broadcast(world_ctx_t *c, int rank, bufs_t *b, size_t count,
                          int di, int root) {
  coll_dtype_t dt = k_dtypes[di];
  uint64_t cas = case_id(K_BCAST, c->world, count, di, 0, root);
  size_t bytes = count * t_size(dt);
  char what[160];
  coll_status_t s;
  describe(what, sizeof what, "broadcast", c->world, rank, count, dt, COLL_SUM,
           root);
  if (rank == root)
    t_bytes(root, cas, b->send, bytes);
  else
    memset(b->send, 0xA5, bytes);
  s = coll_broadcast(c->comms[rank], b->send, count, dt, root, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) return;
  check_bytes(&c->fails, what, root, cas, b->send, bytes, b->recv);
}

static void run_allgather(world_ctx_t *c, int rank, bufs_t *b, size_t count,
                          int di, int inplace) {
  coll_dtype_t dt = k_dtypes[di];
  uint64_t cas =
      case_id(inplace ? K_AG_INPLACE : K_AG, c->world, count, di, 0, -1);
  size_t block = count * t_size(dt), n = (size_t)c->world;
  unsigned char *mine = b->recv + (size_t)rank * block, *tmp;
  char what[160];
  coll_status_t s;
  int q;
  describe(what, sizeof what, inplace ? "allgather(in place)" : "allgather",
           c->world, rank, count, dt, COLL_SUM, -1);
  memset(b->recv, 0xA5, block * n);
  t_bytes(rank, cas, inplace ? mine : b->send, block);
  s = coll_allgather(c->comms[rank], inplace ? mine : b->send, b->recv, count,
                     dt, NULL);
  if (!t_expect(&c->fails, s, COLL_OK, "%s", what)) return;
  tmp = malloc(block ? block : 1);
  if (tmp == NULL) {
    t_fail(&c->fails, "%s: out of memory in the test", what);
    return;
  }
  for (q = 0; q < c->world; q++)
    check_bytes(&c->fails, what, q, cas, b->recv + (size_t)q * block, block,
                tmp);
  if (!inplace) check_bytes(&c->fails, what, rank, cas, b->send, block, tmp);
  free(tmp);
}

static void world_rank(int rank, int world, void *arg) {
  world_ctx_t *c = arg;
  size_t maxc = c->counts[c->ncounts - 1] * (size_t)world * 8;
  bufs_t b;
  int ci, di, oi, root;
  b.send = malloc(maxc ? maxc : 1);
  b.recv = malloc(maxc ? maxc : 1);
  if (b.send == NULL || b.recv == NULL) {
    t_fail(&c->fails, "rank %d: out of memory in the test", rank);
    goto out;
  }
  for (ci = 0; ci < c->ncounts; ci++) {
    size_t count = c->counts[ci];
    for (di = 0; di < NDT; di++) {
      if (count == 0) {
        /* Nothing to reduce: every collective once per dtype. */
        oi = di % NOP;
        run_allreduce(c, rank, &b, 0, di, oi, 0);
        run_allreduce(c, rank, &b, 0, di, oi, 1);
        run_reduce_scatter(c, rank, &b, 0, di, oi, 0);
        run_reduce_scatter(c, rank, &b, 0, di, oi, 1);
        run_reduce(c, rank, &b, 0, di, oi, di % world);
        run_broadcast(c, rank, &b, 0, di, di % world);
        run_allgather(c, rank, &b, 0, di, 0);
        run_allgather(c, rank, &b, 0, di, 1);
        continue;
      }
      for (oi = 0; oi < NOP; oi++) {
        run_allreduce(c, rank, &b, count, di, oi, 0);
        run_reduce_scatter(c, rank, &b, count, di, oi, 0);
        /* Every op to the last root ... */
        run_reduce(c, rank, &b, count, di, oi, world - 1);
        /* In place: SUM and one other op per dtype, in turn (the numerics
         * per op are covered out of place). */
        if (oi == 0 || oi == 1 + di % (NOP - 1)) {
          run_allreduce(c, rank, &b, count, di, oi, 1);
          run_reduce_scatter(c, rank, &b, count, di, oi, 1);
        }
      }
      /* ... and every other root, with the ops in turn. */
      for (root = 0; root < world - 1; root++)
        run_reduce(c, rank, &b, count, di, (root + di) % NOP, root);
      for (root = 0; root < world; root++)
        run_broadcast(c, rank, &b, count, di, root);
      run_allgather(c, rank, &b, count, di, 0);
      run_allgather(c, rank, &b, count, di, 1);
    }
  }
out:
  free(b.send);
  free(b.recv);
}

static void test_world(void **state) {
  world_ctx_t *c = *state;
  char what[64];
  int w = c->world;
  c->quick = t_quick();
  /* The quick matrix keeps worlds 1..5 and 8. */
  if (c->quick && (w == 6 || w == 7)) skip();
  c->ncounts = 0;
  /* {0, 1, world-1, world+1, large}, without repeats. */
  c->counts[c->ncounts++] = 0;
  c->counts[c->ncounts++] = 1;
  if (w - 1 > 1) c->counts[c->ncounts++] = (size_t)w - 1;
  c->counts[c->ncounts++] = (size_t)w + 1;
  c->counts[c->ncounts++] = c->quick ? QUICK_LARGE_COUNT : LARGE_COUNT;
  t_fail_init(&c->fails);
  assert_int_equal(test_inproc_comms(w, COMM_TIMEOUT_MS, c->comms), 0);
  snprintf(what, sizeof what, "collectives on world %d", w);
  test_run_ranks(w, world_rank, c, RUN_TIMEOUT_MS, what);
  test_destroy_comms(w, c->comms);
  assert_int_equal(t_fail_report(&c->fails, what), 0);
  t_fail_destroy(&c->fails);
}

/* ---- random floats ------------------------------------------------------ */

/* Tolerance against the f64 reference: the library rounds to the dtype after
 * each of at most world-1 combining steps, and AVG adds one scaling and one
 * rounding, so |got - ref| <= (world + 1) * u * sum_r |x_r| (scaled by 1/n
 * for AVG) + world * tiny, with u the dtype's unit roundoff (f16 2^-11, bf16
 * 2^-8, f32 2^-24, f64 2^-53) and tiny its smallest subnormal step. */
static void unit_roundoff(coll_dtype_t dt, double *u, double *tiny) {
  switch (dt) {
    case COLL_F16:
      *u = ldexp(1, -11);
      *tiny = ldexp(1, -24);
      break;
    case COLL_BF16:
      *u = ldexp(1, -8);
      *tiny = ldexp(1, -133);
      break;
    case COLL_F32:
      *u = ldexp(1, -24);
      *tiny = ldexp(1, -149);
      break;
    default:
      *u = ldexp(1, -53);
      *tiny = ldexp(1, -1074);
      break;
  }
}

typedef struct rand_ctx {
  int world;
  coll_comm_t *comms[MAX_WORLD];
  coll_dtype_t dt;
  coll_op_t op;
  size_t count;
  uint64_t cas;
  unsigned char *res[MAX_WORLD];
  t_fail_t fails;
} rand_ctx_t;

static double rand_input(coll_dtype_t dt, int rank, size_t i, uint64_t cas) {
  uint64_t h = t_mix(cas, (uint64_t)rank + 1000, i);
  /* Uniform in [-1, 1), with a spread of magnitudes down to 2^-12. */
  double v = ldexp((double)(h >> 11), -53) * 2.0 - 1.0;
  v = ldexp(v, -(int)(h % 13));
  return t_round(dt, v);
}

static void rand_rank(int rank, int world, void *arg) {
  rand_ctx_t *c = arg;
  size_t i;
  char what[160];
  coll_status_t s;
  for (i = 0; i < c->count; i++)
    t_store_f(c->dt, c->res[rank], i, rand_input(c->dt, rank, i, c->cas));
  s = coll_allreduce(c->comms[rank], c->res[rank], c->res[rank], c->count,
                     c->dt, c->op, NULL);
  snprintf(what, sizeof what,
           "random allreduce world %d rank %d count %zu %s %s", world, rank,
           c->count, coll_dtype_name(c->dt), coll_op_name(c->op));
  (void)t_expect(&c->fails, s, COLL_OK, "%s", what);
}

/* The test thread's checks of one random case. */
static void rand_check(rand_ctx_t *c) {
  size_t es = t_size(c->dt), i;
  double u, tiny;
  int r;
  unit_roundoff(c->dt, &u, &tiny);
  for (r = 1; r < c->world; r++) {
    if (memcmp(c->res[r], c->res[0], c->count * es) == 0) continue;
    for (i = 0; i < c->count &&
                memcmp(c->res[r] + i * es, c->res[0] + i * es, es) == 0;
         i++) {
    }
    t_fail(&c->fails,
           "random %s %s world %d count %zu: rank %d differs "
           "from rank 0 at element %zu (%.17g vs %.17g)",
           coll_dtype_name(c->dt), coll_op_name(c->op), c->world, c->count, r,
           i, t_load_f(c->dt, c->res[r], i), t_load_f(c->dt, c->res[0], i));
  }
  for (i = 0; i < c->count; i++) {
    double ref = 0.0, mag = 0.0, tol, got;
    for (r = 0; r < c->world; r++) {
      double x = rand_input(c->dt, r, i, c->cas);
      ref += x;
      mag += fabs(x);
    }
    tol = (c->world + 1) * u * mag + c->world * tiny;
    if (c->op == COLL_AVG) {
      ref /= c->world;
      tol = tol / c->world + u * fabs(ref) + tiny;
    }
    got = t_load_f(c->dt, c->res[0], i);
    if (!(fabs(got - ref) <= tol)) {
      t_fail(&c->fails,
             "random %s %s world %d count %zu: element %zu is "
             "%.17g, f64 reference %.17g, tolerance %.3g",
             coll_dtype_name(c->dt), coll_op_name(c->op), c->world, c->count, i,
             got, ref, tol);
      return;
    }
  }
}

static void test_random_floats(void **state) {
  static const coll_dtype_t fdts[] = {COLL_F32, COLL_F64, COLL_F16, COLL_BF16};
  static const coll_op_t fops[] = {COLL_SUM, COLL_AVG};
  static const int full_worlds[] = {2, 3, 5, 8}, quick_worlds[] = {3};
  /* 140001 f16 elements are large enough to take the ring. */
  static const size_t full_counts[] = {7, 1001, 140001},
                      quick_counts[] = {7, 1001};
  int quick = t_quick();
  const int *worlds = quick ? quick_worlds : full_worlds;
  int nworlds = quick ? 1 : 4, wi, di, oi, ci, r;
  const size_t *counts = quick ? quick_counts : full_counts;
  int ncounts = quick ? 2 : 3;
  rand_ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (wi = 0; wi < nworlds; wi++) {
    c->world = worlds[wi];
    assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
    for (r = 0; r < c->world; r++) {
      c->res[r] = malloc(counts[ncounts - 1] * 8);
      assert_non_null(c->res[r]);
    }
    for (di = 0; di < 4; di++)
      for (oi = 0; oi < 2; oi++)
        for (ci = 0; ci < ncounts; ci++) {
          c->dt = fdts[di];
          c->op = fops[oi];
          c->count = counts[ci];
          c->cas =
              t_mix(0xf10a7, (uint64_t)c->world,
                    ((uint64_t)di << 32) | ((uint64_t)oi << 24) | (uint64_t)ci);
          test_run_ranks(c->world, rand_rank, c, RUN_TIMEOUT_MS,
                         "random-float allreduce");
          rand_check(c);
        }
    for (r = 0; r < c->world; r++) free(c->res[r]);
    test_destroy_comms(c->world, c->comms);
  }
  assert_int_equal(t_fail_report(&c->fails, "random floats"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* Every finite positive value round-trips; the midpoint between neighbours
 * rounds to the even one, and just off it to the nearer one. inf_bits is the
 * format's +infinity. */
static void half_exhaustive(float (*to_f32)(uint16_t),
                            uint16_t (*from_f32)(float), unsigned inf_bits) {
  unsigned h;
  for (h = 0; h < inf_bits; h++) {
    float lo = to_f32((uint16_t)h), hi = to_f32((uint16_t)(h + 1)), mid;
    assert_int_equal(from_f32(lo), h);
    assert_int_equal(from_f32(-lo), h | 0x8000);
    if (h + 1 == inf_bits) break; /* no finite neighbour above */
    mid = (float)(((double)lo + (double)hi) / 2); /* exact in f32 */
    assert_int_equal(from_f32(mid), (h & 1) ? h + 1 : h);
    assert_int_equal(from_f32(nextafterf(mid, 0.0f)), h);
    assert_int_equal(from_f32(nextafterf(mid, INFINITY)), h + 1);
  }
}

/* The test's own half conversions, checked on known values. */
static void test_half_reference(void **state) {
  (void)state;
  assert_int_equal(t_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(t_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(t_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(t_f32_to_f16(65520.0f), 0x7c00); /* ties to even: inf */
  assert_int_equal(t_f32_to_f16(ldexpf(1, -24)), 0x0001);
  assert_int_equal(t_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie to even */
  assert_int_equal(t_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);
  assert_int_equal(t_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
  assert_int_equal(t_f32_to_f16(-0.0f), 0x8000);
  assert_true(t_f16_to_f32(0x3555) == 0.333251953125f);
  assert_true(t_f16_to_f32(0x0001) == ldexpf(1, -24));
  assert_int_equal(t_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(t_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
  assert_int_equal(t_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);
  assert_int_equal(t_f32_to_bf16(-3.0f), 0xc040);
  assert_true(t_bf16_to_f32(0x4049) == 3.140625f);
  half_exhaustive(t_f16_to_f32, t_f32_to_f16, 0x7c00);
  half_exhaustive(t_bf16_to_f32, t_f32_to_bf16, 0x7f80);
}

/* test_api_collectives [NAME...]: runs the named tests only (half_reference,
 * world_1 .. world_8, random_floats), all of them without names. ctest runs
 * the matrix in parts so that they can run in parallel. */
int main(int argc, char **argv) {
  static world_ctx_t worlds[MAX_WORLD];
  struct CMUnitTest all[MAX_WORLD + 2], tests[MAX_WORLD + 2];
  static char names[MAX_WORLD][16];
  int w, i, a, n = 0, nall = 0;
  all[nall++] = (struct CMUnitTest){"half_reference", test_half_reference, NULL,
                                    NULL, NULL};
  for (w = 1; w <= MAX_WORLD; w++) {
    worlds[w - 1].world = w;
    snprintf(names[w - 1], sizeof names[0], "world_%d", w);
    all[nall++] = (struct CMUnitTest){names[w - 1], test_world, NULL, NULL,
                                      &worlds[w - 1]};
  }
  all[nall++] = (struct CMUnitTest){"random_floats", test_random_floats, NULL,
                                    NULL, NULL};
  for (i = 0; i < nall; i++) {
    int wanted = argc <= 1;
    for (a = 1; a < argc; a++)
      if (strcmp(argv[a], all[i].name) == 0) wanted = 1;
    if (wanted) tests[n++] = all[i];
  }
  for (a = 1; a < argc; a++) {
    for (i = 0; i < nall && strcmp(argv[a], all[i].name) != 0; i++) {
    }
    if (i == nall) {
      fprintf(stderr, "test_api_collectives: no test named '%s'\n", argv[a]);
      return 2;
    }
  }
  return _cmocka_run_group_tests("collectives", tests, (size_t)n, NULL, NULL);
}
