/* SPDX-License-Identifier: Apache-2.0 */
/* fault_tool.c: the fault harness's figures (tools/fault-harness.sh) and
 * its short soak in CI.
 *
 *   fault_tool soak TRIALS [SEED [ONLY]]
 *                                  random faults, one per job: every trial
 *                                  must end within its bound, name its
 *                                  origin on every rank, never sum wrong
 *                                  (ONLY: run trial ONLY of the sequence)
 *   fault_tool late TRIALS         per path, kill -9 and abort of a waiting
 *                                  rank and of the late one, rank 3 late:
 *                                  how soon every waiting rank is released
 *   fault_tool stall TRIALS        per path, an idle rank stopped for 1.5 T:
 *                                  when every other rank names it, as a
 *                                  share of T; the resumed rank names itself
 *   fault_tool rank SECONDS        one rank of a launcher's job (RANK,
 *                                  WORLD_SIZE, MASTER_ADDR, ...): checked
 *                                  allreduces for SECONDS, or until one
 *                                  fails; prints how it ended and when
 *                                  (netns_faults.sh cuts its network)
 *
 * Exits 1 if any trial went wrong (each is printed), 2 on bad usage. The
 * heartbeat timeout T of `stall` is FJ_HB_MS (default 2000). Times are
 * upper bounds on a loaded machine: take figures on a quiet one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "fault_soak.h"
#include "test_util.h"

static int g_failed;

/* Runs s and judges it; prints a failed trial. 1 if it went right. */
static int trial(const fj_spec_t *s, fj_verdict_t *v, const char *label) {
  fj_result_t res;
  fj_expect_t e;
  char what[200];
  fs_describe(s, what, sizeof what);
  if (fj_run(s, &res) != 0) {
    printf("BROKEN %s: %s: %s\n", label, what, res.why);
    memset(v, 0, sizeof *v);
    g_failed = 1;
    return 0;
  }
  fj_expect_for(s, &e);
  fj_judge(s, &res, &e, v);
  if (!v->ok) {
    printf("FAILED %s: %s: %s\n", label, what, v->msg);
    for (int r = 0; r < s->world; r++)
      printf(
          "  rank %d: exit %d, %d allreduces right, %s at %d (%lld ms "
          "after the fault): %s\n",
          r, res.r[r].exit_code, res.r[r].ok_calls,
          coll_status_name((coll_status_t)res.r[r].status), res.r[r].failed_at,
          (long long)(res.r[r].end_ms - res.fault_ms), res.r[r].text);
    g_failed = 1;
  }
  fflush(stdout);
  return v->ok;
}

/* ---- soak -----------------------------------------------------------------
 */

typedef struct tally {
  int trials, right, hung, wrong, judged, named;
} tally_t;

static int soak(int trials, uint64_t seed, int only) {
  tally_t t[FJ_PARTITION + 1];
  uint64_t rng = seed;
  memset(t, 0, sizeof t);
  printf("fault soak: %d trials, seed %llu (FJ_SEED reruns it)\n", trials,
         (unsigned long long)seed);
  for (int i = 0; i < trials; i++) {
    fj_spec_t s = fs_random_spec(&rng);
    fj_verdict_t v;
    char label[32];
    tally_t *x = &t[s.fault];
    if (only > 0 && i + 1 != only) continue;
    snprintf(label, sizeof label, "trial %d", i + 1);
    x->trials++;
    x->right += trial(&s, &v, label);
    x->hung += strstr(v.msg, "hung") != NULL;
    x->wrong += v.wrong;
    x->judged += v.judged;
    x->named += v.named;
    if ((i + 1) % 50 == 0) printf("  %d of %d trials\n", i + 1, trials);
  }
  printf("%-10s %7s %7s %6s %6s %14s\n", "fault", "trials", "right", "hangs",
         "wrong", "named origin");
  for (int f = FJ_KILL; f <= FJ_PARTITION; f++)
    printf("%-10s %7d %7d %6d %6d %7d of %4d\n", fj_fault_name((fj_fault_t)f),
           t[f].trials, t[f].right, t[f].hung, t[f].wrong, t[f].named,
           t[f].judged);
  return g_failed;
}

/* ---- late -----------------------------------------------------------------
 */

static int late(int trials) {
  static const struct {
    fj_fault_t f;
    int victim;
    const char *name;
  } cases[] = {{FJ_KILL, 1, "kill -9 of a waiting rank"},
               {FJ_KILL, 3, "kill -9 of the late rank"},
               {FJ_ABORT, 1, "abort of a waiting rank"},
               {FJ_ABORT, 3, "abort of the late rank"}};
  printf("%-10s %-26s %7s %13s %8s %8s %8s\n", "path", "fault (rank 3 late)",
         "trials", "named", "p50 ms", "p99 ms", "max ms");
  for (int p = FJ_SHM; p <= FJ_ROUTE; p++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      fs_times_t times = {0};
      int named = 0, judged = 0;
      for (int i = 0; i < trials; i++) {
        fj_spec_t s = fj_spec_default((fj_path_t)p);
        fj_verdict_t v;
        s.late = 3;
        s.fault = cases[c].f;
        s.victim = cases[c].victim;
        s.bound_ms = 10000;
        (void)trial(&s, &v, "late");
        named += v.named;
        judged += v.judged;
        for (int r = 0; r < s.world; r++)
          if (v.release_ms[r] >= 0) fs_times_add(&times, v.release_ms[r]);
      }
      printf("%-10s %-26s %7d %6d of %3d %8lld %8lld %8lld\n",
             fj_path_name((fj_path_t)p), cases[c].name, trials, named, judged,
             (long long)fs_times_pct(&times, 50),
             (long long)fs_times_pct(&times, 99),
             (long long)fs_times_pct(&times, 100));
      fflush(stdout);
      fs_times_free(&times);
    }
  return g_failed;
}

