/* SPDX-License-Identifier: Apache-2.0 */
/* test_host_shm.c: a comm spread over hosts gives the ranks of each host a
 * shared-memory endpoint among themselves, and the two-level allreduce
 * runs its steps within a host on it (bootstrap/rendezvous/
 * host_endpoint.c, algo/allreduce_two_level.c). Four forked ranks through
 * coll_comm_init_env; the host identity hook puts ranks 0 and 2 on host
 * A, 1 and 3 on host B. Each rank checks its host endpoint, then:
 *  - results: two-level allreduces of several sizes and dtypes against a
 *    serial reference (orders that cannot change the bits: integer sums,
 *    float max), with the bytes between ranks of one host going through
 *    shared memory and almost none through TCP;
 *  - kill: rank 3 dies in the middle; its host peer (rank 1, waiting on it
 *    in shared memory) and the ranks of host A name it;
 *  - abort: rank 3 aborts before it joins; every rank reports ABORTED
 *    naming rank 3, its host peer included;
 *  - timeout: rank 3 never joins; rank 1 times out in shared memory, and
 *    the report that says who is missing comes from the whole comm;
 *  - through coll_comm_init_store (over a store server in a process of
 *    its own): the same endpoint, and a setup that fails on every rank,
 *    saying why, when one rank has COLL_TRANSPORT=tcp. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/host_id.h"
#include "coll.h"
#include "cpu/cpu.h"
#include "test_util.h"
#include "transport/route/route.h"

#define WORLD 4
#define VICTIM 3 /* on host B with rank 1 */
#define CHILD_MS 90000

enum {
  CASE_RESULTS,
  CASE_KILL,
  CASE_ABORT,
  CASE_TIMEOUT,
  CASE_STORE,      /* coll_comm_init_store: the same endpoint */
  CASE_STORE_MIXED /* ... with COLL_TRANSPORT=tcp on rank 2 only */
};

static const char *const k_hosts[WORLD] = {"A/net:1/ipc:1", "B/net:2/ipc:2",
                                           "A/net:1/ipc:1", "B/net:2/ipc:2"};

typedef struct rank_out {
  int status; /* coll_status_t of the step that failed; -1 a wrong result */
  char msg[600];
  int checked;
} rank_out_t;

typedef struct job {
  int port, rank, kase;
  rank_out_t *out;
  int store_port; /* the store cases: the test process's store server */
} job_t;

#define fail_out(o, s, ...) \
  bt_fail_out(&(o)->status, (o)->msg, sizeof(o)->msg, s, __VA_ARGS__)

/* Bytes this rank posted to a rank of its own host, by the endpoint that
 * carried them (coll__t_send_test_hook sees every send, with comm ranks). */
static _Atomic size_t g_local_shm, g_local_tcp, g_remote_shm;

static int same_host(int a, int b) { return (a & 1) == (b & 1); }

static void count_send(const coll_transport_t *t, int peer, size_t len) {
  int shm = strcmp(coll__t_name(t), "shm") == 0;
  if (!same_host(coll_transport_rank(t), peer))
    atomic_fetch_add(shm ? &g_remote_shm : &g_local_tcp, shm ? len : 0);
  else
    atomic_fetch_add(shm ? &g_local_shm : &g_local_tcp, len);
}

/* The host endpoint: shared memory that speaks comm ranks. */
static int check_endpoint(coll_comm_t *c, int rank, rank_out_t *o) {
  coll_transport_t *t = ((coll_cpu_t *)c->be)->t, *h = coll__route_host(t);
  if (strcmp(coll__t_name(t), "tcp+shm") != 0)
    fail_out(o, COLL_OK, "the comm runs on '%s', not tcp+shm", coll__t_name(t));
  else if (h == NULL)
    fail_out(o, COLL_OK, "no host endpoint");
  else if (strcmp(coll__t_name(h), "shm") != 0)
    fail_out(o, COLL_OK, "the host endpoint is '%s', not shm", coll__t_name(h));
  else if (coll_transport_rank(h) != rank || coll_transport_size(h) != WORLD)
    fail_out(o, COLL_OK, "the host endpoint is rank %d of %d, not %d of %d",
             coll_transport_rank(h), coll_transport_size(h), rank, WORLD);
  return o->status == 0;
}

