/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_names.c: a shared-memory host endpoint inside a larger comm
 * speaks comm ranks. Three forked members named 1, 4 and 6 in a comm of
 * 8: their rank and size, messages addressed by comm rank, peers that are
 * not on the host refused, an abort, a failure that began on another host
 * and an unresponsive member all named by comm rank, and names that do
 * not ascend refused. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "core/error.h"
#include "core/origin.h"
#include "shm_test.h"
#include "transport/endpoint.h"

#define MEMBERS 3
#define NAME_WORLD 8
/* Member 1 (comm rank 4) is the one that aborts, fails or stops. */
#define VICTIM 1
#define TAG_A 5u
#define TAG_B 9u
#define TAG_READY 11u
#define N_TAGS 3

static const int names[MEMBERS] = {1, 4, 6};
/* Several tags, one message of many cells and one of none. */
static const uint32_t tags[N_TAGS] = {3u, 17u, 40000u};
static const size_t lens[N_TAGS] = {8, 40000, 0};

static void expect(tt_result_t *res, coll_status_t got, coll_status_t want,
                   const char *what) {
  if (got != want)
    tt_fail(res, "%s: %s, expected %s (%s)", what, coll_status_name(got),
            coll_status_name(want), coll_last_error());
}

/* The last error contains `want`. */
static void expect_text(tt_result_t *res, const char *want, const char *what) {
  if (strstr(coll_last_error(), want) == NULL)
    tt_fail(res, "%s: the text lacks \"%s\": %s", what, want,
            coll_last_error());
}

/* The endpoint knows its failure began at (rank, cause). */
static void expect_origin(tt_result_t *res, coll_transport_t *t, int rank,
                          int cause, const char *what) {
  coll_origin_t o;
  if (!coll__t_origin(t, &o))
    tt_fail(res, "%s: no origin", what);
  else if (o.rank != rank || o.cause != cause)
    tt_fail(res, "%s: origin rank %d cause %d, expected rank %d cause %d", what,
            o.rank, o.cause, rank, cause);
}

/* Runs the three members; res[] and status[] as shm_run. */
static int run_members(shm_rank_fn fn, void *arg, tt_result_t *res,
                       int *status) {
  int rc;
  shm_test_names = names;
  shm_test_name_world = NAME_WORLD;
  rc = shm_run(MEMBERS, fn, arg, res, status, NULL);
  shm_test_names = NULL;
  shm_test_name_world = 0;
  return rc;
}

static void run_ok(shm_rank_fn fn, void *arg) {
  tt_result_t res[MEMBERS];
  char *before = shm_devshm_list(), *after;
  const char *extra;
  int rc = run_members(fn, arg, res, NULL);
  after = shm_devshm_list();
  extra = shm_devshm_new(before, after); /* static: outlives the lists */
  free(before);
  free(after);
  TT_ASSERT_RANKS_OK(res, MEMBERS);
  assert_int_equal(rc, 0);
  if (extra != NULL) fail_msg("new in /dev/shm: %s", extra);
}

static void rank_size_rank(coll_transport_t *t, int rank, int world,
                           tt_result_t *res, void *arg) {
  (void)world;
  (void)arg;
  if (coll_transport_rank(t) != names[rank])
    tt_fail(res, "coll_transport_rank %d, expected %d", coll_transport_rank(t),
            names[rank]);
  if (coll_transport_size(t) != NAME_WORLD)
    tt_fail(res, "coll_transport_size %d, expected %d", coll_transport_size(t),
            NAME_WORLD);
}

static void test_rank_and_size(void **state) {
  (void)state;
  run_ok(rank_size_rank, NULL);
}

static uint64_t seed(int from, int to, int i) {
  return (uint64_t)from * 1000 + (uint64_t)to * 10 + (uint64_t)i;
}

/* Every member sends every other one a message on each tag, addressed by
 * comm rank, and receives theirs in the opposite tag order: each arrives
 * whole, from the comm rank it names, on its tag. */
