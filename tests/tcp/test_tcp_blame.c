/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_blame.c: which rank a failure names. Rank processes over TCP run
 * a stream of allreduces through public comms; then one rank is killed
 * (every survivor must name it lost), or one or every rank's comm is
 * aborted by a watchdog thread (every rank must report COLL_ERR_ABORTED,
 * naming the aborted rank when it was another), or one rank is stopped
 * (every other rank must report it unresponsive, while a rank busy in its
 * own code is not). Run with `figures` it prints the fault harness's
 * figures instead (tools/fault-harness.sh). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcp_test_util.h"

#define MAXW 8
/* Bounds every wait: a hang fails with a message, not a CI timeout. */
#define COMM_TIMEOUT_MS 20000
#define JOB_MS 60000

enum { MODE_KILL, MODE_ABORT_ALL, MODE_ABORT_ONE };

/* What the rank processes report; lives in memory shared across fork. */
typedef struct blame_shared {
  atomic_int ready[MAXW]; /* the first allreduce succeeded */
  int64_t fail_ms[MAXW];  /* when the rank's allreduce failed */
  int status[MAXW];       /* MODE_KILL: the status it failed with */
  char text[MAXW][TT_TEXT];
  int trials[MAXW]; /* abort modes: trials run, and the wrong outcomes */
  int wrong[MAXW];
  int64_t abort_us[MAXW]; /* the slowest return after an own abort */
  int64_t call_us[MAXW];  /* the slowest coll_abort call */
  char wrong_text[MAXW][TT_TEXT];
} blame_shared_t;

typedef struct blame_arg {
  int mode;
  int victim;   /* killed, or the one rank aborted (MODE_ABORT_ONE) */
  size_t count; /* floats per allreduce */
  int trials;   /* abort modes: trials per rank process */
  blame_shared_t *sh;
} blame_arg_t;

static coll_status_t make_comm(tt_job_t *job, int rank, int world,
                               coll_comm_t **c) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_transport_t *t;
  coll_status_t s = tt_create(job, rank, world, &t);
  if (s != COLL_OK) return s;
  cfg.timeout_ms = COMM_TIMEOUT_MS;
  return coll_comm_create(t, &cfg, c);
}

/* Allreduces until one fails (or one sums wrong: COLL_ERR_INTERNAL).
 * Sets ready once the first one succeeded; in_call (if not NULL) while
 * inside coll_allreduce. */
static coll_status_t stream(coll_comm_t *c, float *buf, size_t count, int rank,
                            int world, atomic_int *ready, atomic_int *in_call) {
  float want = (float)(world * (world + 1) / 2);
  coll_status_t s;
  size_t i;
  for (;;) {
    for (i = 0; i < count; i++) buf[i] = (float)(rank + 1);
    if (in_call != NULL) atomic_store(in_call, 1);
    s = coll_allreduce(c, buf, buf, count, COLL_F32, COLL_SUM, NULL);
    if (s != COLL_OK) return s; /* in_call stays set: the call was on */
    if (in_call != NULL) atomic_store(in_call, 0);
    if (buf[0] != want || buf[count - 1] != want)
      return coll_set_last_error(COLL_ERR_INTERNAL, "sum %g, want %g",
                                 (double)buf[0], (double)want);
    if (ready != NULL) atomic_store(ready, 1);
  }
}

/* ---- kill -9 ------------------------------------------------------------ */

static int rank_kill(tt_job_t *job, int rank, int world, void *arg) {
  blame_arg_t *a = arg;
  blame_shared_t *sh = a->sh;
  coll_comm_t *c;
  coll_status_t s;
  float *buf = malloc(a->count * sizeof *buf);
  if (buf == NULL) return 3;
  TRY(make_comm(job, rank, world, &c), "comm");
  s = stream(c, buf, a->count, rank, world, &sh->ready[rank], NULL);
  sh->fail_ms[rank] = tt_now_ms();
  sh->status[rank] = (int)s;
  snprintf(sh->text[rank], TT_TEXT, "%s", coll_last_error());
  coll_comm_destroy(c);
  free(buf);
  return 0;
}

typedef struct kill_result {
  int named_right, survivors;
  int64_t slowest_ms; /* from the kill to the last survivor's error */
} kill_result_t;