static void one_allreduce(coll_comm_t *c, int rank, coll_dtype_t dt,
                          coll_op_t op, size_t n, rank_out_t *o) {
  size_t esz = coll_dtype_size(dt);
  char *x = malloc(n * esz), *want = malloc(n * esz);
  coll_status_t s;
  if (x == NULL || want == NULL || bt_reference(want, dt, op, WORLD, 0, n)) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  bt_fill_values(x, dt, op, rank, n);
  s = coll_allreduce(c, x, x, n, dt, op, NULL);
  if (s != COLL_OK)
    fail_out(o, s, "allreduce of %zu %s: %s", n, coll_dtype_name(dt),
             coll_last_error());
  else if (memcmp(x, want, n * esz) != 0)
    fail_out(o, COLL_OK, "allreduce of %zu %s %s: wrong result", n,
             coll_dtype_name(dt), op == COLL_MAX ? "max" : "sum");
  else
    o->checked++;
out:
  free(x);
  free(want);
}

static void results(coll_comm_t *c, int rank, rank_out_t *o) {
  static const size_t sizes[] = {1, 3, 1000, 65537, 1 << 20};
  size_t sent;
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    one_allreduce(c, rank, COLL_I32, COLL_SUM, sizes[k], o);
    one_allreduce(c, rank, COLL_I64, COLL_SUM, sizes[k], o);
    one_allreduce(c, rank, COLL_F32, COLL_MAX, sizes[k], o);
  }
  if (o->status) return;
  sent = atomic_load(&g_local_shm);
  /* The largest one alone: its half sent to the host peer, twice. */
  if (sent < (1u << 20) * 4)
    fail_out(o, COLL_OK, "only %zu bytes to the host peer went by shm", sent);
  /* Every message within a host goes by shm, the descriptor agreements
   * too (test_host_route.c). */
  else if (atomic_load(&g_local_tcp) != 0)
    fail_out(o, COLL_OK, "%zu bytes to the host peer went by TCP",
             atomic_load(&g_local_tcp));
  else if (atomic_load(&g_remote_shm) != 0)
    fail_out(o, COLL_OK, "shm carried bytes to another host");
}

/* Every rank that is not `who` reports s, naming `who` as `what`. */
static void expect_named(coll_status_t got, coll_status_t s, const char *what,
                         rank_out_t *o) {
  char want[64];
  /* Every rank but the victim posted its step within the host to shared
   * memory: the failure reached it there, or after it. */
  if (atomic_load(&g_local_shm) == 0)
    fail_out(o, COLL_OK, "nothing went to the host peer by shm");
  snprintf(want, sizeof want, "rank %d %s", VICTIM, what);
  if (got != s || strstr(coll_last_error(), want) == NULL)
    fail_out(o, got == COLL_OK ? COLL_ERR_INTERNAL : got,
             "expected %s naming \"%s\": %s: %s", coll_status_name(s), want,
             coll_status_name(got), coll_last_error());
}

static coll_status_t loop(coll_comm_t *c, int rank, int die_at) {
  size_t n = 1 << 18;
  int32_t *x = calloc(n, sizeof *x);
  coll_status_t s = x != NULL ? COLL_OK : COLL_ERR_NO_MEMORY;
  for (int it = 0; it < 8 && s == COLL_OK; it++) {
    if (it == die_at && rank == VICTIM) raise(SIGKILL);
    s = coll_allreduce(c, x, x, n, COLL_I32, COLL_SUM, NULL);
  }
  free(x);
  return s;
}

static void abort_case(coll_comm_t *c, int rank, rank_out_t *o) {
  int32_t x[1000] = {0};
  coll_status_t s;
  if (rank == VICTIM) {
    coll_abort_handle_t *h = NULL;
    if (coll_comm_abort_handle(c, &h) != COLL_OK) {
      fail_out(o, COLL_ERR_INTERNAL, "abort handle: %s", coll_last_error());
      return;
    }
    test_sleep_ms(300);
    coll_abort(h);
    coll_abort_handle_release(h);
    s = coll_allreduce(c, x, x, 1000, COLL_I32, COLL_SUM, NULL);
    if (s != COLL_ERR_ABORTED)
      fail_out(o, s, "expected ABORTED: %s", coll_last_error());
    return;
  }
  s = coll_allreduce(c, x, x, 1000, COLL_I32, COLL_SUM, NULL);
  expect_named(s, COLL_ERR_ABORTED, "aborted", o);
}

