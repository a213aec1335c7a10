/* SPDX-License-Identifier: Apache-2.0 */
/* test_abort.c: abort handles (releasing a rank stuck on a peer that never
 * joins, idempotence, handles that outlive their comm, many aborting
 * threads), destroy with queued requests, abort racing destroy, and a
 * comm's timeout that fails a stuck collective and stays failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define RUN_TIMEOUT_MS 120000
/* So long that only an abort can release a stuck call in time. */
#define NEVER_MS 600000

static t_fail_t g_fails;

static void begin(void) { t_fail_init(&g_fails); }
static void end(const char *what) {
  int n = t_fail_report(&g_fails, what);
  t_fail_destroy(&g_fails);
  assert_int_equal(n, 0);
}

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) t_fail(&g_fails, "line %d: %s is false", __LINE__, #cond); \
  } while (0)

/* ---- a stuck rank released by abort ------------------------------------ */

typedef enum { B_ALLREDUCE, B_WAIT, B_RECV, B_BARRIER, B_BROADCAST } block_t;
static const char *const k_block_names[] = {
    "allreduce", "coll_wait(iallreduce)", "recv", "barrier", "broadcast"};

typedef struct stuck {
  coll_comm_t *comms[3];
  coll_abort_handle_t *h[3];
  block_t how;
  atomic_int entered;
  coll_status_t st[3];
  char msg[3][256];
} stuck_t;

static coll_status_t block_in(coll_comm_t *c, block_t how) {
  float buf[1000];
  coll_request_t *req = NULL;
  coll_status_t s;
  memset(buf, 0, sizeof buf);
  switch (how) {
    case B_ALLREDUCE:
      return coll_allreduce(c, buf, buf, 1000, COLL_F32, COLL_SUM, NULL);
    case B_WAIT:
      s = coll_iallreduce(c, buf, buf, 1000, COLL_F32, COLL_SUM, NULL, &req);
      return s != COLL_OK ? s : coll_wait(req);
    case B_RECV:
      /* From rank 2, which never sends. */
      return coll_recv(c, buf, 1000, COLL_F32, 2, 5, NULL);
    case B_BARRIER: return coll_barrier(c);
    default:
      /* From rank 2, which never calls. */
      return coll_broadcast(c, buf, 1000, COLL_F32, 2, NULL);
  }
}

/* World 3: ranks 0 and 1 block, rank 2 never calls; thread 3 aborts the
 * comms of ranks 0 and 1 after they entered. */
static void stuck_rank(int rank, int world, void *arg) {
  stuck_t *s = arg;
  (void)world;
  if (rank < 2) {
    atomic_fetch_add(&s->entered, 1);
    s->st[rank] = block_in(s->comms[rank], s->how);
    snprintf(s->msg[rank], sizeof s->msg[rank], "%s", coll_last_error());
  } else if (rank == 3) {
    while (atomic_load(&s->entered) < 2) test_sleep_ms(1);
    test_sleep_ms(200); /* let them block; correctness does not depend on it */
    if (coll_abort(s->h[0]) != COLL_OK) t_fail(&g_fails, "abort(h0) failed");
    if (coll_abort(s->h[1]) != COLL_OK) t_fail(&g_fails, "abort(h1) failed");
  }
}

