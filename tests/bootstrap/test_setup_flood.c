/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_flood.c: a 4-rank coll_tcp_create (threads over 127.0.0.1)
 * while 1000 idle connections and 50 that send half a header and stall are
 * held on the rendezvous store and on the listeners of ranks 0, 1 and 2
 * (rank 3 expects no incoming connection, so its listener is never read).
 * The store is flooded before ranks 1-3 connect to it; the listeners are
 * flooded after every rank published its address and before rank 3 dials
 * (a test hook holds rank 3 back), so rank 3's three connections meet the
 * flood. Setup must succeed and an allreduce must be right. The test also
 * runs the same job without the flood and prints both setup times, the
 * figure for how much a flood delays setup (printed, not asserted). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "core/le.h"
#include "test_util.h"
#include "transport/tcp/tcp_sock.h"
#include "transport/tcp/wire.h"

#define WORLD 4
#define N_IDLE 1000
#define N_HALF 50
#define TARGETS 4 /* the store and the listeners of ranks 0, 1, 2 */
#define COUNT (1 << 18)
#define WAIT_MS 30000
#define TOKEN "flood-token"

typedef struct flood_job {
  int port;
  int flood;                  /* 0: the same job without the flood */
  atomic_int store_ready;     /* ranks 1-3 may start */
  atomic_int listeners_ready; /* rank 3 may dial */
  int64_t t_store_ready, t_listeners_ready;
  int64_t t_joined[WORLD], t_done[WORLD];
  coll_status_t s[WORLD];
  char why[WORLD][COLL_ERRMSG_MAX];
  int wrong[WORLD];
  int *fds, nfds;
  int connected; /* flood connections whose connect completed */
  char flood_err[256];
} flood_job_t;

static flood_job_t *cur; /* for the phase hook */

/* Waits (bounded) for a flag; 0 when it was set. */
static int wait_flag(atomic_int *flag) {
  int64_t end = test_now_ms() + WAIT_MS;
  while (!atomic_load(flag))
    if (test_now_ms() > end)
      return -1;
    else
      test_sleep_ms(1);
  return 0;
}

static void on_phase(int rank, const char *phase) {
  if (strcmp(phase, "joined") != 0) return;
  cur->t_joined[rank] = test_now_ms();
  if (rank == 3) (void)wait_flag(&cur->listeners_ready);
}

static void rank_main(int rank, int world, void *arg) {
  flood_job_t *j = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  coll_comm_t *c = NULL;
  float *x = malloc(COUNT * sizeof *x);
  int i;
  if (rank > 0 && wait_flag(&j->store_ready) != 0) {
    j->s[rank] = COLL_ERR_TIMEOUT;
    snprintf(j->why[rank], sizeof j->why[rank], "the store flood never came");
    free(x);
    return;
  }
  cfg.rank = rank;
  cfg.world = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = j->port;
  cfg.timeout_ms = 20000;
  cfg.auth_token = TOKEN;
  j->s[rank] = coll_tcp_create(&cfg, &t);
  j->t_done[rank] = test_now_ms();
  if (j->s[rank] == COLL_OK) j->s[rank] = coll_comm_create(t, NULL, &c);
  if (j->s[rank] == COLL_OK && x != NULL) {
    /* Small integers: every sum is exact in f32, in any order. */
    for (i = 0; i < COUNT; i++) x[i] = (float)(rank + (i & 255));
    j->s[rank] = coll_allreduce(c, x, x, COUNT, COLL_F32, COLL_SUM, NULL);
    for (i = 0; j->s[rank] == COLL_OK && i < COUNT; i++)
      if (x[i] != (float)(6 + 4 * (i & 255))) j->wrong[rank]++;
  }
  if (j->s[rank] != COLL_OK)
    snprintf(j->why[rank], sizeof j->why[rank], "%s", coll_last_error());
  free(x);
  coll_comm_destroy(c);
}

/* One nonblocking connect to ss; the fd, or -1. */
static int dial(const struct sockaddr_storage *ss, socklen_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)ss, len) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Holds N_IDLE silent connections and N_HALF that send `half` (the first
 * bytes of a header) and stall, on the listener at `addr`. */
static int flood(flood_job_t *j, const char *addr, const uint8_t *half,
                 size_t nhalf) {
  struct sockaddr_storage ss;
  socklen_t len;
  int64_t end = test_now_ms() + WAIT_MS;
  int k;
  if (coll__tcp_addr_parse(addr, &ss, &len) != COLL_OK) return -1;
  for (k = 0; k < N_IDLE + N_HALF; k++) {
    struct pollfd pf;
    int fd;
    if (test_now_ms() > end) {
      snprintf(j->flood_err, sizeof j->flood_err,
               "flooding %s took over %d ms (connects not accepted?)", addr,
               WAIT_MS);
      return -1;
    }
    fd = dial(&ss, len);
    if (fd < 0) {
      snprintf(j->flood_err, sizeof j->flood_err, "connect to %s: %s", addr,
               strerror(errno));
      return -1;
    }
    j->fds[j->nfds++] = fd;
    pf = (struct pollfd){fd, POLLOUT, 0};
    if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT)) j->connected++;
    if (k >= N_IDLE) {
      pf.revents = 0;
      if (poll(&pf, 1, 2000) == 1 && (pf.revents & POLLOUT))
        (void)send(fd, half, nhalf, MSG_NOSIGNAL);
    }
  }
  return 0;
}