static void timeout_case(coll_comm_t *c, int rank, rank_out_t *o) {
  int32_t x[1000] = {0};
  coll_status_t s;
  if (rank == VICTIM) {
    test_sleep_ms(3000);
    return;
  }
  s = coll_allreduce(c, x, x, 1000, COLL_I32, COLL_SUM, NULL);
  if (atomic_load(&g_local_shm) == 0)
    fail_out(o, COLL_OK, "nothing went to the host peer by shm");
  /* The comm's desync report ("rank 3 never entered it"): asked over the
   * whole comm, also by rank 1, which timed out in shared memory. */
  if (s != COLL_ERR_TIMEOUT ||
      strstr(coll_last_error(), "rank 3 never entered it") == NULL)
    fail_out(o, s == COLL_OK ? COLL_ERR_INTERNAL : s,
             "expected TIMEOUT with \"rank 3 never entered it\": %s: %s",
             coll_status_name(s), coll_last_error());
}

/* The comm through coll_comm_init_store, over the test's store server. */
static coll_status_t init_store(const job_t *j, coll_store_t **st,
                                coll_comm_t **c) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  bt_store_t f = {NULL, j->store_port};
  coll_store_ops_t ops;
  *st = bt_client(&f);
  if (*st == NULL) return COLL_ERR_SYSTEM;
  coll__store_client_ops(*st, &ops);
  cfg.timeout_ms = 30000;
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  return coll_comm_init_store(&ops, j->rank, WORLD, &cfg, c);
}

/* Rank 2 keeps every byte on TCP; the others expect shared memory with
 * the ranks of their host. The setup fails on every rank, saying why. */
static void mixed_case(const job_t *j, rank_out_t *o) {
  coll_store_t *st = NULL;
  coll_comm_t *c = NULL;
  coll_status_t s;
  if (j->rank == 2) setenv("COLL_TRANSPORT", "tcp", 1);
  s = init_store(j, &st, &c);
  if (s == COLL_OK)
    fail_out(o, COLL_ERR_INTERNAL, "the setup passed");
  else if (s != COLL_ERR_INVALID_ARG ||
           strstr(coll_last_error(),
                  "ranks disagree on COLL_TRANSPORT: rank 0 has auto or shm, "
                  "rank 2 has tcp") == NULL)
    fail_out(o, s, "expected INVALID_ARG naming rank 2's COLL_TRANSPORT: %s",
             coll_last_error());
  coll_comm_destroy(c);
  if (st != NULL) coll__store_close(st);
}

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_store_t *st = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, WORLD, j->port);
  unsetenv("COLL_TRANSPORT");
  /* The two-level allreduce at every size: the steps within a host are
   * what this test is about. */
  setenv("COLL_ALGO", "twolevel", 1);
  setenv("COLL_TIMEOUT_MS", j->kase == CASE_TIMEOUT ? "1500" : "30000", 1);
  setenv("COLL_LINK_PROBE", "0", 1); /* no threshold to pick */
  /* Without the descriptor agreement a failing rank's host peer waits on
   * it in shared memory, not in the agreement over TCP. */
  setenv("COLL_CHECK_MISMATCH", j->kase == CASE_RESULTS ? "1" : "0", 1);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, k_hosts, WORLD};
  coll__t_send_test_hook = count_send;
  if (j->kase == CASE_STORE_MIXED) {
    mixed_case(j, o);
    return 0;
  }
  s = j->kase == CASE_STORE ? init_store(j, &st, &c)
                            : coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "init: %s", coll_last_error());
    return 0;
  }
  /* Only the collectives' bytes count, not the setup's. */
  atomic_store(&g_local_shm, 0);
  atomic_store(&g_local_tcp, 0);
  atomic_store(&g_remote_shm, 0);
  if (check_endpoint(c, j->rank, o)) {
    if (j->kase == CASE_RESULTS) {
      results(c, j->rank, o);
    } else if (j->kase == CASE_STORE) {
      one_allreduce(c, j->rank, COLL_I32, COLL_SUM, 100003, o);
      if (o->status == 0 && atomic_load(&g_local_shm) == 0)
        fail_out(o, COLL_OK, "nothing went to the host peer by shm");
    } else if (j->kase == CASE_KILL) {
      s = loop(c, j->rank, 3);
      expect_named(s, COLL_ERR_PEER_LOST, "lost", o);
    } else if (j->kase == CASE_ABORT) {
      abort_case(c, j->rank, o);
    } else {
      timeout_case(c, j->rank, o);
    }
  }
  coll_comm_destroy(c);
  if (st != NULL) coll__store_close(st);
  return 0;
}

