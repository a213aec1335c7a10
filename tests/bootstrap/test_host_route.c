/* SPDX-License-Identifier: Apache-2.0 */
/* test_host_route.c: in a comm spread over hosts, every message between
 * two ranks of one host goes through the host's shared memory, not TCP:
 * the comm's endpoint routes it to its host endpoint (transport/
 * transport.c). Four forked ranks through coll_comm_init_env; the host
 * identity hook puts ranks 0 and 2 on host A, 1 and 3 on host B, so the
 * flat ring (in host order 0 2 1 3) has two hops in shared memory and two
 * over TCP. Each case:
 *  - colls: allreduce, broadcast, allgather and reduce-scatter on the
 *    flat ring, and sends both ways between the ranks of each host, right
 *    (integer sums: the ring's order cannot change the bits), with no byte
 *    within a host on TCP;
 *  - cycle: rank 0 sends 4 MiB to rank 2 (more than the shared-memory
 *    ring holds) and waits first on a receive from rank 1 on host B, which
 *    waits on rank 2, which waits on the rest of rank 0's send: a wait on
 *    TCP must move the shared memory too, or this hangs until the timeout;
 *    then the other way round: 32 MiB over TCP to rank 1 (more than the
 *    sockets buffer) while rank 0 waits in shared memory on rank 2;
 *  - kill: rank 0 dies; rank 2, waiting on it in shared memory, and rank
 *    1, over TCP, both get PEER_LOST naming it, and rank 2's next
 *    collective names it too;
 *  - timeout: rank 2 waits on a receive from rank 0 that never comes;
 *  - abort: rank 2's receive from rank 0 that never comes ends when
 *    another thread aborts the comm. */
#include <pthread.h>
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
#include "core/clock.h"
#include "cpu/cpu.h"
#include "test_util.h"
#include "transport/route/route.h"

#define WORLD 4
#define CHILD_MS 90000
#define BIG (4u << 20)   /* more than a shared-memory ring (512 KiB) */
#define HUGE (32u << 20) /* more than a socket's buffers hold (8 MiB) */
#define TAG 7

enum { CASE_COLLS, CASE_CYCLE, CASE_KILL, CASE_TIMEOUT, CASE_ABORT };

static const char *const k_hosts[WORLD] = {"A/net:1/ipc:1", "B/net:2/ipc:2",
                                           "A/net:1/ipc:1", "B/net:2/ipc:2"};

typedef struct rank_out {
  int status; /* coll_status_t of the step that failed; -1 a wrong result */
  char msg[600];
  int checked;
  int64_t took_ms;  /* the case's one wait, where it has one */
  atomic_int ready; /* this rank's comm stands */
  atomic_int done;  /* this rank finished its case */
} rank_out_t;