static void stuck_case(block_t how) {
  stuck_t *s = calloc(1, sizeof *s);
  const char *name = k_block_names[how];
  float x = 1.0f;
  int r;
  if (s == NULL) {
    t_fail(&g_fails, "out of memory in the test");
    return;
  }
  s->how = how;
  atomic_init(&s->entered, 0);
  if (test_inproc_comms(3, NEVER_MS, s->comms) != 0) {
    t_fail(&g_fails, "%s: cannot create comms", name);
    free(s);
    return;
  }
  for (r = 0; r < 3; r++)
    if (coll_comm_abort_handle(s->comms[r], &s->h[r]) != COLL_OK)
      t_fail(&g_fails, "%s: comm_abort_handle(%d): %s", name, r,
             coll_last_error());
  CHECK(coll_is_aborted(s->h[0]) == 0);
  test_run_ranks(4, stuck_rank, s, RUN_TIMEOUT_MS, "rank released by abort");
  if (s->st[0] != COLL_ERR_ABORTED)
    t_fail(&g_fails,
           "%s stuck on a missing peer, aborted: rank 0 returned "
           "%s (\"%s\"), expected ABORTED",
           name, coll_status_name(s->st[0]), s->msg[0]);
  else if (s->msg[0][0] == '\0')
    t_fail(&g_fails, "%s: ABORTED without an error text", name);
  /* Rank 1's comm was aborted too, but it may have learned of rank 0's
   * abort first. */
  if (s->st[1] != COLL_ERR_ABORTED && s->st[1] != COLL_ERR_PEER_LOST)
    t_fail(&g_fails,
           "%s: rank 1 returned %s (\"%s\"), expected ABORTED or "
           "PEER_LOST",
           name, coll_status_name(s->st[1]), s->msg[1]);
  CHECK(coll_is_aborted(s->h[0]) == 1);
  CHECK(coll_is_aborted(s->h[1]) == 1);
  CHECK(coll_is_aborted(s->h[2]) == 0);
  /* Idempotent, and every later call fails at once. */
  CHECK(coll_abort(s->h[0]) == COLL_OK);
  CHECK(coll_abort(s->h[0]) == COLL_OK);
  CHECK(coll_allreduce(s->comms[0], &x, &x, 1, COLL_F32, COLL_SUM, NULL) ==
        COLL_ERR_ABORTED);
  CHECK(coll_barrier(s->comms[1]) == COLL_ERR_ABORTED);
  for (r = 0; r < 3; r++) {
    CHECK(coll_comm_destroy(s->comms[r]) == COLL_OK);
    /* The handle outlives the comm. */
    CHECK(coll_abort(s->h[r]) == COLL_OK);
    coll_abort_handle_release(s->h[r]);
  }
  free(s);
}

static void test_abort_releases_stuck_rank(void **state) {
  int how;
  (void)state;
  begin();
  for (how = B_ALLREDUCE; how <= B_BROADCAST; how++) stuck_case((block_t)how);
  end("abort releases a stuck rank");
}

/* ---- handles outliving comms ------------------------------------------- */

