/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_rows.c: every row of every CPU collective's table of
 * algorithms (cpu/choose.h), forced with COLL_ALGO, reports a desync the
 * same way. For each row, over the in-process transport (shared memory:
 * the check is a round) and over the tests' mailbox transport plugged in
 * through the public vtable (messages: the check rides in a carrier's
 * first messages or runs alone), with 2, 3 and 4 rank threads: the chooser
 * picks the row forced; a rank that passes another count, another dtype of
 * the same size, a count large enough for a carrier to run the check alone,
 * or another collective makes every rank fail with
 * COLL_ERR_LENGTH_MISMATCH and the very text every other row gave for the
 * same case on that rank; and the comm then runs the collective with the
 * exact result of a serial reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "core/comm.h"
#include "core/env.h"
#include "cpu/choose.h"
#include "mailbox.h"

#define RUN_TIMEOUT_MS 120000
#define COMM_TIMEOUT_MS 20000
#define MAX_WORLD 4
#define SMALL 1000  /* 4 KB of i32: within a carrier's message */
#define LARGE 70001 /* 280 KB: past it, the check runs alone */

typedef enum { K_AR, K_BCAST, K_REDUCE, K_AG, K_RS, NKINDS } kind_t;

static const char *const k_kind_names[NKINDS] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter"};

static const coll_cpu_table_t *table_of(kind_t k) {
  switch (k) {
    case K_AR: return &coll__cpu_allreduce_algos;
    case K_BCAST: return &coll__cpu_broadcast_algos;
    case K_REDUCE: return &coll__cpu_reduce_algos;
    case K_AG: return &coll__cpu_allgather_algos;
    default: return &coll__cpu_reduce_scatter_algos;
  }
}

/* One desync: every rank calls the table's collective with `count` i32,
 * but the odd rank (the last) calls `odd_kind` with odd_count of odd_dt. */
typedef struct dcase {
  const char *what;
  size_t count;
  int other_kind; /* the odd rank calls another collective */
  size_t odd_count;
  coll_dtype_t odd_dt;
} dcase_t;

static const dcase_t k_cases[] = {
    {"count", SMALL, 0, SMALL + 1, COLL_I32},
    {"dtype of the same size", SMALL, 0, SMALL, COLL_F32},
    {"large count", LARGE, 0, LARGE - 1, COLL_I32},
    {"another collective", SMALL, 1, SMALL, COLL_I32},
};
#define NCASES ((int)(sizeof k_cases / sizeof k_cases[0]))

#define TEXT 512
typedef struct outcome {
  coll_status_t s;
  char text[TEXT];
} outcome_t;

/* What every row must match, per (transport, world, kind, case, rank):
 * the first row's outcome. Per transport: the shared-memory round gives
 * every rank the text the messages give rank 0, and the messages give each
 * rank a pair it learnt of, so another rank may name another rank that
 * agrees with the odd one (never another pair than the odd one's). */
static outcome_t g_first[2][MAX_WORLD + 1][NKINDS][NCASES][MAX_WORLD];
static t_fail_t g_fails;
/* Rows that ran somewhere: every one must. */
static int g_ran[NKINDS][16];

typedef struct job {
  coll_comm_t *comms[MAX_WORLD];
  kind_t kind;
  const char *row;             /* its COLL_ALGO word */
  outcome_t (*out)[MAX_WORLD]; /* [case][rank] */
  const char *where;           /* "inproc, 4 ranks" */
} job_t;

static coll_status_t call(coll_comm_t *c, kind_t k, int32_t *a, int32_t *b,
                          size_t n, coll_dtype_t dt) {
  switch (k) {
    case K_AR: return coll_allreduce(c, a, b, n, dt, COLL_SUM, NULL);
    case K_BCAST: return coll_broadcast(c, a, n, dt, 0, NULL);
    case K_REDUCE: return coll_reduce(c, a, b, n, dt, COLL_SUM, 0, NULL);
    case K_AG: return coll_allgather(c, a, b, n, dt, NULL);
    default: return coll_reduce_scatter(c, a, b, n, dt, COLL_SUM, NULL);
  }
}

static int32_t val(int rank, size_t i) {
  return (int32_t)(rank * 1000 + (int)(i % 997));
}

/* The collective run right, checked against the serial reference. */
static void run_right(const job_t *J, int rank, int world, int32_t *a,
                      int32_t *b) {
  size_t n = SMALL, i,
         len = J->kind == K_AG || J->kind == K_RS ? n * (size_t)world : n;
  coll_status_t s;
  for (i = 0; i < len; i++) {
    a[i] = val(rank, i);
    b[i] = -1;
  }
  s = call(J->comms[rank], J->kind, a, b, n, COLL_I32);
  if (!t_expect(&g_fails, s, COLL_OK, "%s %s, %s: rank %d after the desyncs",
                k_kind_names[J->kind], J->row, J->where, rank))
    return;
  for (i = 0; i < n; i++) {
    int32_t want = 0, got;
    int r;
    switch (J->kind) {
      case K_BCAST: want = val(0, i), got = a[i]; break;
      case K_AG:
        /* Block r of b is rank r's a[0..n). */
        for (r = 0; r < world; r++)
          if (b[(size_t)r * n + i] != val(r, i)) {
            t_fail(&g_fails, "allgather %s, %s: rank %d block %d elem %zu",
                   J->row, J->where, rank, r, i);
            return;
          }
        continue;
      case K_RS:
        for (r = 0; r < world; r++) want += val(r, (size_t)rank * n + i);
        got = b[i];
        break;
      case K_REDUCE:
        if (rank != 0) continue;
        /* fall through */
      default:
        for (r = 0; r < world; r++) want += val(r, i);
        got = J->kind == K_REDUCE || J->kind == K_AR ? b[i] : a[i];
        break;
    }
    if (got != want) {
      t_fail(&g_fails, "%s %s, %s: rank %d elem %zu is %d, want %d",
             k_kind_names[J->kind], J->row, J->where, rank, i, (int)got,
             (int)want);
      return;
    }
  }
}