typedef struct job {
  int port, rank, kase;
  rank_out_t *out;
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

/* ---- colls ---------------------------------------------------------- */

static void check(rank_out_t *o, coll_status_t s, const void *got,
                  const void *want, size_t n, const char *what) {
  if (s != COLL_OK)
    fail_out(o, s, "%s: %s", what, coll_last_error());
  else if (memcmp(got, want, n) != 0)
    fail_out(o, COLL_OK, "%s: wrong result", what);
  else
    o->checked++;
}

static void colls(coll_comm_t *c, int rank, rank_out_t *o) {
  const size_t n = (1u << 18) + 3, bytes = n * sizeof(int32_t);
  const int host_peer = rank ^ 2;
  int32_t *x = malloc(bytes * WORLD), *want = malloc(bytes * WORLD);
  int32_t *got = malloc(bytes);
  size_t got_n = 0;
  if (x == NULL || want == NULL || got == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  /* allreduce */
  bt_fill_values(x, COLL_I32, COLL_SUM, rank, n);
  bt_reference(want, COLL_I32, COLL_SUM, WORLD, 0, n);
  check(o, coll_allreduce(c, x, x, n, COLL_I32, COLL_SUM, NULL), x, want, bytes,
        "allreduce");
  /* broadcast from rank 1, on host B */
  bt_fill_values(want, COLL_I32, COLL_SUM, 50, n);
  if (rank == 1)
    memcpy(x, want, bytes);
  else
    memset(x, 0xee, bytes);
  check(o, coll_broadcast(c, x, n, COLL_I32, 1, NULL), x, want, bytes,
        "broadcast");
  /* allgather, in place */
  for (int r = 0; r < WORLD; r++)
    bt_fill_values(want + (size_t)r * n, COLL_I32, COLL_SUM, r, n);
  memset(x, 0xee, bytes * WORLD);
  memcpy(x + (size_t)rank * n, want + (size_t)rank * n, bytes);
  check(o, coll_allgather(c, x + (size_t)rank * n, x, n, COLL_I32, NULL), x,
        want, bytes * WORLD, "allgather");
  /* reduce-scatter: block d of rank r has seed r + 4 d (bt_reference) */
  for (int d = 0; d < WORLD; d++)
    bt_fill_values(x + (size_t)d * n, COLL_I32, COLL_SUM, rank + 4 * d, n);
  bt_reference(want, COLL_I32, COLL_SUM, WORLD, rank, n);
  memset(got, 0xee, bytes);
  check(o, coll_reduce_scatter(c, x, got, n, COLL_I32, COLL_SUM, NULL), got,
        want, bytes, "reduce-scatter");
  if (o->status) goto out;
  /* sends both ways within the host: the lower rank first */
  bt_fill_values(want, COLL_I32, COLL_SUM, 10 + host_peer, n);
  bt_fill_values(want + n, COLL_I32, COLL_SUM, 10 + rank, n);
  for (int turn = 0; turn < 2 && !o->status; turn++) {
    coll_status_t s;
    if ((turn == 0) == (rank < host_peer)) {
      s = coll_send(c, want + n, n, COLL_I32, host_peer, TAG);
      if (s != COLL_OK) fail_out(o, s, "send: %s", coll_last_error());
    } else {
      memset(x, 0xee, bytes);
      s = coll_recv(c, x, n, COLL_I32, host_peer, TAG, &got_n);
      check(o, s == COLL_OK && got_n != n ? COLL_ERR_INTERNAL : s, x, want,
            bytes, "recv from the host peer");
    }
  }
  if (o->status) goto out;
  if (atomic_load(&g_local_tcp) != 0)
    fail_out(o, COLL_OK, "%zu bytes to the host peer went by TCP",
             atomic_load(&g_local_tcp));
  else if (atomic_load(&g_local_shm) < bytes) /* the send, at least */
    fail_out(o, COLL_OK, "only %zu bytes to the host peer went by shm",
             atomic_load(&g_local_shm));
  else if (atomic_load(&g_remote_shm) != 0)
    fail_out(o, COLL_OK, "shm carried bytes to another host");
out:
  free(x);
  free(want);
  free(got);
}

/* ---- cycle ---------------------------------------------------------- */

/* Rank `from` sends n bytes to `to` and waits first on a token from
 * `back`; `to` passes the token on to `via`, which passes it to `from`.
 * The send cannot complete while `from` waits for the token unless the
 * wait keeps it moving. */
static coll_status_t one_cycle(coll_comm_t *c, int rank, int from, int to,
                               int via, size_t n, unsigned char *big,
                               const unsigned char *want) {
  int32_t token = 42, in = 0;
  coll_status_t s = COLL_OK;
  if (rank == from) {
    coll_request_t *rs = NULL, *rr = NULL;
    memcpy(big, want, n);
    s = coll_isend(c, big, n, COLL_U8, to, TAG, &rs);
    if (s == COLL_OK) s = coll_irecv(c, &in, 1, COLL_I32, via, TAG, NULL, &rr);
    if (rr != NULL) s = coll_wait(rr);
    if (rs != NULL && coll_wait(rs) != COLL_OK && s == COLL_OK)
      s = COLL_ERR_INTERNAL;
    if (s == COLL_OK && in != token) s = COLL_ERR_INTERNAL;
  } else if (rank == to) {
    s = coll_recv(c, big, n, COLL_U8, from, TAG, NULL);
    if (s == COLL_OK && memcmp(big, want, n) != 0) s = COLL_ERR_INTERNAL;
    if (s == COLL_OK) s = coll_send(c, &token, 1, COLL_I32, via, TAG);
  } else if (rank == via) {
    s = coll_recv(c, &in, 1, COLL_I32, to, TAG, NULL);
    if (s == COLL_OK) s = coll_send(c, &in, 1, COLL_I32, from, TAG);
  }
  return s;
}

static void cycle(coll_comm_t *c, int rank, rank_out_t *o) {
  unsigned char *big = malloc(HUGE), *want = malloc(HUGE);
  coll_status_t s;
  if (big == NULL || want == NULL) {
    fail_out(o, COLL_ERR_NO_MEMORY, "out of memory");
  } else {
    bt_fill_values(want, COLL_U8, COLL_SUM, 3, HUGE);
    /* In shared memory to rank 2 while waiting on TCP from rank 1: the TCP
     * wait must move the shared memory (its kick). */
    s = one_cycle(c, rank, 0, 2, 1, BIG, big, want);
    if (s != COLL_OK)
      fail_out(o, s, "cycle through shm: %s", coll_last_error());
    /* Over TCP to rank 1 while waiting in shared memory on rank 2: the
     * send must move meanwhile (TCP's kick hands it to its loop). */
    s = one_cycle(c, rank, 0, 1, 2, HUGE, big, want);
    if (s != COLL_OK && !o->status)
      fail_out(o, s, "cycle through TCP: %s", coll_last_error());
  }
  free(big);
  free(want);
}

/* ---- failures ------------------------------------------------------- */

static void expect(rank_out_t *o, coll_status_t got, coll_status_t want,
                   const char *part, const char *what) {
  if (got != want || strstr(coll_last_error(), part) == NULL)
    fail_out(o, got == COLL_OK ? COLL_ERR_INTERNAL : got,
             "%s: expected %s naming \"%s\": %s: %s", what,
             coll_status_name(want), part, coll_status_name(got),
             coll_last_error());
}

static void kill_case(const job_t *j, coll_comm_t *c, int rank, rank_out_t *o) {
  int32_t x[64] = {0};
  coll_status_t s;
  /* Not before every comm stands: creation's own exchange (the segment
   * agreement, cpu_comm.c) may still be reading from rank 0, and a rank
   * killed with bytes unread sends a reset that loses what it sent. */
  for (int r = 1; rank == 0 && r < WORLD; r++)
    for (int ms = 0; ms < 30000 && !atomic_load(&j->out[r].ready); ms += 5)
      test_sleep_ms(5);
  if (rank == 0) raise(SIGKILL);
  if (rank == 3) return; /* its TCP to rank 0 is not this case's */
  s = coll_recv(c, x, 64, COLL_I32, 0, TAG, NULL);
  expect(o, s, COLL_ERR_PEER_LOST, "rank 0", "recv from the dead rank");
  if (rank != 2) return;
  /* The comm is broken now, for the failure that started at rank 0. */
  s = coll_allreduce(c, x, x, 64, COLL_I32, COLL_SUM, NULL);
  expect(o, s, COLL_ERR_PEER_LOST, "rank 0", "the collective after");
}

/* Every rank keeps its comm until the others finished their case (a comm
 * destroyed on any rank fails the work still pending with it on every
 * rank); the rank killed on purpose is not waited for. */
static void stay(const job_t *j) {
  for (int r = 0; r < WORLD; r++)
    for (int ms = 0; ms < 30000 && !(j->kase == CASE_KILL && r == 0) &&
                     !atomic_load(&j->out[r].done);
         ms += 5)
      test_sleep_ms(5);
}

static void timeout_case(coll_comm_t *c, int rank, rank_out_t *o) {
  int32_t x[64] = {0};
  int64_t t0 = coll__now_ms();
  coll_status_t s;
  if (rank != 2) return; /* rank 0 stays alive, but never sends */
  s = coll_recv(c, x, 64, COLL_I32, 0, TAG, NULL);
  o->took_ms = coll__now_ms() - t0;
  expect(o, s, COLL_ERR_TIMEOUT, "recv from rank 0", "recv");
}

typedef struct aborter {
  coll_abort_handle_t *h;
} aborter_t;

static void *abort_later(void *p) {
  aborter_t *a = p;
  test_sleep_ms(300);
  coll_abort(a->h);
  return NULL;
}

static void abort_case(coll_comm_t *c, int rank, rank_out_t *o) {
  int32_t x[64] = {0};
  aborter_t a = {NULL};
  pthread_t th;
  int64_t t0;
  coll_status_t s;
  if (rank != 2) return;
  if (coll_comm_abort_handle(c, &a.h) != COLL_OK ||
      pthread_create(&th, NULL, abort_later, &a) != 0) {
    fail_out(o, COLL_ERR_INTERNAL, "abort handle: %s", coll_last_error());
    coll_abort_handle_release(a.h);
    return;
  }
  t0 = coll__now_ms();
  s = coll_recv(c, x, 64, COLL_I32, 0, TAG, NULL);
  o->took_ms = coll__now_ms() - t0;
  pthread_join(th, NULL);
  coll_abort_handle_release(a.h);
  expect(o, s, COLL_ERR_ABORTED, "abort", "recv");
}

/* ---- the ranks ------------------------------------------------------ */

static int rank_main(void *p) {
  job_t *j = p;
  rank_out_t *o = &j->out[j->rank];
  coll_comm_t *c = NULL;
  coll_status_t s;
  bt_launch_env(j->rank, WORLD, j->port);
  unsetenv("COLL_TRANSPORT");
  setenv("COLL_ALGO", "ring", 1); /* the flat ring, in host order */
  setenv("COLL_LINK_PROBE", "0", 1);
  setenv("COLL_TIMEOUT_MS", j->kase == CASE_TIMEOUT ? "1500" : "20000", 1);
  coll__host_id_test_hook =
      (coll_host_id_test_hook_t){-1, NULL, k_hosts, WORLD};
  coll__t_send_test_hook = count_send;
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fail_out(o, s, "init: %s", coll_last_error());
    atomic_store(&o->done, 1);
    return 0;
  }
  atomic_store(&o->ready, 1);
  if (coll__route_host(((coll_cpu_t *)c->be)->t) == NULL) {
    fail_out(o, COLL_OK, "no host endpoint");
  } else {
    /* Only the cases' bytes count, not the setup's. */
    atomic_store(&g_local_shm, 0);
    atomic_store(&g_local_tcp, 0);
    atomic_store(&g_remote_shm, 0);
    switch (j->kase) {
      case CASE_COLLS: colls(c, j->rank, o); break;
      case CASE_CYCLE: cycle(c, j->rank, o); break;
      case CASE_KILL: kill_case(j, c, j->rank, o); break;
      case CASE_TIMEOUT: timeout_case(c, j->rank, o); break;
      default: abort_case(c, j->rank, o); break;
    }
  }
  atomic_store(&o->done, 1);
  stay(j);
  coll_comm_destroy(c);
  return 0;
}

/* ---- the test process ----------------------------------------------- */

static rank_out_t *run_job(int kase, int *st) {
  pid_t pids[WORLD];
  job_t j = {bt_free_port("127.0.0.1"), 0, kase, NULL};
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

static void test_colls(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_COLLS, st);
  expect_ok(-1, out, st);
  for (int r = 0; r < WORLD; r++) assert_int_equal(out[r].checked, 5);
  munmap(out, sizeof *out * WORLD);
}

static void test_cycle(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_CYCLE, st);
  expect_ok(-1, out, st);
  munmap(out, sizeof *out * WORLD);
}

static void test_kill(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_KILL, st);
  expect_ok(0, out, st);
  munmap(out, sizeof *out * WORLD);
}

static void test_timeout(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_TIMEOUT, st);
  expect_ok(-1, out, st);
  /* The comm's timeout (1.5 s), not the test's bound. */
  assert_true(out[2].took_ms >= 1400 && out[2].took_ms < 10000);
  munmap(out, sizeof *out * WORLD);
}

static void test_abort(void **state) {
  int st[WORLD];
  rank_out_t *out;
  (void)state;
  out = run_job(CASE_ABORT, st);
  expect_ok(-1, out, st);
  /* The abort at 300 ms ended it, not the comm's timeout (20 s). */
  assert_true(out[2].took_ms < 10000);
  munmap(out, sizeof *out * WORLD);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_colls), cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_kill),  cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_abort),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