static void outlive_rank(int rank, int world, void *arg) {
  coll_comm_t *c[1];
  coll_abort_handle_t *h1 = NULL, *h2 = NULL;
  (void)rank, (void)world, (void)arg;
  /* Abort after destroy: a harmless no-op; release after destroy. */
  if (test_inproc_comms(1, NEVER_MS, c) != 0) {
    t_fail(&g_fails, "cannot create a comm");
    return;
  }
  CHECK(coll_comm_abort_handle(c[0], &h1) == COLL_OK);
  CHECK(coll_comm_abort_handle(c[0], &h2) == COLL_OK);
  CHECK(coll_comm_destroy(c[0]) == COLL_OK);
  CHECK(coll_abort(h1) == COLL_OK);
  CHECK(coll_abort(h2) == COLL_OK);
  /* A no-op: the handles say what happened to the comm while it lived. */
  CHECK(coll_is_aborted(h1) == 0);
  CHECK(coll_is_aborted(h2) == 0);
  coll_abort_handle_release(h1);
  CHECK(coll_abort(h2) == COLL_OK);
  coll_abort_handle_release(h2);
  /* Released before the comm is destroyed. */
  if (test_inproc_comms(1, NEVER_MS, c) != 0) {
    t_fail(&g_fails, "cannot create a comm");
    return;
  }
  CHECK(coll_comm_abort_handle(c[0], &h1) == COLL_OK);
  coll_abort_handle_release(h1);
  CHECK(coll_barrier(c[0]) == COLL_OK);
  CHECK(coll_comm_destroy(c[0]) == COLL_OK);
  /* Aborted, then destroyed, then the handle used. */
  if (test_inproc_comms(1, NEVER_MS, c) != 0) {
    t_fail(&g_fails, "cannot create a comm");
    return;
  }
  CHECK(coll_comm_abort_handle(c[0], &h1) == COLL_OK);
  CHECK(coll_abort(h1) == COLL_OK);
  CHECK(coll_is_aborted(h1) == 1);
  CHECK(coll_comm_destroy(c[0]) == COLL_OK);
  CHECK(coll_is_aborted(h1) == 1);
  CHECK(coll_abort(h1) == COLL_OK);
  coll_abort_handle_release(h1);
  /* A handle made before its comm: aborting it before the comm exists
   * marks it (that is how a watchdog ends a creation that waits); once
   * its comm was destroyed, an abort is a no-op as for any comm's. */
  {
    coll_transport_t *t[1];
    coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
    coll_comm_t *cc = NULL;
    CHECK(coll_abort_handle_create(&h1) == COLL_OK);
    CHECK(coll_abort(h1) == COLL_OK);
    CHECK(coll_is_aborted(h1) == 1);
    coll_abort_handle_release(h1);
    CHECK(coll_abort_handle_create(&h1) == COLL_OK);
    cfg.abort_handle = h1;
    CHECK(coll_inproc_create(1, t) == COLL_OK);
    CHECK(coll_comm_create(t[0], &cfg, &cc) == COLL_OK);
    CHECK(coll_comm_destroy(cc) == COLL_OK);
    CHECK(coll_abort(h1) == COLL_OK);
    CHECK(coll_is_aborted(h1) == 0);
    coll_abort_handle_release(h1);
  }
}

static void test_handle_outlives_comm(void **state) {
  (void)state;
  begin();
  test_run_ranks(1, outlive_rank, NULL, RUN_TIMEOUT_MS, "handles and destroy");
  end("handle outlives comm");
}

/* ---- many threads abort one comm at once ------------------------------- */

#define NABORTERS 8

typedef struct many {
  coll_comm_t *comms[2];
  coll_abort_handle_t *h[NABORTERS];
  atomic_int entered, go;
  coll_status_t st;
} many_t;

static void many_rank(int rank, int world, void *arg) {
  many_t *m = arg;
  (void)world;
  if (rank == 0) {
    float buf[64] = {0};
    atomic_store(&m->entered, 1);
    m->st = coll_allreduce(m->comms[0], buf, buf, 64, COLL_F32, COLL_SUM, NULL);
    return;
  }
  while (!atomic_load(&m->entered)) test_sleep_ms(1);
  if (rank == 1) {
    test_sleep_ms(100);
    atomic_store(&m->go, 1);
  }
  while (!atomic_load(&m->go)) {
  }
  if (coll_abort(m->h[rank - 1]) != COLL_OK)
    t_fail(&g_fails, "abort from thread %d failed", rank);
  if (coll_is_aborted(m->h[rank - 1]) != 1)
    t_fail(&g_fails, "thread %d: not aborted after its abort", rank);
}

static void test_abort_from_many_threads(void **state) {
  many_t *m = calloc(1, sizeof *m);
  int i;
  (void)state;
  assert_non_null(m);
  begin();
  atomic_init(&m->entered, 0);
  atomic_init(&m->go, 0);
  assert_int_equal(test_inproc_comms(2, NEVER_MS, m->comms), 0);
  for (i = 0; i < NABORTERS; i++)
    assert_int_equal(coll_comm_abort_handle(m->comms[0], &m->h[i]), COLL_OK);
  test_run_ranks(1 + NABORTERS, many_rank, m, RUN_TIMEOUT_MS,
                 "abort from many threads");
  if (m->st != COLL_ERR_ABORTED)
    t_fail(&g_fails, "allreduce aborted from %d threads returned %s", NABORTERS,
           coll_status_name(m->st));
  test_destroy_comms(2, m->comms);
  for (i = 0; i < NABORTERS; i++) coll_abort_handle_release(m->h[i]);
  free(m);
  end("abort from many threads");
}