static void messages_rank(coll_transport_t *t, int rank, int world,
                          tt_result_t *res, void *arg) {
  uint8_t *out[MEMBERS][N_TAGS] = {{0}}, *in[MEMBERS][N_TAGS] = {{0}};
  void *sr[MEMBERS][N_TAGS] = {{0}}, *rr[MEMBERS][N_TAGS] = {{0}};
  int me = names[rank];
  (void)arg;
  for (int j = 0; j < world; j++)
    for (int i = 0; i < N_TAGS && j != rank; i++) {
      out[j][i] = malloc(lens[i] + 1);
      in[j][i] = malloc(lens[i] + 1);
      if (out[j][i] == NULL || in[j][i] == NULL) {
        tt_fail(res, "out of memory");
        goto out;
      }
      tt_fill(out[j][i], lens[i], seed(me, names[j], i));
    }
  for (int j = 0; j < world; j++)
    for (int i = 0; i < N_TAGS && j != rank; i++)
      expect(res,
             coll__t_isend(t, names[j], tags[i], out[j][i], lens[i], &sr[j][i]),
             COLL_OK, "isend");
  for (int j = 0; j < world; j++)
    for (int i = N_TAGS - 1; i >= 0 && j != rank; i--)
      expect(res,
             coll__t_irecv(t, names[j], tags[i], in[j][i], lens[i], &rr[j][i]),
             COLL_OK, "irecv");
  if (res->failed) goto out; /* a request may be missing: do not wait */
  for (int j = 0; j < world; j++)
    for (int i = 0; i < N_TAGS && j != rank; i++) {
      size_t len = 99;
      expect(res, tt_wait(t, rr[j][i], TT_WAIT_MS, &len), COLL_OK, "wait recv");
      if (len != lens[i])
        tt_fail(res, "from rank %d on tag %u: %zu bytes, expected %zu",
                names[j], tags[i], len, lens[i]);
      if (!tt_check(in[j][i], lens[i], seed(names[j], me, i)))
        tt_fail(res, "from rank %d on tag %u: not the message it sent",
                names[j], tags[i]);
    }
  for (int j = 0; j < world; j++)
    for (int i = 0; i < N_TAGS && j != rank; i++)
      expect(res, tt_wait(t, sr[j][i], TT_WAIT_MS, NULL), COLL_OK, "wait send");
out:
  for (int j = 0; j < world; j++)
    for (int i = 0; i < N_TAGS; i++) {
      free(out[j][i]);
      free(in[j][i]);
    }
}

static void test_messages_by_comm_rank(void **state) {
  (void)state;
  run_ok(messages_rank, NULL);
}

/* isend and irecv to a rank on another host (0, 5, 7), out of the comm (-1,
 * 8) or to this rank itself: INVALID_ARG naming it, and nothing posted. A
 * ring of messages on the same tag afterwards finds only the real ones. */
static void bad_peer_rank(coll_transport_t *t, int rank, int world,
                          tt_result_t *res, void *arg) {
  const int bad[] = {0, 5, 7, names[rank], -1, 8};
  int untouched;
  uint64_t v = 0, got = 0;
  size_t n = sizeof bad / sizeof bad[0];
  (void)arg;
  for (size_t k = 0; k < n; k++) {
    char want[64];
    for (int dir = 0; dir < 2; dir++) {
      void *req = &untouched;
      coll_status_t s =
          dir == 0 ? coll__t_isend(t, bad[k], TAG_A, &v, sizeof v, &req)
                   : coll__t_irecv(t, bad[k], TAG_A, &got, sizeof got, &req);
      const char *what = dir == 0 ? "isend" : "irecv";
      expect(res, s, COLL_ERR_INVALID_ARG, what);
      if (req != &untouched) tt_fail(res, "%s to %d posted", what, bad[k]);
      snprintf(want, sizeof want, "shm %s: rank %d ", what, bad[k]);
      expect_text(res, want, what);
      expect_text(res, "joins ranks 1, 4, 6", what);
      if (bad[k] != names[rank]) expect_text(res, "not on this host", what);
    }
  }
  v = 100 + (uint64_t)names[rank];
  expect(res, tt_send(t, names[(rank + 1) % world], TAG_A, &v, sizeof v),
         COLL_OK, "ring send");
  expect(res,
         tt_recv(t, names[(rank + world - 1) % world], TAG_A, &got, sizeof got,
                 NULL),
         COLL_OK, "ring recv");
  if (got != 100 + (uint64_t)names[(rank + world - 1) % world])
    tt_fail(res, "ring: got %llu", (unsigned long long)got);
}

static void test_bad_peers_refused(void **state) {
  (void)state;
  run_ok(bad_peer_rank, NULL);
}

/* How comm rank 4 fails once the others wait on it. */
enum {
  HOW_FAIL,      /* its fail hook, with the origin in fail_arg_t */
  HOW_T_ABORT,   /* coll__t_abort */
  HOW_OPS_ABORT, /* the transport's own abort slot */
  HOW_KILL       /* SIGKILL: it says nothing */
};

