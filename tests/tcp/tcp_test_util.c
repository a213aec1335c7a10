/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_test_util.c: file rendezvous, forked ranks with bounded waits, and a
 * raw wire speaker for the TCP transport tests. */
#include "tcp_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/tcp_hs.h"
#include "transport/tcp/tcp_sock.h"

int64_t tt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tt_sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int tt_job_init(tt_job_t *job, const char *ip, const char *token) {
  static int seq;
  memset(job, 0, sizeof *job);
  snprintf(job->dir, sizeof job->dir, "/tmp/coll-tcp-test-XXXXXX");
  if (mkdtemp(job->dir) == NULL) return -1;
  job->ip = ip;
  job->token = token;
  snprintf(job->job_id, sizeof job->job_id, "test:%s:%d", job->dir, seq++);
  job->timeout_ms = 20000;
  coll__tcp_xopts_default(&job->x);
  job->sh = mmap(NULL, sizeof *job->sh, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (job->sh == MAP_FAILED) return -1;
  memset(job->sh, 0, sizeof *job->sh);
  return 0;
}

void tt_job_fini(tt_job_t *job) {
  DIR *d = opendir(job->dir);
  struct dirent *e;
  char path[512];
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", job->dir, e->d_name);
    unlink(path);
  }
  if (d != NULL) closedir(d);
  rmdir(job->dir);
  if (job->sh != NULL) munmap(job->sh, sizeof *job->sh);
  job->sh = NULL;
}

static coll_status_t rdv_publish(void *ctx, int rank, const char *addr) {
  tt_job_t *job = ctx;
  char tmp[512], path[512];
  FILE *f;
  snprintf(tmp, sizeof tmp, "%s/.rank.%d.%d", job->dir, rank, (int)getpid());
  snprintf(path, sizeof path, "%s/rank.%d", job->dir, rank);
  f = fopen(tmp, "w");
  if (f == NULL || fputs(addr, f) < 0 || fclose(f) != 0)
    return coll_set_last_error(COLL_ERR_SYSTEM, "test rdv: cannot write %s",
                               tmp);
  if (rename(tmp, path) != 0)
    return coll_set_last_error(COLL_ERR_SYSTEM, "test rdv: rename %s", path);
  return COLL_OK;
}

static int read_addr(tt_job_t *job, int rank, char *addr, size_t cap) {
  char path[512];
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "%s/rank.%d", job->dir, rank);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  n = fread(addr, 1, cap - 1, f);
  fclose(f);
  addr[n] = '\0';
  return n > 0 ? 0 : -1;
}

int tt_lookup(tt_job_t *job, int rank, char *addr, size_t cap,
              int64_t timeout_ms) {
  int64_t end = tt_now_ms() + timeout_ms;
  while (read_addr(job, rank, addr, cap) != 0) {
    if (tt_now_ms() >= end) return -1;
    tt_sleep_ms(2);
  }
  return 0;
}

static coll_status_t rdv_lookup(void *ctx, int rank, char *addr, size_t cap,
                                int64_t deadline_ms) {
  tt_job_t *job = ctx;
  /* The transport's deadlines are on uv_hrtime; so is CLOCK_MONOTONIC. */
  int64_t left = deadline_ms < 0 ? 3600000 : deadline_ms - tt_now_ms();
  if (tt_lookup(job, rank, addr, cap, left > 0 ? left : 0) != 0)
    return coll_set_last_error(COLL_ERR_TIMEOUT,
                               "test rdv: rank %d never published", rank);
  return COLL_OK;
}

coll_tcp_rdv_t tt_rdv(tt_job_t *job) {
  coll_tcp_rdv_t r = {job, rdv_publish, rdv_lookup};
  return r;
}

coll_status_t tt_create(tt_job_t *job, int rank, int world,
                        coll_transport_t **out) {
  coll_tcp_opts_t o;
  coll_tcp_rdv_t rdv = tt_rdv(job);
  o.rank = rank;
  o.world = world;
  o.bind_ip = job->ip;
  o.job_id = job->job_id;
  o.token = job->token;
  o.timeout_ms = job->timeout_ms;
  return coll__tcp_transport_create_x(&o, &rdv, &job->x, out);
}