/* One job: sends `sig` (SIGKILL, or SIGSTOP: then SIGKILL once the others
 * are done) to `victim` once every rank streams. Returns 0, or -1 with msg
 * when the job itself broke (a rank never got ready or hung). */
static int signal_trial(int world, int victim, int sig, size_t count,
                        kill_result_t *res, char *msg, size_t cap) {
  tt_job_t job;
  blame_arg_t a = {MODE_KILL, victim, count, 0, NULL};
  pid_t pids[MAXW], others[MAXW];
  int codes[MAXW], r, n = 0, rc = 0;
  int64_t killed;
  char want[40];
  if (tt_job_init(&job, "127.0.0.1", NULL) != 0) {
    snprintf(msg, cap, "job init");
    return -1;
  }
  a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (a.sh == MAP_FAILED) {
    tt_job_fini(&job);
    snprintf(msg, cap, "mmap");
    return -1;
  }
  memset(a.sh, 0, sizeof *a.sh);
  tt_spawn(&job, world, rank_kill, &a, pids);
  for (r = 0; r < world; r++) {
    int64_t end = tt_now_ms() + 30000;
    while (!atomic_load(&a.sh->ready[r]) && tt_now_ms() < end) tt_sleep_ms(1);
    if (!atomic_load(&a.sh->ready[r])) {
      snprintf(msg, cap, "rank %d never streamed", r);
      rc = -1;
    }
  }
  if (rc == 0) tt_sleep_ms(30 + 20 * victim); /* into the stream */
  killed = tt_now_ms();
  kill(pids[victim], sig);
  if (sig == SIGKILL) {
    if (tt_wait(pids, world, JOB_MS, codes, msg, cap) < 0) rc = -1;
  } else {
    /* The others end on their own; the stopped one only when killed. */
    for (r = 0; r < world; r++)
      if (r != victim) others[n++] = pids[r];
    if (tt_wait(others, n, JOB_MS, codes, msg, cap) < 0) rc = -1;
    for (r = world - 1; r >= 0; r--)
      codes[r] = r == victim ? 0 : codes[r - (r > victim)];
    kill(pids[victim], SIGCONT);
    kill(pids[victim], SIGKILL);
    tt_wait(pids + victim, 1, 10000, &n, want, sizeof want);
  }
  snprintf(want, sizeof want, "rank %d %s", victim,
           sig == SIGKILL ? "lost" : "unresponsive");
  for (r = 0; rc == 0 && r < world; r++) {
    int64_t took = a.sh->fail_ms[r] - killed;
    if (r == victim) continue;
    if (codes[r] != 0) {
      snprintf(msg, cap, "rank %d exited %d", r, codes[r]);
      rc = -1;
      break;
    }
    res->survivors++;
    if (a.sh->status[r] == COLL_ERR_PEER_LOST &&
        strstr(a.sh->text[r], want) != NULL)
      res->named_right++;
    else
      snprintf(msg, cap, "rank %d: %s: %s", r,
               coll_status_name((coll_status_t)a.sh->status[r]), a.sh->text[r]);
    if (took > res->slowest_ms) res->slowest_ms = took;
  }
  munmap(a.sh, sizeof *a.sh);
  tt_job_fini(&job);
  return rc;
}

/* ---- aborts from a watchdog thread --------------------------------------- */

typedef struct watchdog {
  coll_abort_handle_t *h;
  int delay_ms;
  atomic_int in_call; /* the rank is inside coll_allreduce */
  int blocked;        /* it was when the watchdog aborted */
  int64_t at_us;      /* when it aborted */
  int64_t call_us;    /* how long coll_abort itself took */
} watchdog_t;

/* The slowest coll_abort call any rank of any abort job made (parent). */
static int64_t call_us_max;

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void watchdog_main(void *arg) {
  watchdog_t *w = arg;
  tt_sleep_ms(w->delay_ms);
  w->blocked = atomic_load(&w->in_call);
  w->at_us = now_us();
  coll_abort(w->h);
  w->call_us = now_us() - w->at_us;
}

/* One trial's job directory and id, under the job's, so that every rank
 * process can run many trials in a row. */