/* ---- destroy with queued requests --------------------------------------- */

#define BIGMSG (1u << 18)

static void queued_rank(int rank, int world, void *arg) {
  coll_comm_t *c[2];
  coll_request_t *req[6] = {NULL};
  static const char *const names[6] = {"iallreduce", "iallreduce", "ibarrier",
                                       "iallgather", "irecv",      "isend"};
  float a[100] = {0}, b[100] = {0}, g[200] = {0};
  int32_t *msg = calloc(BIGMSG, sizeof *msg), in[16];
  int i;
  (void)rank, (void)world, (void)arg;
  if (msg == NULL || test_inproc_comms(2, NEVER_MS, c) != 0) {
    t_fail(&g_fails, "setup failed");
    free(msg);
    return;
  }
  /* Rank 1 never takes part: everything stays queued or pending. */
  CHECK(coll_iallreduce(c[0], a, a, 100, COLL_F32, COLL_SUM, NULL, &req[0]) ==
        COLL_OK);
  CHECK(coll_iallreduce(c[0], b, b, 100, COLL_F32, COLL_MAX, NULL, &req[1]) ==
        COLL_OK);
  CHECK(coll_ibarrier(c[0], &req[2]) == COLL_OK);
  CHECK(coll_iallgather(c[0], a, g, 100, COLL_F32, NULL, &req[3]) == COLL_OK);
  CHECK(coll_irecv(c[0], in, 16, COLL_I32, 1, 4, NULL, &req[4]) == COLL_OK);
  CHECK(coll_isend(c[0], msg, BIGMSG, COLL_I32, 1, 4, &req[5]) == COLL_OK);
  test_sleep_ms(20);
  CHECK(coll_comm_destroy(c[0]) == COLL_OK);
  /* The requests outlive the comm: done, and coll_wait frees them. */
  for (i = 0; i < 6; i++) {
    int done = 0;
    coll_status_t s;
    if (req[i] == NULL) continue;
    if (coll_test(req[i], &done) != COLL_OK || !done)
      t_fail(&g_fails, "%s queued at destroy: coll_test says not done",
             names[i]);
    s = coll_wait(req[i]);
    /* A send may have completed into the transport's buffer first. */
    if (s != COLL_ERR_ABORTED && !(i == 5 && s == COLL_OK))
      t_fail(&g_fails,
             "%s queued at destroy: coll_wait returned %s (\"%s\"), "
             "expected ABORTED",
             names[i], coll_status_name(s), coll_last_error());
  }
  CHECK(coll_comm_destroy(c[1]) == COLL_OK);
  free(msg);
}

static void test_destroy_with_queued_requests(void **state) {
  (void)state;
  begin();
  test_run_ranks(1, queued_rank, NULL, RUN_TIMEOUT_MS,
                 "destroy with queued requests");
  end("destroy with queued requests");
}

/* ---- abort racing destroy ------------------------------------------------ */

typedef struct race {
  coll_comm_t *c;
  coll_abort_handle_t *h;
  atomic_int ready;
  coll_status_t destroy_st;
} race_t;

static void race_rank(int rank, int world, void *arg) {
  race_t *r = arg;
  (void)world;
  atomic_fetch_add(&r->ready, 1);
  while (atomic_load(&r->ready) < 2) {
  }
  if (rank == 0)
    (void)coll_abort(r->h);
  else
    r->destroy_st = coll_comm_destroy(r->c);
}