void tt_note(tt_job_t *job, int rank, coll_status_t s, const char *text) {
  job->sh->status[rank] = (int)s;
  snprintf(job->sh->text[rank], TT_TEXT, "%s", text ? text : "");
}

static pid_t fork_one(tt_job_t *job, int rank, int world, tt_rank_fn fn,
                      void *arg) {
  pid_t pid;
  fflush(NULL);
  pid = fork();
  if (pid == 0) {
    int code = fn(job, rank, world, arg);
    fflush(NULL);
    exit(code); /* exit, not _exit: leak checkers run at exit */
  }
  return pid;
}

void tt_spawn(tt_job_t *job, int world, tt_rank_fn fn, void *arg, pid_t *pids) {
  int r;
  for (r = 0; r < world; r++) pids[r] = fork_one(job, r, world, fn, arg);
}

pid_t tt_spawn_helper(tt_job_t *job, tt_rank_fn fn, void *arg) {
  return fork_one(job, -1, 0, fn, arg);
}

int tt_wait(pid_t *pids, int n, int64_t timeout_ms, int *codes, char *msg,
            size_t cap) {
  int64_t end = tt_now_ms() + timeout_ms;
  int left = 0, i, bad = 0;
  for (i = 0; i < n; i++) {
    codes[i] = -1;
    if (pids[i] > 0) left++;
  }
  while (left > 0) {
    for (i = 0; i < n; i++) {
      int st;
      if (pids[i] <= 0 || codes[i] != -1) continue;
      if (waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (codes[i] != 0) bad++;
      left--;
    }
    if (left == 0) break;
    if (tt_now_ms() >= end) {
      size_t used = (size_t)snprintf(msg, cap,
                                     "HANG: still running after "
                                     "%lld ms:",
                                     (long long)timeout_ms);
      for (i = 0; i < n; i++) {
        if (pids[i] <= 0 || codes[i] != -1) continue;
        if (used < cap)
          used += (size_t)snprintf(msg + used, cap - used, " #%d", i);
        kill(pids[i], SIGCONT);
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
      }
      return -1;
    }
    tt_sleep_ms(2);
  }
  if (bad > 0) {
    size_t used = (size_t)snprintf(msg, cap, "exit codes:");
    for (i = 0; i < n && used < cap; i++)
      used += (size_t)snprintf(msg + used, cap - used, " %d", codes[i]);
  }
  return bad;
}

int tt_run(tt_job_t *job, int world, tt_rank_fn fn, void *arg,
           int64_t timeout_ms, char *msg, size_t cap) {
  pid_t pids[TT_MAX_RANKS];
  int codes[TT_MAX_RANKS];
  tt_spawn(job, world, fn, arg, pids);
  msg[0] = '\0';
  return tt_wait(pids, world, timeout_ms, codes, msg, cap) == 0 ? 0 : -1;
}

int tt_wait_ready(tt_job_t *job, int n, int64_t timeout_ms) {
  int64_t end = tt_now_ms() + timeout_ms;
  int r;
  for (r = 0; r < n; r++)
    while (!atomic_load(&job->sh->ready[r])) {
      if (tt_now_ms() >= end) return -1;
      tt_sleep_ms(2);
    }
  return 0;
}

/* 8 bytes per step of a 64-bit LCG, so big buffers are cheap to make and
 * check (also under sanitizers). */
static uint64_t fill_seed(int src, int dst, int seq) {
  return (uint64_t)(src * 131 + dst * 7 + seq * 1009 + 1) *
         0x9E3779B97F4A7C15ull;
}

void tt_fill(uint8_t *p, size_t n, int src, int dst, int seq) {
  uint64_t x = fill_seed(src, dst, seq);
  size_t i;
  for (i = 0; i + 8 <= n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    memcpy(p + i, &x, 8);
  }
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  if (i < n) memcpy(p + i, &x, n - i);
}

int tt_check(const uint8_t *p, size_t n, int src, int dst, int seq) {
  uint64_t x = fill_seed(src, dst, seq);
  size_t i;
  for (i = 0; i + 8 <= n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (memcmp(p + i, &x, 8) != 0) return 0;
  }
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  return i == n || memcmp(p + i, &x, n - i) == 0;
}

int tt_dial(const char *addr_text, int64_t timeout_ms) {
  struct sockaddr_storage ss;
  socklen_t len;
  int64_t end = tt_now_ms() + timeout_ms;
  if (coll__tcp_addr_parse(addr_text, &ss, &len) != COLL_OK) return -1;
  for (;;) {
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&ss, len) == 0) return fd;
    close(fd);
    if (tt_now_ms() >= end) return -1;
    tt_sleep_ms(10);
  }
}