typedef struct fail_arg {
  int how;
  coll_origin_t o; /* HOW_FAIL */
} fail_arg_t;

/* Where the failure the others see began. */
static coll_origin_t fail_origin(const fail_arg_t *a) {
  switch (a->how) {
    case HOW_FAIL: return a->o;
    case HOW_KILL: return (coll_origin_t){4, COLL_CAUSE_LOST, 0};
    default: return (coll_origin_t){4, COLL_CAUSE_ABORTED, 0};
  }
}

static void victim(coll_transport_t *t, tt_result_t *res, const fail_arg_t *a) {
  uint64_t v = 0;
  void *pending = NULL;
  char want[COLL_ERRMSG_MAX];
  coll_origin_t o = fail_origin(a);
  /* A receive of its own that the failure ends. */
  expect(res, coll__t_irecv(t, names[0], TAG_B, &v, sizeof v, &pending),
         COLL_OK, "irecv before the failure");
  for (int j = 0; j < MEMBERS; j++)
    if (j != VICTIM)
      expect(res, tt_recv(t, names[j], TAG_READY, &v, sizeof v, NULL), COLL_OK,
             "ready");
  if (res->failed) return;
  if (a->how == HOW_KILL) raise(SIGKILL);
  if (a->how == HOW_T_ABORT)
    coll__t_abort(t);
  else if (a->how == HOW_OPS_ABORT)
    t->p.abort(t->ctx);
  else if (t->p.fail == NULL)
    tt_fail(res, "no fail hook");
  else
    (t->p.fail)(t->ctx, &a->o); /* parenthesized: cmocka defines fail() */
  expect(res, tt_wait(t, pending, TT_WAIT_MS, NULL), COLL_ERR_ABORTED,
         "own receive after the failure");
  expect_text(res, "receive from rank 1", "own receive");
  if (a->how != HOW_FAIL)
    snprintf(want, sizeof want, "rank 4 aborted");
  else
    coll__origin_text(&o, 4, want, sizeof want);
  expect_text(res, want, "own receive");
  expect(res, coll__t_isend(t, names[2], TAG_A, &v, sizeof v, &pending),
         COLL_ERR_ABORTED, "isend after the failure");
  expect_text(res, "rank 4", "isend after the failure");
  expect_origin(res, t, o.rank, o.cause, "own origin");
}

static void fail_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  const fail_arg_t *a = arg;
  coll_origin_t o = fail_origin(a);
  uint64_t v = 0;
  void *r;
  char want[COLL_ERRMSG_MAX];
  (void)world;
  if (rank == VICTIM) {
    victim(t, res, a);
    return;
  }
  expect(res, coll__t_irecv(t, 4, TAG_A, &v, sizeof v, &r), COLL_OK, "irecv");
  expect(res, tt_send(t, 4, TAG_READY, &v, sizeof v), COLL_OK, "ready");
  if (res->failed) return;
  expect(res, tt_wait(t, r, TT_WAIT_MS, NULL), coll__origin_req_status(&o),
         "receive from the failed rank");
  expect_text(res, "receive from rank 4 ", "receive");
  /* "rank 4 aborted, seen by rank 6", or "rank 7 lost (...), seen by ...":
   * never a member index. */
  coll__origin_text(&o, names[rank], want, sizeof want);
  expect_text(res, want, "receive");
  expect_origin(res, t, o.rank, o.cause, "origin");
}

static void test_abort_names_comm_rank(void **state) {
  fail_arg_t a = {HOW_T_ABORT, {0, 0, 0}};
  (void)state;
  run_ok(fail_rank, &a);
}

/* The same through the transport's abort slot, as a comm's abort reaches
 * an endpoint without a fail hook. */
static void test_ops_abort_names_comm_rank(void **state) {
  fail_arg_t a = {HOW_OPS_ABORT, {0, 0, 0}};
  (void)state;
  run_ok(fail_rank, &a);
}