/* ---- stall ----------------------------------------------------------------
 */

static int stall(int trials) {
  const char *hb_env = getenv("FJ_HB_MS");
  int64_t hb = hb_env != NULL ? atoll(hb_env) : 2000;
  printf(
      "an idle rank stopped for 1.5 T, T = %lld ms: when the others name "
      "it, from the stop\n",
      (long long)hb);
  printf("%-10s %7s %9s %9s %9s %12s %13s\n", "path", "trials", "min", "max",
         "max / T", "in T..1.1T", "all right");
  for (int p = FJ_SHM; p <= FJ_ROUTE; p++) {
    fs_times_t times = {0};
    int within = 0, named = 0, self = 0;
    for (int i = 0; i < trials; i++) {
      fj_spec_t s = fj_spec_default((fj_path_t)p);
      fj_verdict_t v;
      s.hb_ms = hb;
      s.late = 3;
      s.victim = 3;
      s.fault = FJ_STOP;
      s.settle_ms = hb / 2;
      s.stop_ms = hb * 3 / 2;
      /* Resumed, it may finish the call it was late to from what its peers
       * sent before they named it (its sum is right); its next call names
       * it. */
      s.after = 2;
      s.bound_ms = 3 * hb + 10000;
      self += trial(&s, &v, "stall");
      for (int r = 0; r < s.world; r++) {
        if (v.release_ms[r] < 0) continue;
        named++;
        fs_times_add(&times, v.release_ms[r]);
        within += v.release_ms[r] >= hb && v.release_ms[r] <= hb * 11 / 10;
      }
    }
    printf("%-10s %7d %9lld %9lld %9.3f %5d of %3d %6d of %3d\n",
           fj_path_name((fj_path_t)p), trials,
           (long long)fs_times_pct(&times, 0),
           (long long)fs_times_pct(&times, 100),
           (double)fs_times_pct(&times, 100) / (double)hb, within, named, self,
           trials);
    fflush(stdout);
    fs_times_free(&times);
  }
  return g_failed;
}

/* ---- one rank of a launcher's job ------------------------------------------
 */

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Checked allreduces of small integers (exact in f32) until one fails or
 * every rank passed `seconds`: the last element says whether a rank wants
 * to stop, so all stop after the same call. Prints "streaming" after the
 * first, then one line saying how it ended, with the wall clock in ms. */
static int one_rank(double seconds) {
  enum { N = 65536 };
  static float buf[N + 1];
  coll_comm_t *c = NULL;
  coll_status_t st = coll_comm_init_env(NULL, &c);
  int rank, world, k;
  int64_t end;
  if (st != COLL_OK) {
    printf("init failed: %s: %s\n", coll_status_name(st), coll_last_error());
    return 2;
  }
  rank = coll_comm_rank(c);
  world = coll_comm_size(c);
  end = test_now_ms() + (int64_t)(seconds * 1000.0);
  for (k = 1;; k++) {
    float want = (float)(world * (world + 1) / 2);
    for (int i = 0; i < N; i++) buf[i] = (float)(rank + 1);
    buf[N] = test_now_ms() >= end ? 1.0f : 0.0f;
    st = coll_allreduce(c, buf, buf, N + 1, COLL_F32, COLL_SUM, NULL);
    if (st != COLL_OK) break;
    for (int i = 0; i < N; i++)
      if (buf[i] != want) {
        printf("WRONG at allreduce %d, wall %lld\n", k, (long long)wall_ms());
        coll_comm_destroy(c);
        return 1;
      }
    if (k == 1) printf("streaming\n");
    if (buf[N] > 0.0f) break;
  }
  if (st == COLL_OK)
    printf("ok after %d allreduces, wall %lld\n", k, (long long)wall_ms());
  else
    printf("ended %s at allreduce %d, wall %lld: %s\n", coll_status_name(st), k,
           (long long)wall_ms(), coll_last_error());
  coll_comm_destroy(c);
  return 0;
}

int main(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[2]) : 0;
  const char *seed_env = getenv("FJ_SEED");
  uint64_t seed = argc > 3           ? strtoull(argv[3], NULL, 10)
                  : seed_env != NULL ? strtoull(seed_env, NULL, 10)
                                     : (uint64_t)test_now_ms() * 2654435761u;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 3 || n < 1) {
    fprintf(stderr,
            "usage: %s soak|late|stall TRIALS [SEED [ONLY]] | rank SECONDS\n",
            argv[0]);
    return 2;
  }
  /* In CI under sanitizers (TEST_QUICK): a third of the trials. */
  if (getenv("TEST_QUICK") != NULL && strcmp(argv[1], "rank") != 0 && n > 3)
    n /= 3;
  if (strcmp(argv[1], "soak") == 0)
    return soak(n, seed, argc > 4 ? atoi(argv[4]) : 0);
  if (strcmp(argv[1], "late") == 0) return late(n);
  if (strcmp(argv[1], "stall") == 0) return stall(n);
  if (strcmp(argv[1], "rank") == 0) return one_rank(atof(argv[2]));
  fprintf(stderr, "%s: unknown mode '%s'\n", argv[0], argv[1]);
  return 2;
}
