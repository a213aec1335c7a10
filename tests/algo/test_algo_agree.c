/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_agree.c: the descriptor check, and the scratch area. Matching
 * descriptors pass on every rank; one rank differing in count, dtype, op,
 * root or collective, at every position, makes every rank return
 * COLL_ERR_LENGTH_MISMATCH with a text naming the field and the rank, and
 * nobody hangs; the comm stays usable afterwards. On 1..8 ranks over every
 * test transport. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_test.h"
#include "core/comm.h"
#include "test_util.h"

enum { F_NONE, F_KIND, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_COUNT_HIGH, F_NFIELD };
static const char *const field_word[F_NFIELD] = {
    "", "collective", "count", "dtype", "op", "root", "count"};

/* A scenario: rank `pos` (and `pos2` if >= 0, in field f2) differs. */
typedef struct scen {
  int field, pos, field2, pos2;
} scen_t;

#define MAX_SCEN 256

typedef struct agree_arg {
  at_world_t *w;
  const scen_t *sc;
  size_t nsc;
  int *status; /* [scenario * n + rank] */
  char (*text)[COLL_ERRMSG_MAX];
} agree_arg_t;

static void change(coll_desc_t *d, int field) {
  switch (field) {
    case F_KIND: d->kind = COLL_WORK_BROADCAST; break;
    case F_COUNT: d->count = 101; break;
    case F_DTYPE: d->dtype = COLL_I32; break;
    case F_OP: d->op = COLL_MAX; break;
    case F_ROOT: d->root = 3; break;
    case F_COUNT_HIGH: d->count += (uint64_t)1 << 32; break;
    default: break;
  }
}

static void rank_main(int rank, int n, void *p) {
  agree_arg_t *a = p;
  size_t i;
  for (i = 0; i < a->nsc; i++) {
    const scen_t *s = &a->sc[i];
    coll_desc_t d = {.kind = COLL_WORK_ALLREDUCE,
                     .dtype = COLL_F32,
                     .op = COLL_SUM,
                     .count = 100};
    coll_algo_ctx_t ctx;
    size_t k = i * (size_t)n + (size_t)rank;
    if (rank == s->pos) change(&d, s->field);
    if (rank == s->pos2) change(&d, s->field2);
    at_ctx(a->w, rank, (uint32_t)i, 64, 30000, &ctx);
    a->status[k] = coll__agree(&ctx, &d);
    snprintf(a->text[k], COLL_ERRMSG_MAX, "%s", coll_last_error());
  }
}

/* Scenarios for n ranks: all equal; each field at each position; two ranks
 * differing in different fields; and all equal again at the end. */
static size_t scenarios(scen_t *sc, int n) {
  size_t k = 0;
  int f, pos;
  sc[k++] = (scen_t){F_NONE, -1, F_NONE, -1};
  if (n > 1)
    for (f = F_KIND; f < F_NFIELD; f++)
      for (pos = 0; pos < n; pos++) sc[k++] = (scen_t){f, pos, F_NONE, -1};
  if (n > 2) {
    sc[k++] = (scen_t){F_COUNT, 0, F_DTYPE, n - 1};
    sc[k++] = (scen_t){F_OP, n / 2, F_ROOT, 1};
  }
  sc[k++] = (scen_t){F_NONE, -1, F_NONE, -1};
  return k;
}

static int check_text(const char *t, const scen_t *s) {
  char want[64];
  if (strncmp(t, "ranks disagree", 14) != 0) return 0;
  if (s->pos2 >= 0) return 1; /* which pair is named depends on the order */
  snprintf(want, sizeof want, "rank %d has %s", s->pos, field_word[s->field]);
  return strstr(t, want) != NULL;
}

static void test_agree(void **state) {
  scen_t sc[MAX_SCEN];
  size_t failed = 0;
  int n, tp;
  (void)state;
  for (tp = 0; tp < AT_NTP; tp++)
    for (n = 1; n <= AT_MAXW; n++) {
      at_world_t w;
      size_t nsc = scenarios(sc, n), i;
      agree_arg_t a;
      int r;
      a.w = &w;
      a.sc = sc;
      a.nsc = nsc;
      a.status = calloc(nsc * (size_t)n, sizeof *a.status);
      a.text = calloc(nsc * (size_t)n, sizeof *a.text);
      assert_non_null(a.status);
      assert_non_null(a.text);
      assert_int_equal(at_open(&w, n, (at_tp_t)tp), 0);
      test_run_ranks(n, rank_main, &a, 120000, "agree");
      for (i = 0; i < nsc; i++)
        for (r = 0; r < n; r++) {
          size_t k = i * (size_t)n + (size_t)r;
          int want = sc[i].field == F_NONE ? COLL_OK : COLL_ERR_LENGTH_MISMATCH;
          int ok = a.status[k] == want &&
                   (want == COLL_OK || check_text(a.text[k], &sc[i]));
          if (ok) continue;
          if (failed++ < 8)
            fprintf(stderr,
                    "FAIL %s world %d scenario %zu (field %d at rank %d) "
                    "rank %d: %s: %s\n",
                    at_tp_name((at_tp_t)tp), n, i, sc[i].field, sc[i].pos, r,
                    coll_status_name((coll_status_t)a.status[k]), a.text[k]);
        }
      if (getenv("ALGO_TEST_VERBOSE") != NULL && n == AT_MAXW)
        fprintf(stderr, "example: %s\n", a.text[(nsc - 3) * (size_t)n]);
      failed += at_close(&w);
      free(a.status);
      free(a.text);
    }
  assert_int_equal(failed, 0);
}

/* Scratch grows on demand, is 64-byte aligned, and is reused (the same
 * pointer) for any request that fits. */
static void test_scratch(void **state) {
  coll_scratch_t s = {NULL, 0};
  char *p, *q;
  (void)state;
  p = coll__scratch_get(&s, 0);
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % 64, 0);
  p = coll__scratch_get(&s, 1000);
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % 64, 0);
  assert_true(s.cap >= 1000);
  memset(p, 1, 1000); /* all of it is usable (ASan would say otherwise) */
  q = coll__scratch_get(&s, 10);
  assert_ptr_equal(p, q);
  q = coll__scratch_get(&s, 1000);
  assert_ptr_equal(p, q);
  q = coll__scratch_get(&s, 1 << 20);
  assert_non_null(q);
  assert_int_equal((uintptr_t)q % 64, 0);
  memset(q, 2, 1 << 20);
  assert_null(coll__scratch_get(&s, SIZE_MAX));
  assert_int_equal(strncmp(coll_last_error(), "scratch", 7), 0);
  coll__scratch_free(&s);
  assert_null(s.ptr);
  assert_int_equal(s.cap, 0);
  coll__scratch_free(&s); /* twice is harmless */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scratch),
      cmocka_unit_test(test_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