static void trial_job(const tt_job_t *job, int k, tt_job_t *tj) {
  *tj = *job;
  /* The job's own names are short (mkdtemp in /tmp): they fit. */
  snprintf(tj->dir, sizeof tj->dir, "%.100s/t%d", job->dir, k);
  snprintf(tj->job_id, sizeof tj->job_id, "%.140s:%d", job->job_id, k);
  if (mkdir(tj->dir, 0700) != 0 && errno != EEXIST)
    fprintf(stderr, "mkdir %s: %s\n", tj->dir, strerror(errno));
}

/* The outcome each rank must see: ABORTED, and when another rank was the
 * one aborted, its number. */
static int abort_outcome_ok(const blame_arg_t *a, int rank, coll_status_t s,
                            const char *text) {
  char want[32];
  if (s != COLL_ERR_ABORTED || strstr(text, "aborted") == NULL) return 0;
  if (a->mode != MODE_ABORT_ONE || rank == a->victim) return 1;
  snprintf(want, sizeof want, "rank %d aborted", a->victim);
  return strstr(text, want) != NULL;
}

static int rank_abort(tt_job_t *job, int rank, int world, void *arg) {
  blame_arg_t *a = arg;
  blame_shared_t *sh = a->sh;
  float *buf = malloc(a->count * sizeof *buf);
  unsigned seed = 7919u * (unsigned)rank + 17u;
  int k;
  if (buf == NULL) return 3;
  for (k = 0; k < a->trials; k++) {
    tt_job_t tj;
    coll_comm_t *c;
    watchdog_t w = {NULL, 0, 0, 0, 0, 0};
    int64_t took;
    uv_thread_t th;
    int armed = a->mode == MODE_ABORT_ALL || rank == a->victim;
    coll_status_t s;
    trial_job(job, k, &tj);
    TRY(make_comm(&tj, rank, world, &c), "comm");
    TRY(coll_comm_abort_handle(c, &w.h), "abort handle");
    w.delay_ms = (int)(rand_r(&seed) % 25u);
    if (armed && uv_thread_create(&th, watchdog_main, &w) != 0) return 4;
    s = stream(c, buf, a->count, rank, world, NULL, &w.in_call);
    took = now_us();
    if (armed) uv_thread_join(&th);
    /* How long its own abort took to end the call it found running (a
     * peer's abort may have ended it first: then this is negative). */
    took -= w.at_us;
    if (armed && w.blocked && took > sh->abort_us[rank])
      sh->abort_us[rank] = took;
    if (armed && w.call_us > sh->call_us[rank]) sh->call_us[rank] = w.call_us;
    if (!abort_outcome_ok(a, rank, s, coll_last_error()) &&
        sh->wrong[rank]++ == 0)
      snprintf(sh->wrong_text[rank], TT_TEXT, "trial %d: %s: %s", k,
               coll_status_name(s), coll_last_error());
    sh->trials[rank]++;
    coll_comm_destroy(c);
    coll_abort_handle_release(w.h);
  }
  free(buf);
  return 0;
}

/* Runs `trials` abort trials in one job of `world` rank processes; adds the
 * outcomes to *outcomes and the wrong ones to *wrong (first text in msg).
 * Returns 0, or -1 when the job broke. */
static int abort_trials(int mode, int world, int victim, int trials,
                        size_t count, int *outcomes, int *wrong,
                        int64_t *abort_us, char *msg, size_t cap) {
  tt_job_t job;
  blame_arg_t a = {mode, victim, count, trials, NULL};
  pid_t pids[MAXW];
  int codes[MAXW], r, k, rc = 0;
  char path[300];
  if (tt_job_init(&job, "127.0.0.1", NULL) != 0) return -1;
  a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (a.sh == MAP_FAILED) {
    tt_job_fini(&job);
    return -1;
  }
  memset(a.sh, 0, sizeof *a.sh);
  tt_spawn(&job, world, rank_abort, &a, pids);
  if (tt_wait(pids, world, JOB_MS + 200 * (int64_t)trials, codes, msg, cap) < 0)
    rc = -1;
  for (r = 0; r < world; r++) {
    if (rc == 0 && codes[r] != 0) {
      snprintf(msg, cap, "rank %d exited %d", r, codes[r]);
      rc = -1;
    }
    *outcomes += a.sh->trials[r];
    *wrong += a.sh->wrong[r];
    if (a.sh->abort_us[r] > *abort_us) *abort_us = a.sh->abort_us[r];
    if (a.sh->call_us[r] > call_us_max) call_us_max = a.sh->call_us[r];
    if (a.sh->wrong[r] > 0 && rc == 0)
      snprintf(msg, cap, "rank %d: %s", r, a.sh->wrong_text[r]);
  }
  for (k = 0; k < trials; k++) {
    for (r = 0; r < world; r++) {
      snprintf(path, sizeof path, "%s/t%d/rank.%d", job.dir, k, r);
      unlink(path);
    }
    snprintf(path, sizeof path, "%s/t%d", job.dir, k);
    rmdir(path);
  }
  munmap(a.sh, sizeof *a.sh);
  tt_job_fini(&job);
  return rc;
}