/* ---- the test process ---------------------------------------------------- */

static rank_out_t *run_job(int kase, int *st, int store_port) {
  pid_t pids[WORLD];
  job_t j = {bt_free_port("127.0.0.1"), 0, kase, NULL, store_port};
  rank_out_t *out = mmap(NULL, sizeof *out * WORLD, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(out != MAP_FAILED);
  memset(out, 0, sizeof *out * WORLD);
  j.out = out;
  for (int r = 0; r < WORLD; r++) {
    j.rank = r;
    pids[r] = bt_fork(rank_main, &j);
    assert_true(pids[r] > 0);
  }
  for (int r = 0; r < WORLD; r++) st[r] = bt_wait_child(pids[r], CHILD_MS);
  return out;
}

static void expect_ok(int skip, rank_out_t *out, const int *st) {
  for (int r = 0; r < WORLD; r++) {
    if (r == skip) continue;
    if (out[r].status != 0) fail_msg("rank %d: %s", r, out[r].msg);
    assert_int_equal(st[r], 0);
  }
}

static void test_results(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_RESULTS, st, 0);
  expect_ok(-1, out, st);
  for (int r = 0; r < WORLD; r++) assert_int_equal(out[r].checked, 15);
  munmap(out, sizeof *out * WORLD);
}

static void test_killed_rank_named(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_KILL, st, 0);
  assert_int_equal(st[VICTIM], 128 + SIGKILL);
  expect_ok(VICTIM, out, st);
  munmap(out, sizeof *out * WORLD);
}

static void test_abort_named(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_ABORT, st, 0);
  expect_ok(-1, out, st);
  munmap(out, sizeof *out * WORLD);
}

static void test_timeout_reported(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_TIMEOUT, st, 0);
  expect_ok(-1, out, st);
  munmap(out, sizeof *out * WORLD);
}

/* A store server in a process of its own: the ranks are forked from this
 * one, which must not run threads of its own then (ThreadSanitizer cannot
 * follow a fork of a threaded process). It serves until killed. */
typedef struct store_proc {
  pid_t pid;
  int port;
} store_proc_t;

static int serve_store(void *p) {
  _Atomic int *port = p;
  bt_store_t *f = NULL;
  void *state = NULL;
  if (bt_store_setup(&state) != 0) return 1;
  f = state;
  atomic_store(port, f->port);
  for (;;) pause();
}

static void store_start(store_proc_t *sp) {
  _Atomic int *port = mmap(NULL, sizeof *port, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int64_t until = test_now_ms() + 10000;
  assert_true(port != MAP_FAILED);
  atomic_init(port, 0);
  sp->pid = bt_fork(serve_store, port);
  assert_true(sp->pid > 0);
  while (atomic_load(port) == 0 && test_now_ms() < until) test_sleep_ms(5);
  sp->port = atomic_load(port);
  munmap((void *)port, sizeof *port);
  if (sp->port == 0) {
    kill(sp->pid, SIGKILL);
    bt_wait_child(sp->pid, 5000);
    fail_msg("the store server did not start within 10 s");
  }
}

static void store_stop(store_proc_t *sp) {
  kill(sp->pid, SIGKILL);
  bt_wait_child(sp->pid, 5000);
}

static void store_case(int kase) {
  int st[WORLD];
  store_proc_t sp;
  rank_out_t *out;
  store_start(&sp);
  out = run_job(kase, st, sp.port);
  store_stop(&sp);
  expect_ok(-1, out, st);
  for (int r = 0; kase == CASE_STORE && r < WORLD; r++)
    assert_int_equal(out[r].checked, 1);
  munmap(out, sizeof *out * WORLD);
}

static void test_init_store(void **state) {
  (void)state;
  store_case(CASE_STORE);
}

static void test_init_store_mixed_transport(void **state) {
  (void)state;
  store_case(CASE_STORE_MIXED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_results),
      cmocka_unit_test(test_killed_rank_named),
      cmocka_unit_test(test_abort_named),
      cmocka_unit_test(test_timeout_reported),
      cmocka_unit_test(test_init_store),
      cmocka_unit_test(test_init_store_mixed_transport),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