static void *flooder(void *arg) {
  flood_job_t *j = arg;
  uint8_t store_half[10], tcp_half[10];
  coll_store_t *st = NULL;
  char addr[COLL_TCP_ADDR_MAX], key[16], here[64];
  int64_t end = test_now_ms() + WAIT_MS;
  int r, fd = -1;
  memset(store_half, 0, sizeof store_half);
  coll__put_le32(store_half, COLL_STORE_MAGIC);
  store_half[4] = COLL_STORE_VERSION;
  store_half[5] = COLL_STORE_OP_HELLO;
  memset(tcp_half, 0, sizeof tcp_half);
  coll__put_le32(tcp_half, COLL_TCP_MAGIC);
  coll__put_le16(tcp_half + 4, COLL_TCP_WIRE_VERSION);
  tcp_half[6] = COLL_TCP_K_HELLO;
  /* Rank 0 serves the store: wait until it listens. */
  while (fd < 0 && test_now_ms() < end)
    if ((fd = bt_raw_connect("127.0.0.1", j->port)) < 0) test_sleep_ms(5);
  if (fd < 0) {
    snprintf(j->flood_err, sizeof j->flood_err, "the store never listened");
    goto out;
  }
  j->fds[j->nfds++] = fd;
  snprintf(here, sizeof here, "127.0.0.1:%d", j->port);
  if (j->flood && flood(j, here, store_half, sizeof store_half) != 0) goto out;
  j->t_store_ready = test_now_ms();
  atomic_store(&j->store_ready, 1);
  /* Every rank publishes addr/<r> once all joined. */
  if (coll__store_connect("127.0.0.1", j->port, TOKEN, WAIT_MS, &st) !=
      COLL_OK) {
    snprintf(j->flood_err, sizeof j->flood_err, "store client: %s",
             coll_last_error());
    goto out;
  }
  for (r = 0; r < 3; r++) {
    size_t len = 0;
    snprintf(key, sizeof key, "addr/%d", r);
    if (coll__store_get(st, key, addr, sizeof addr - 1, &len, WAIT_MS) !=
        COLL_OK) {
      snprintf(j->flood_err, sizeof j->flood_err, "%s", coll_last_error());
      goto out;
    }
    addr[len] = '\0';
    if (j->flood && flood(j, addr, tcp_half, sizeof tcp_half) != 0) goto out;
  }
out:
  coll__store_close(st);
  j->t_listeners_ready = test_now_ms();
  /* Released even after a failure, so the ranks end (and fail). */
  atomic_store(&j->store_ready, 1);
  atomic_store(&j->listeners_ready, 1);
  return NULL;
}

static int64_t max_of(const int64_t *t, int from, int to) {
  int64_t m = t[from];
  int r;
  for (r = from + 1; r < to; r++)
    if (t[r] > m) m = t[r];
  return m;
}

/* Runs the job (with or without the flood); returns the two setup phases
 * in ms: the rendezvous after the store flood, and the mesh and outcome
 * after the listener flood. */
static void run_job(int with_flood, int64_t *rdv_ms, int64_t *mesh_ms) {
  flood_job_t *j = calloc(1, sizeof *j);
  pthread_t th;
  int r;
  assert_non_null(j);
  j->fds = calloc(TARGETS * (N_IDLE + N_HALF) + 1, sizeof *j->fds);
  assert_non_null(j->fds);
  j->port = bt_free_port("127.0.0.1");
  assert_true(j->port > 0);
  j->flood = with_flood;
  cur = j;
  coll__rdv_test_hooks.phase = on_phase;
  assert_int_equal(pthread_create(&th, NULL, flooder, j), 0);
  test_run_ranks(WORLD, rank_main, j, 120000, "setup under a flood");
  pthread_join(th, NULL); /* bounded: every wait in it is */
  coll__rdv_test_hooks.phase = NULL;
  for (r = 0; r < j->nfds; r++) close(j->fds[r]);
  if (j->flood_err[0] != '\0') fail_msg("flooder: %s", j->flood_err);
  for (r = 0; r < WORLD; r++) {
    if (j->s[r] != COLL_OK) fail_msg("rank %d: %s", r, j->why[r]);
    assert_int_equal(j->wrong[r], 0);
  }
  if (with_flood)
    printf("flood: %d connections held (%d had connected at once)\n",
           j->nfds - 1, j->connected);
  *rdv_ms = max_of(j->t_joined, 0, WORLD) - j->t_store_ready;
  *mesh_ms = max_of(j->t_done, 0, WORLD) - j->t_listeners_ready;
  free(j->fds);
  free(j);
}

/* The flood needs about 2 * TARGETS * (N_IDLE + N_HALF) descriptors in
 * this process (both ends of every connection live here). */
static int raise_fd_limit(void) {
  struct rlimit rl;
  rlim_t need = 2 * TARGETS * (N_IDLE + N_HALF) + 512;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  if (rl.rlim_cur < need) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need * 2
                      ? need * 2
                      : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  }
  if (rl.rlim_cur < need) {
    printf("SKIP: the fd limit is %llu (hard %llu); this test needs %llu\n",
           (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
           (unsigned long long)need);
    return -1;
  }
  return 0;
}

static void test_setup_under_flood(void **state) {
  int64_t rdv0, mesh0, rdv1, mesh1;
  (void)state;
  if (raise_fd_limit() != 0) skip();
  run_job(0, &rdv0, &mesh0);
  run_job(1, &rdv1, &mesh1);
  printf(
      "setup without a flood: rendezvous %lld ms, mesh and outcome %lld "
      "ms\n",
      (long long)rdv0, (long long)mesh0);
  printf(
      "setup with %d idle + %d half-header connections on the store and "
      "on each listener: rendezvous %lld ms, mesh and outcome %lld ms "
      "(delay %lld ms)\n",
      N_IDLE, N_HALF, (long long)rdv1, (long long)mesh1,
      (long long)(rdv1 + mesh1 - rdv0 - mesh0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_setup_under_flood),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