static void test_abort_destroy_race(void **state) {
  race_t r;
  int i, n = 1000;
  (void)state;
  begin();
  for (i = 0; i < n && g_fails.count == 0; i++) {
    coll_comm_t *c[2];
    coll_request_t *req = NULL;
    float buf[32] = {0};
    int world = 1 + (i & 1), busy = (i & 2) != 0;
    if (test_inproc_comms(world, NEVER_MS, c) != 0) {
      t_fail(&g_fails, "iteration %d: cannot create comms", i);
      break;
    }
    r.c = c[0];
    atomic_init(&r.ready, 0);
    r.destroy_st = COLL_ERR_INTERNAL;
    CHECK(coll_comm_abort_handle(c[0], &r.h) == COLL_OK);
    /* Half the time with work in flight: on world 2 it waits for rank 1,
     * which never comes. */
    if (busy)
      CHECK(coll_iallreduce(c[0], buf, buf, 32, COLL_F32, COLL_SUM, NULL,
                            &req) == COLL_OK);
    test_run_ranks(2, race_rank, &r, RUN_TIMEOUT_MS, "abort vs destroy");
    if (r.destroy_st != COLL_OK)
      t_fail(&g_fails, "iteration %d: destroy racing abort returned %s", i,
             coll_status_name(r.destroy_st));
    if (req != NULL) {
      coll_status_t s = coll_wait(req);
      /* On world 1 the allreduce may have finished before either. */
      if (s != COLL_ERR_ABORTED && !(world == 1 && s == COLL_OK))
        t_fail(&g_fails, "iteration %d: request in flight returned %s", i,
               coll_status_name(s));
    }
    CHECK(coll_abort(r.h) == COLL_OK);
    coll_abort_handle_release(r.h);
    if (world == 2) coll_comm_destroy(c[1]);
  }
  end("abort racing destroy");
}

/* ---- the comm's timeout ----------------------------------------------------
 */

static void timeout_rank(int rank, int world, void *arg) {
  coll_comm_t *c[2];
  float buf[16] = {0};
  int32_t v[4] = {0};
  coll_status_t s;
  (void)rank, (void)world, (void)arg;
  /* A collective whose peer never joins. */
  if (test_inproc_comms(2, 200, c) != 0) {
    t_fail(&g_fails, "cannot create comms");
    return;
  }
  s = coll_allreduce(c[0], buf, buf, 16, COLL_F32, COLL_SUM, NULL);
  if (t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "allreduce, peer absent") &&
      !t_err_names("allreduce"))
    t_fail(&g_fails, "timeout text \"%s\" does not name allreduce",
           coll_last_error());
  /* Sticky: the comm stays failed. */
  s = coll_allreduce(c[0], buf, buf, 16, COLL_F32, COLL_SUM, NULL);
  t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "allreduce after a timeout");
  s = coll_barrier(c[0]);
  t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "barrier after a timeout");
  s = coll_send(c[0], v, 4, COLL_I32, 1, 0);
  t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "send after a timeout");
  test_destroy_comms(2, c);

  /* A receive whose sender never sends. */
  if (test_inproc_comms(2, 200, c) != 0) {
    t_fail(&g_fails, "cannot create comms");
    return;
  }
  s = coll_recv(c[0], v, 4, COLL_I32, 1, 0, NULL);
  if (t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "recv, sender absent") &&
      !t_err_names("recv"))
    t_fail(&g_fails, "timeout text \"%s\" does not name recv",
           coll_last_error());
  s = coll_allreduce(c[0], buf, buf, 16, COLL_F32, COLL_SUM, NULL);
  t_expect(&g_fails, s, COLL_ERR_TIMEOUT, "allreduce after a recv timeout");
  test_destroy_comms(2, c);
}

static void test_timeout(void **state) {
  (void)state;
  begin();
  test_run_ranks(1, timeout_rank, NULL, 60000, "comm timeout");
  end("comm timeout");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abort_releases_stuck_rank),
      cmocka_unit_test(test_handle_outlives_comm),
      cmocka_unit_test(test_abort_from_many_threads),
      cmocka_unit_test(test_destroy_with_queued_requests),
      cmocka_unit_test(test_abort_destroy_race),
      cmocka_unit_test(test_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