/* ---- the CI tests ---------------------------------------------------------
 */

#define CI_WORLD 4
#define CI_COUNT ((size_t)256 << 10) /* 1 MiB of f32 per allreduce */

/* kill -9 of each rank in turn: every survivor's error names it lost. */
static void test_kill9_names_the_dead_rank(void **state) {
  int v;
  (void)state;
  for (v = 0; v < CI_WORLD; v++) {
    kill_result_t res = {0, 0, 0};
    char msg[TT_TEXT * 2] = "";
    if (signal_trial(CI_WORLD, v, SIGKILL, CI_COUNT, &res, msg, sizeof msg) !=
        0)
      fail_msg("kill rank %d: %s", v, msg);
    printf("kill -9 rank %d: %d/%d survivors named it, slowest in %lld ms\n", v,
           res.named_right, res.survivors, (long long)res.slowest_ms);
    if (res.named_right != res.survivors) fail_msg("kill rank %d: %s", v, msg);
  }
}

/* A watchdog on every rank aborts its comm at a random moment: every
 * blocked (or later) call returns COLL_ERR_ABORTED, whichever abort
 * arrived first; never PEER_LOST of a rank that is alive. */
static void test_watchdog_abort_all(void **state) {
  int outcomes = 0, wrong = 0;
  int64_t abort_us = 0;
  char msg[TT_TEXT * 2] = "";
  (void)state;
  if (abort_trials(MODE_ABORT_ALL, CI_WORLD, 0, 50, CI_COUNT / 4, &outcomes,
                   &wrong, &abort_us, msg, sizeof msg) != 0)
    fail_msg("watchdog: %s", msg);
  printf(
      "watchdog aborts: %d/%d outcomes ABORTED; slowest coll_abort %.2f ms, "
      "slowest return of a call it ended %.2f ms\n",
      outcomes - wrong, outcomes, call_us_max / 1000.0, abort_us / 1000.0);
  if (wrong != 0 || outcomes != 50 * CI_WORLD)
    fail_msg("watchdog: %d of %d wrong: %s", wrong, outcomes, msg);
}

/* One rank's comm aborted: the others report "rank N aborted". */
static void test_abort_one_names_it(void **state) {
  int outcomes = 0, wrong = 0, v;
  int64_t abort_us = 0;
  char msg[TT_TEXT * 2] = "";
  (void)state;
  for (v = 0; v < CI_WORLD; v++)
    if (abort_trials(MODE_ABORT_ONE, CI_WORLD, v, 3, CI_COUNT / 4, &outcomes,
                     &wrong, &abort_us, msg, sizeof msg) != 0)
      fail_msg("abort rank %d: %s", v, msg);
  if (wrong != 0 || outcomes != 3 * CI_WORLD * CI_WORLD)
    fail_msg("abort one: %d of %d wrong: %s", wrong, outcomes, msg);
}

/* ---- heartbeats -----------------------------------------------------------
 */

#define HB_MS "1000"

/* A rank stopped (SIGSTOP) in the middle of the allreduces: every other
 * rank reports it unresponsive, naming it, after about the heartbeat
 * timeout (printed, not asserted: the machine may be busy). */
