/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_check.c: the descriptor check folded into the shared-memory
 * allreduce (algo/allreduce_shm.c), between forked rank processes over
 * COLL_TRANSPORT=shm with the default algorithm choice and the check on.
 * At 2, 3 and 4 ranks, one rank passes a different count, dtype or op
 * (or count 0, or a broadcast instead), in the first call and after good
 * calls, on a small buffer and on one of several rounds: every rank gets
 * LENGTH_MISMATCH with the same text, naming the ranks the agreement names
 * (coll__agree_seen), and no rank's output buffer was written; the allreduces
 * between and after are bit-exact against a serial sum in rank order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "boot_test.h"
#include "coll.h"
#include "cpu/cpu.h"
#include "test_util.h"

#define MAX_RANKS 4
#define CHILD_MS 90000
#define SENTINEL 0xA5
/* Over one 256 KiB slot of f32: the check rides in the first of rounds. */
#define BIG 70001

typedef enum { K_COUNT, K_ZERO, K_DTYPE, K_OP, K_BIG, K_BCAST } kind_t;

/* A mismatch case: what the odd rank (the last one) does differently. */
typedef struct mcase {
  const char *what;
  kind_t kind;
} mcase_t;

static const mcase_t k_cases[] = {
    {"count 4 vs 5", K_COUNT},     {"count 4 vs 0", K_ZERO},
    {"dtype f32 vs i32", K_DTYPE}, {"op sum vs max", K_OP},
    {"count over rounds", K_BIG},  {"allreduce vs broadcast", K_BCAST},
};
#define NCASES ((int)(sizeof k_cases / sizeof k_cases[0]))

typedef struct rank_out {
  int status; /* first failure's status; -1 a wrong value */
  char msg[400];
  int used_shm;
  char text[NCASES][256]; /* each mismatch's coll_last_error() */
} rank_out_t;

typedef struct job {
  int world, port, rank;
  rank_out_t *out;
} job_t;

/* The rank's first failure (boot_test.h). */
#define fail_out(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

/* Rank r's element i: small integers, so the f32 sum is exact and its
 * serial reference in rank order is the same bits. */
static float val(int r, size_t i, int it) {
  return (float)((int)((i * 7 + (size_t)r * 13 + (size_t)it) % 101) - 50);
}

/* A good allreduce of n f32 out of place; checks every element. */
static void good(coll_comm_t *c, const job_t *j, rank_out_t *o, size_t n,
                 int it) {
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  coll_status_t s;
  if (a == NULL || b == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) a[i] = val(j->rank, i, it);
  s = coll_allreduce(c, a, b, n, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_OK) {
    fail_out(o, s, "good allreduce %d of %zu: %s", it, n, coll_last_error());
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    float want = val(0, i, it);
    for (int r = 1; r < j->world; r++) want += val(r, i, it);
    if (memcmp(&want, &b[i], sizeof want) != 0) {
      fail_out(o, COLL_OK, "good allreduce %d: element %zu is %g, not %g", it,
               i, (double)b[i], (double)want);
      break;
    }
  }
out:
  free(a);
  free(b);
}