int tt_send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

int tt_recv_all(int fd, void *p, size_t n, int64_t timeout_ms) {
  char *c = p;
  int64_t end = tt_now_ms() + timeout_ms;
  while (n > 0) {
    struct pollfd pf = {fd, POLLIN, 0};
    int64_t left = end - tt_now_ms();
    ssize_t k;
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0) return -1;
    k = recv(fd, c, n, 0);
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

int tt_handshake(int fd, int rank, int world, int peer, const char *job_id,
                 const char *token) {
  coll_tcp_hs_ctx_t ctx;
  uint8_t ch[COLL_TCP_CHALLENGE_BYTES], hello[COLL_TCP_HELLO_BYTES];
  uint8_t wel[COLL_TCP_WELCOME_BYTES], ns[COLL_TCP_NONCE_BYTES];
  uint8_t nc[COLL_TCP_NONCE_BYTES] = {1, 2, 3};
  char why[200];
  coll__tcp_hs_ctx_init(&ctx, rank, world, job_id, token);
  if (tt_recv_all(fd, ch, sizeof ch, 5000) != 0) return -1;
  if (coll__tcp_hs_check_challenge(&ctx, ch, peer, ns, why, sizeof why) !=
      COLL_OK)
    return -1;
  coll__tcp_hs_hello(&ctx, peer, ns, nc, hello);
  if (tt_send_all(fd, hello, sizeof hello) != 0) return -1;
  if (tt_recv_all(fd, wel, sizeof wel, 5000) != 0) return -1;
  return coll__tcp_hs_check_welcome(&ctx, wel, peer, ns, nc, why, sizeof why) ==
                 COLL_OK
             ? 0
             : -2;
}

int tt_have_ipv6(void) {
  int fd = -1;
  char addr[COLL_TCP_ADDR_MAX];
  if (coll__tcp_listen("::1", 1, 0, &fd, addr, sizeof addr) != COLL_OK)
    return 0;
  close(fd);
  return 1;
}

int tt_failed(tt_job_t *job, int rank, const char *what, coll_status_t s) {
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(s),
          coll_last_error());
  tt_note(job, rank, s, coll_last_error());
  return 1;
}

tt_rx_fixture_t *tt_rx_fixture_new(size_t frame_cap) {
  tt_rx_fixture_t *f = calloc(1, sizeof *f);
  int sv[2], i;
  if (f == NULL) return NULL;
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    free(f);
    return NULL;
  }
  f->t.rank = 0;
  f->t.world = 2;
  coll__tcp_xopts_default(&f->t.x);
  f->t.x.frame_cap = frame_cap;
  f->t.conns = f->conns;
  f->t.wake_fd = -1;
  atomic_init(&f->t.drivers, 0);
  for (i = 0; i < 2; i++) {
    f->conns[i].t = &f->t;
    f->conns[i].peer = i;
    f->conns[i].fd = -1;
    uv_mutex_init(&f->conns[i].rmu);
    uv_mutex_init(&f->conns[i].smu);
  }
  f->c = &f->conns[1];
  f->c->fd = sv[0];
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  f->peer = sv[1];
  return f;
}

void tt_rx_fixture_free(tt_rx_fixture_t *f) {
  int i;
  for (i = 0; i < 2; i++) {
    coll__tcp_rx_free(&f->conns[i]);
    uv_mutex_destroy(&f->conns[i].rmu);
    uv_mutex_destroy(&f->conns[i].smu);
  }
  close(f->c->fd);
  if (f->peer >= 0) close(f->peer);
  free(f);
}