static void test_sigstop_reported_unresponsive(void **state) {
  kill_result_t res = {0, 0, 0};
  char msg[TT_TEXT * 2] = "";
  int rc;
  (void)state;
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", HB_MS, 1);
  rc = signal_trial(CI_WORLD, 1, SIGSTOP, CI_COUNT / 4, &res, msg, sizeof msg);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  if (rc != 0) fail_msg("sigstop: %s", msg);
  printf(
      "SIGSTOP rank 1, heartbeat timeout %s ms: %d/%d others named it "
      "unresponsive, the last after %lld ms\n",
      HB_MS, res.named_right, res.survivors, (long long)res.slowest_ms);
  if (res.named_right != res.survivors) fail_msg("sigstop: %s", msg);
}

/* Three allreduces; rank 1 spends 3 s in its own code before the second
 * while the others already wait in it. Its loop thread still sends
 * heartbeats: nobody reports it. */
static int rank_busy(tt_job_t *job, int rank, int world, void *arg) {
  blame_arg_t *a = arg;
  coll_comm_t *c;
  coll_status_t s = COLL_OK;
  float *buf = malloc(a->count * sizeof *buf);
  size_t i;
  int k;
  if (buf == NULL) return 3;
  TRY(make_comm(job, rank, world, &c), "comm");
  for (k = 0; k < 3 && s == COLL_OK; k++) {
    if (k == 1 && rank == 1) tt_sleep_ms(3000);
    for (i = 0; i < a->count; i++) buf[i] = (float)(rank + 1);
    s = coll_allreduce(c, buf, buf, a->count, COLL_F32, COLL_SUM, NULL);
    if (s == COLL_OK && buf[0] != (float)(world * (world + 1) / 2))
      s = coll_set_last_error(COLL_ERR_INTERNAL, "wrong sum %g",
                              (double)buf[0]);
  }
  a->sh->status[rank] = (int)s;
  snprintf(a->sh->text[rank], TT_TEXT, "%s", s ? coll_last_error() : "");
  coll_comm_destroy(c);
  free(buf);
  return 0;
}

static void test_busy_rank_is_not_unresponsive(void **state) {
  tt_job_t job;
  blame_arg_t a = {MODE_KILL, 1, 1024, 0, NULL};
  char msg[256];
  int r, rc;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a.sh != MAP_FAILED);
  memset(a.sh, 0, sizeof *a.sh);
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", HB_MS, 1);
  rc = tt_run(&job, CI_WORLD, rank_busy, &a, JOB_MS, msg, sizeof msg);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  if (rc != 0) fail_msg("busy: %s", msg);
  for (r = 0; r < CI_WORLD; r++)
    if (a.sh->status[r] != COLL_OK)
      fail_msg("busy: rank %d: %s: %s", r,
               coll_status_name((coll_status_t)a.sh->status[r]), a.sh->text[r]);
  munmap(a.sh, sizeof *a.sh);
  tt_job_fini(&job);
}

/* A heartbeat timeout that is not a number of ms >= 0 is refused at
 * creation, naming the variable; 0 turns heartbeats off. */
static void test_heartbeat_env_checked(void **state) {
  static const char *const bad[] = {"soon", "-5", "10s"};
  tt_job_t job;
  coll_transport_t *t = NULL;
  size_t i;
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("COLL_HEARTBEAT_TIMEOUT_MS", bad[i], 1);
    assert_int_equal(tt_create(&job, 0, 1, &t), COLL_ERR_INVALID_ARG);
    assert_null(t);
    assert_non_null(strstr(coll_last_error(), "COLL_HEARTBEAT_TIMEOUT_MS"));
    assert_non_null(strstr(coll_last_error(), bad[i]));
  }
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", "0", 1);
  assert_int_equal(tt_create(&job, 0, 1, &t), COLL_OK);
  coll_transport_destroy(t);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  tt_job_fini(&job);
}

/* ---- figures ------------------------------------------------------------- */

/* figures WORLD KILL_TRIALS ABORT_TRIALS MIB: prints the share of survivors
 * that named the killed rank, the slowest survivor's time to error, the
 * same for a quarter as many SIGSTOPs (heartbeat timeout 1 s), and the
 * share of watchdog-abort outcomes that were COLL_ERR_ABORTED. Exit status
 * 0 only when every one was right. */