/* One mismatch case: LENGTH_MISMATCH, its text kept, the output unwritten. */
static void mismatch(coll_comm_t *c, const job_t *j, rank_out_t *o, int k) {
  int odd = j->rank == j->world - 1;
  size_t n = k_cases[k].kind == K_BIG ? BIG : 4, cap = (size_t)BIG * 8;
  unsigned char *a = malloc(cap), *b = malloc(cap);
  coll_dtype_t dt = COLL_F32;
  coll_op_t op = COLL_SUM;
  coll_status_t s;
  if (a == NULL || b == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  memset(a, 1, cap);
  memset(b, SENTINEL, cap);
  if (odd) switch (k_cases[k].kind) {
      case K_COUNT: n = 5; break;
      case K_ZERO: n = 0; break;
      case K_DTYPE: dt = COLL_I32; break;
      case K_OP: op = COLL_MAX; break;
      case K_BIG: n = BIG - 1; break;
      default: break;
    }
  if (odd && k_cases[k].kind == K_BCAST)
    s = coll_broadcast(c, b, n, dt, 0, NULL);
  else
    s = coll_allreduce(c, a, b, n, dt, op, NULL);
  snprintf(o->text[k], sizeof o->text[k], "%s", coll_last_error());
  if (s != COLL_ERR_LENGTH_MISMATCH) {
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "\"%s\": expected LENGTH_MISMATCH: %s: %s", k_cases[k].what,
             coll_status_name(s), coll_last_error());
    goto out;
  }
  for (size_t i = 0; i < cap; i++)
    if (b[i] != SENTINEL) {
      fail_out(o, COLL_OK, "\"%s\": output byte %zu written on a mismatch",
               k_cases[k].what, i);
      break;
    }
out:
  free(a);
  free(b);
}

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, j->world, j->port);
  setenv("COLL_TRANSPORT", "shm", 1);
  unsetenv("COLL_ALGO");
  unsetenv("COLL_CHECK_MISMATCH");
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "init: %s", coll_last_error());
    return 0;
  }
  o->used_shm = coll__t_rounds(((coll_cpu_t *)c->be)->t) != NULL;
  /* The first case in the comm's first call, the others after good calls;
   * a good call after each. */
  for (int k = 0; k < NCASES && o->status == 0; k++) {
    if (k > 0) good(c, j, o, k % 2 ? 16 : BIG, k);
    mismatch(c, j, o, k);
    good(c, j, o, 16, 100 + k);
  }
  coll_comm_destroy(c);
  return 0;
}

/* The pair of ranks the agreement names at position 0 when only the last
 * rank differs: 2 ranks (0,1), 3 ranks (0,2) (rank 2 folds into 0), 4
 * ranks (2,3) (known at 2 and 3 first, then passed on to 0). */
static void pair_named(int world, int *ra, int *rb) {
  *ra = world == 4 ? 2 : 0;
  *rb = world - 1;
}

static void run_world(int world) {
  pid_t pids[MAX_RANKS];
  int st[MAX_RANKS], ra, rb;
  char want[160];
  rank_out_t *out = mmap(NULL, sizeof *out * MAX_RANKS, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  job_t j = {world, bt_free_port("127.0.0.1"), 0, NULL};
  assert_true(out != MAP_FAILED);
  memset(out, 0, sizeof *out * MAX_RANKS);
  j.out = out;
  for (int r = 0; r < world; r++) {
    j.rank = r;
    pids[r] = bt_fork(rank_main, &j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < world; r++) st[r] = bt_wait_child(pids[r], CHILD_MS);
  for (int r = 0; r < world; r++) {
    if (out[r].status != 0)
      fail_msg("world %d rank %d: %s", world, r, out[r].msg);
    assert_int_equal(st[r], 0);
    assert_true(out[r].used_shm);
  }
  for (int k = 0; k < NCASES; k++)
    bt_must_contain(out[0].text[k], "ranks disagree: rank ");
  /* Every rank reports the same text after the name of the collective it
   * called; it names what differs. */
  for (int k = 0; k < NCASES; k++)
    for (int r = 1; r < world; r++)
      if (strstr(out[r].text[k], "ranks disagree") == NULL ||
          strcmp(strstr(out[r].text[k], "ranks disagree"),
                 strstr(out[0].text[k], "ranks disagree")) != 0)
        fail_msg("world %d \"%s\": rank %d says \"%s\", rank 0 \"%s\"", world,
                 k_cases[k].what, r, out[r].text[k], out[0].text[k]);
  pair_named(world, &ra, &rb);
  snprintf(want, sizeof want,
           "ranks disagree: rank %d has count 4; rank %d has count 5", ra, rb);
  bt_must_contain(out[0].text[K_COUNT], want);
  bt_must_contain(out[0].text[K_ZERO], "count 0");
  bt_must_contain(out[0].text[K_DTYPE], "dtype i32");
  bt_must_contain(out[0].text[K_OP], "op max");
  bt_must_contain(out[0].text[K_BIG], "count 70000");
  bt_must_contain(out[0].text[K_BCAST], "collective broadcast");
  munmap(out, sizeof *out * MAX_RANKS);
}

static void test_check_2(void **state) {
  (void)state;
  run_world(2);
}

static void test_check_3(void **state) {
  (void)state;
  run_world(3);
}

static void test_check_4(void **state) {
  (void)state;
  run_world(4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check_2),
      cmocka_unit_test(test_check_3),
      cmocka_unit_test(test_check_4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