/* Comm rank 4 dies by SIGKILL: the others name rank 4 lost. */
static void test_killed_member_names_comm_rank(void **state) {
  fail_arg_t a = {HOW_KILL, {0, 0, 0}};
  tt_result_t res[MEMBERS];
  int status[MEMBERS];
  char *before = shm_devshm_list(), *after;
  const char *extra;
  (void)state;
  run_members(fail_rank, &a, res, status);
  after = shm_devshm_list();
  extra = shm_devshm_new(before, after);
  free(before);
  free(after);
  if (res[0].failed) fail_msg("rank 1: %s", res[0].msg);
  if (res[2].failed) fail_msg("rank 6: %s", res[2].msg);
  assert_int_equal(status[0], 0);
  assert_int_equal(status[2], 0);
  assert_int_equal(status[VICTIM], 128 + SIGKILL);
  if (extra != NULL) fail_msg("new in /dev/shm: %s", extra);
}

/* A failure that began on rank 7, on another host, handed to member 4's
 * endpoint: every member reports rank 7, with the status it calls for. */
static void test_foreign_origin_passed_on(void **state) {
  fail_arg_t a = {HOW_FAIL, {7, COLL_CAUSE_LOST, 0}};
  (void)state;
  run_ok(fail_rank, &a);
}

/* Comm rank 4 stops itself; rank 1 waits on it, rank 6 on rank 1 (which
 * never sends): both fail with PEER_LOST naming rank 4 unresponsive, as
 * the heartbeat finds it. Rank 1 then kills rank 4. */
static void stop_rank(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  volatile pid_t *pid = arg;
  uint64_t v = 0;
  (void)world;
  if (rank == VICTIM) {
    *pid = getpid();
    kill(getpid(), SIGSTOP);
    for (;;) pause(); /* killed */
  }
  expect(res, tt_recv(t, rank == 0 ? 4 : 1, TAG_A, &v, sizeof v, NULL),
         COLL_ERR_PEER_LOST, "receive while rank 4 is stopped");
  expect_text(res, "rank 4 unresponsive", "receive");
  expect_origin(res, t, 4, COLL_CAUSE_UNRESPONSIVE, "origin");
  if (rank == 0) {
    int64_t end = test_now_ms() + TT_WAIT_MS;
    while (*pid == 0 && test_now_ms() < end) test_sleep_ms(1);
    if (*pid != 0) kill(*pid, SIGKILL);
  }
}

static void test_unresponsive_names_comm_rank(void **state) {
  tt_result_t res[MEMBERS];
  int status[MEMBERS];
  volatile pid_t *pid = mmap(NULL, sizeof *pid, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  (void)state;
  assert_true(pid != MAP_FAILED);
  *pid = 0;
  setenv("COLL_HEARTBEAT_TIMEOUT_MS", "1000", 1);
  run_members(stop_rank, (void *)pid, res, status);
  unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  munmap((void *)pid, sizeof *pid);
  if (res[0].failed) fail_msg("rank 1: %s", res[0].msg);
  if (res[2].failed) fail_msg("rank 6: %s", res[2].msg);
  assert_int_equal(status[0], 0);
  assert_int_equal(status[2], 0);
  assert_int_equal(status[VICTIM], 128 + SIGKILL);
}

static void never_run(coll_transport_t *t, int rank, int world,
                      tt_result_t *res, void *arg) {
  (void)t;
  (void)rank;
  (void)world;
  (void)arg;
  tt_fail(res, "the endpoint was made with names that do not ascend");
}

/* Names out of order: every member's create fails, saying why. */
static void test_unordered_names_refused(void **state) {
  static const int unordered[MEMBERS] = {4, 1, 6};
  tt_result_t res[MEMBERS];
  int status[MEMBERS];
  (void)state;
  shm_test_names = unordered;
  shm_test_name_world = NAME_WORLD;
  shm_run(MEMBERS, never_run, NULL, res, status, NULL);
  shm_test_names = NULL;
  shm_test_name_world = 0;
  for (int r = 0; r < MEMBERS; r++) {
    assert_int_equal(status[r], 2);
    if (strstr(res[r].msg, "INVALID_ARG") == NULL ||
        strstr(res[r].msg, "names must ascend") == NULL)
      fail_msg("member %d: %s", r, res[r].msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_and_size),
      cmocka_unit_test(test_messages_by_comm_rank),
      cmocka_unit_test(test_bad_peers_refused),
      cmocka_unit_test(test_abort_names_comm_rank),
      cmocka_unit_test(test_ops_abort_names_comm_rank),
      cmocka_unit_test(test_killed_member_names_comm_rank),
      cmocka_unit_test(test_foreign_origin_passed_on),
      cmocka_unit_test(test_unresponsive_names_comm_rank),
      cmocka_unit_test(test_unordered_names_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