static int figures(int world, int kill_n, int abort_n, size_t mib) {
  size_t count = (mib << 20) / sizeof(float);
  int right = 0, total = 0, k, outcomes = 0, wrong = 0, broken = 0, bad;
  int64_t slowest = 0, abort_us = 0;
  char msg[TT_TEXT * 2];
  if (world < 2 || world > MAXW || count == 0) {
    fprintf(stderr, "figures: world 2..%d and a size of 1 MiB or more\n", MAXW);
    return 2;
  }
  for (k = 0; k < kill_n; k++) {
    kill_result_t res = {0, 0, 0};
    msg[0] = '\0';
    if (signal_trial(world, k % world, SIGKILL, count, &res, msg, sizeof msg) !=
        0) {
      fprintf(stderr, "kill trial %d: job broke: %s\n", k, msg);
      broken++;
      continue;
    }
    if (res.named_right != res.survivors)
      fprintf(stderr, "kill trial %d: %s\n", k, msg);
    right += res.named_right;
    total += res.survivors;
    if (res.slowest_ms > slowest) slowest = res.slowest_ms;
  }
  if (kill_n > 0)
    printf(
        "world %d, %zu MiB allreduces, kill -9 x %d: %d/%d survivor errors "
        "named the killed rank (%.1f %%), slowest survivor %lld ms\n",
        world, mib, kill_n, right, total, total ? 100.0 * right / total : 0.0,
        (long long)slowest);
  /* A few SIGSTOPs with a 1 s heartbeat timeout: how soon the last of the
   * others reported the stopped rank unresponsive. */
  bad = total - right;
  right = total = 0;
  slowest = 0;
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", HB_MS, 1);
  for (k = 0; k < (kill_n + 3) / 4; k++) {
    kill_result_t res = {0, 0, 0};
    msg[0] = '\0';
    if (signal_trial(world, k % world, SIGSTOP, count, &res, msg, sizeof msg) !=
        0) {
      fprintf(stderr, "stop trial %d: job broke: %s\n", k, msg);
      broken++;
      continue;
    }
    if (res.named_right != res.survivors)
      fprintf(stderr, "stop trial %d: %s\n", k, msg);
    right += res.named_right;
    total += res.survivors;
    if (res.slowest_ms > slowest) slowest = res.slowest_ms;
  }
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  if (kill_n > 0)
    printf(
        "world %d, SIGSTOP x %d, heartbeat timeout %s ms: %d/%d others "
        "named the stopped rank unresponsive (%.1f %%), the last after "
        "%lld ms\n",
        world, (kill_n + 3) / 4, HB_MS, right, total,
        total ? 100.0 * right / total : 0.0, (long long)slowest);
  msg[0] = '\0';
  if (abort_n > 0) {
    if (abort_trials(MODE_ABORT_ALL, world, 0, abort_n, count, &outcomes,
                     &wrong, &abort_us, msg, sizeof msg) != 0) {
      fprintf(stderr, "abort trials: job broke: %s\n", msg);
      broken++;
    }
    printf(
        "world %d, watchdog abort on every comm x %d: %d/%d outcomes "
        "COLL_ERR_ABORTED (%.1f %%); slowest coll_abort %.2f ms, slowest "
        "return of a call it ended %.2f ms%s%s\n",
        world, abort_n, outcomes - wrong, outcomes,
        outcomes ? 100.0 * (outcomes - wrong) / outcomes : 0.0,
        call_us_max / 1000.0, abort_us / 1000.0, wrong ? "; first wrong: " : "",
        wrong ? msg : "");
  }
  return broken || bad || right != total || wrong ? 1 : 0;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill9_names_the_dead_rank),
      cmocka_unit_test(test_watchdog_abort_all),
      cmocka_unit_test(test_abort_one_names_it),
      cmocka_unit_test(test_sigstop_reported_unresponsive),
      cmocka_unit_test(test_busy_rank_is_not_unresponsive),
      cmocka_unit_test(test_heartbeat_env_checked),
  };
  /* The harness's setting: no descriptor agreement before each call, so
   * an abort meets ranks in the middle of the data exchange. */
  setenv("COLL_CHECK_MISMATCH", "0", 1);
  if (argc == 6 && strcmp(argv[1], "figures") == 0)
    return figures(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
                   (size_t)atoi(argv[5]));
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