static void rank_main(int rank, int world, void *arg) {
  job_t *J = arg;
  size_t cap = (size_t)LARGE * MAX_WORLD + 8;
  int32_t *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b);
  int i;
  if (a == NULL || b == NULL) {
    t_fail(&g_fails, "out of memory in the test");
    goto out;
  }
  for (i = 0; i < NCASES; i++) {
    const dcase_t *dc = &k_cases[i];
    outcome_t *o = &J->out[i][rank];
    coll_status_t s;
    if (rank == world - 1) {
      kind_t k = dc->other_kind ? (J->kind == K_AR ? K_BCAST : K_AR) : J->kind;
      s = call(J->comms[rank], k, a, b, dc->odd_count, dc->odd_dt);
    } else {
      s = call(J->comms[rank], J->kind, a, b, dc->count, COLL_I32);
    }
    o->s = s;
    snprintf(o->text, sizeof o->text, "%s",
             s == COLL_OK ? "" : coll_last_error());
  }
  run_right(J, rank, world, a, b);
out:
  free(a);
  free(b);
}

static int make_comms(int tr, int world, coll_comm_t **comms) {
  return tr == 0 ? test_inproc_comms(world, COMM_TIMEOUT_MS, comms)
                 : mb_comms(world, MB_FULL_NO_BARRIER, COMM_TIMEOUT_MS, comms);
}

/* Runs the cases with row i of kind's table forced; 0 if it cannot run on
 * this comm (the chooser then goes elsewhere, which another row covers). */
static int run_row(int tr, int world, kind_t kind, size_t i, int *first) {
  const coll_cpu_table_t *t = table_of(kind);
  const coll_cpu_row_t *row = coll__cpu_row(t, i);
  const char *word = coll__knob_word_at(COLL_ENV_ALGO, row->word);
  outcome_t out[NCASES][MAX_WORLD];
  char where[64], odd_name[32];
  job_t J;
  coll_cpu_t *cpu;
  int c, r;
  snprintf(odd_name, sizeof odd_name, "rank %d has", world - 1);
  snprintf(where, sizeof where, "%s, %d ranks", tr == 0 ? "inproc" : "mailbox",
           world);
  setenv("COLL_ALGO", word, 1);
  c = make_comms(tr, world, J.comms);
  unsetenv("COLL_ALGO");
  assert_int_equal(c, 0);
  cpu = J.comms[0]->be;
  if (row->can != NULL && !row->can(cpu)) {
    test_destroy_comms(world, J.comms);
    return 0;
  }
  /* Forcing works: the chooser takes this row at every size. */
  if (coll__cpu_choose(cpu, t, 4) != i ||
      coll__cpu_choose(cpu, t, 1u << 26) != i)
    t_fail(&g_fails, "%s %s, %s: COLL_ALGO=%s does not choose its row",
           k_kind_names[kind], word, where, word);
  J.kind = kind;
  J.row = word;
  J.out = out;
  J.where = where;
  memset(out, 0, sizeof out);
  test_run_ranks(world, rank_main, &J, RUN_TIMEOUT_MS, "forced rows");
  test_destroy_comms(world, J.comms);
  for (c = 0; c < NCASES; c++)
    for (r = 0; r < world; r++) {
      outcome_t *o = &out[c][r], *f = &g_first[tr][world][kind][c][r];
      if (o->s != COLL_ERR_LENGTH_MISMATCH || o->text[0] == '\0') {
        t_fail(&g_fails, "%s %s, %s, desync \"%s\": rank %d got %s: %s",
               k_kind_names[kind], word, where, k_cases[c].what, r,
               coll_status_name(o->s), o->text);
        continue;
      }
      /* Any two ranks that differ include the odd one. */
      if (strstr(o->text, odd_name) == NULL)
        t_fail(&g_fails,
               "%s %s, %s, desync \"%s\": rank %d: \"%s\" names "
               "no %s",
               k_kind_names[kind], word, where, k_cases[c].what, r, o->text,
               odd_name);
      if (*first) {
        *f = *o;
      } else if (strcmp(o->text, f->text) != 0) {
        t_fail(&g_fails,
               "%s %s, %s, desync \"%s\": rank %d reports \"%s\", another "
               "row \"%s\"",
               k_kind_names[kind], word, where, k_cases[c].what, r, o->text,
               f->text);
      }
    }
  *first = 0;
  g_ran[kind][i] = 1;
  return 1;
}

static void test_every_row(void **state) {
  static const int worlds[] = {2, 3, 4};
  int tr, w, k;
  size_t i;
  (void)state;
  t_fail_init(&g_fails);
  for (tr = 0; tr < 2; tr++)
    for (w = 0; w < 3; w++)
      for (k = 0; k < NKINDS; k++) {
        const coll_cpu_table_t *t = table_of((kind_t)k);
        int first = 1;
        for (i = 0; i < t->n; i++)
          (void)run_row(tr, worlds[w], (kind_t)k, i, &first);
      }
  for (k = 0; k < NKINDS; k++)
    for (i = 0; i < table_of((kind_t)k)->n; i++)
      if (!g_ran[k][i])
        t_fail(&g_fails, "%s: row %zu (%s) ran nowhere", k_kind_names[k], i,
               coll__knob_word_at(COLL_ENV_ALGO,
                                  coll__cpu_row(table_of((kind_t)k), i)->word));
  assert_int_equal(t_fail_report(&g_fails, "forced rows"), 0);
  t_fail_destroy(&g_fails);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
