/* SPDX-License-Identifier: Apache-2.0 */
/* boot_test.c: free ports, raw store sockets and bounded child processes
 * for the bootstrap tests. */
#include "boot_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include "reduce/half.h"
#include "reduce/reduce.h"
#include "test_util.h"

int bt_store_setup(void **state) {
  bt_store_t *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  if (coll__store_server_start("127.0.0.1", 0, NULL, &f->srv) != COLL_OK) {
    fprintf(stderr, "store server start: %s\n", coll_last_error());
    free(f);
    return -1;
  }
  f->port = coll__store_server_port(f->srv);
  *state = f;
  return 0;
}

int bt_store_teardown(void **state) {
  bt_store_t *f = *state;
  coll__store_server_stop(f->srv);
  free(f);
  return 0;
}

coll_store_t *bt_client(const bt_store_t *f) {
  coll_store_t *st = NULL;
  if (coll__store_connect("127.0.0.1", f->port, NULL, 10000, &st) != COLL_OK)
    return NULL;
  return st;
}

static socklen_t fill_addr(const char *ip, int port,
                           struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (strchr(ip, ':') != NULL) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    return sizeof *a;
  }
  struct sockaddr_in *a = (struct sockaddr_in *)ss;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, ip, &a->sin_addr);
  return sizeof *a;
}

int bt_free_port(const char *ip) {
  struct sockaddr_storage ss;
  socklen_t len = fill_addr(ip, 0, &ss);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0), port = -1;
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
      getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
    port = ntohs(ss.ss_family == AF_INET
                     ? ((struct sockaddr_in *)&ss)->sin_port
                     : ((struct sockaddr_in6 *)&ss)->sin6_port);
  close(fd);
  return port;
}

int bt_dead_port(const char *ip, int *fd_out) {
  struct sockaddr_storage ss;
  socklen_t len = fill_addr(ip, 0, &ss);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0), port = -1;
  *fd_out = -1;
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
      getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
    port = ntohs(ss.ss_family == AF_INET
                     ? ((struct sockaddr_in *)&ss)->sin_port
                     : ((struct sockaddr_in6 *)&ss)->sin6_port);
  if (port < 0) {
    close(fd);
    return -1;
  }
  *fd_out = fd;
  return port;
}

int bt_raw_connect(const char *ip, int port) {
  struct sockaddr_storage ss;
  socklen_t len = fill_addr(ip, port, &ss);
  struct timeval tv = {5, 0};
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int bt_send(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int recv_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

int bt_read_reply(int fd, coll_store_hdr_t *h, char *body, size_t cap) {
  uint8_t b[COLL_STORE_HDR_BYTES];
  char tmp[512];
  size_t left;
  if (recv_all(fd, b, sizeof b) != 0) return -1;
  coll__store_hdr_decode(b, h);
  left = h->body_len;
  if (body != NULL && cap > 0) body[0] = '\0';
  while (left > 0) {
    size_t n = left < sizeof tmp ? left : sizeof tmp;
    if (recv_all(fd, tmp, n) != 0) return -1;
    if (body != NULL && left == h->body_len && cap > 1) {
      size_t k = n < cap - 1 ? n : cap - 1;
      memcpy(body, tmp, k);
      body[k] = '\0';
    }
    left -= n;
  }
  return h->code;
}

int bt_raw_hello(int fd) {
  coll_store_hdr_t h;
  uint8_t b[COLL_STORE_HDR_BYTES + 64];
  if (bt_read_reply(fd, &h, NULL, 0) != COLL_STORE_OP_HELLO) return -1;
  h = coll__store_hdr(COLL_STORE_OP_HELLO, 0, 64, 0);
  coll__store_hdr_encode(b, &h);
  memset(b + COLL_STORE_HDR_BYTES, 0, 64); /* nonce and an all-zero MAC */
  if (bt_send(fd, b, sizeof b) != 0) return -1;
  return bt_read_reply(fd, &h, NULL, 0) == COLL_STORE_ST_OK ? 0 : -1;
}

int bt_closed_within(int fd, int64_t timeout_ms) {
  int64_t end = test_now_ms() + timeout_ms;
  char tmp[256];
  for (;;) {
    int64_t left = end - test_now_ms();
    struct pollfd p = {fd, POLLIN, 0};
    if (left <= 0) return 0;
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return 1;
  }
}

pid_t bt_fork(int (*fn)(void *), void *arg) {
  pid_t pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid == 0) _exit(fn(arg));
  return pid;
}

int bt_wait_child(pid_t pid, int64_t timeout_ms) {
  int64_t end = test_now_ms() + timeout_ms;
  int st;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0) return -1;
    if (test_now_ms() > end) {
      fprintf(stderr, "HANG: child %d still running after %lld ms; killed\n",
              (int)pid, (long long)timeout_ms);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    test_sleep_ms(5);
  }
}

void bt_expect_same_failure(const coll_status_t *s,
                            const char (*why)[COLL_ERRMSG_MAX],
                            const int *ranks, int n, coll_status_t want) {
  int k;
  for (k = 0; k < n; k++) {
    int r = ranks[k];
    if (s[r] != want)
      fail_msg("rank %d: %s, expected %s: %s", r, coll_status_name(s[r]),
               coll_status_name(want), why[r]);
    if (strcmp(why[r], why[ranks[0]]) != 0)
      fail_msg("rank %d and rank %d differ:\n  %s\n  %s", ranks[0], r,
               why[ranks[0]], why[r]);
  }
  printf("every rank: %s\n", why[ranks[0]]);
}

void bt_must_contain(const char *text, const char *part) {
  if (strstr(text, part) == NULL) fail_msg("'%s' is not in: %s", part, text);
}

void bt_must_not_contain(const char *text, const char *part) {
  if (strstr(text, part) != NULL) fail_msg("'%s' is in: %s", part, text);
}

/* ---- values for the shared-memory tests --------------------------------- */

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* Seed r's element i: floats of magnitudes that differ by rank (so the
 * order of the sum shows in the bits), near 1 for PROD; small integers for
 * an integer PROD, so that it neither overflows nor is always 0. */
void bt_fill_values(void *buf, coll_dtype_t dt, coll_op_t op, int r, size_t n) {
  static const float mag[4] = {1.0f, 1000.0f, 0.001f, 7.0f};
  for (size_t i = 0; i < n; i++) {
    uint32_t h = mix((uint32_t)i * 2654435761u + (uint32_t)r * 40503u + 1u);
    float f = ((float)(h % 2000001u) / 1000000.0f - 1.0f);
    float v = op == COLL_PROD ? 1.0f + f / 4.0f : f * mag[r % 4];
    int64_t k =
        op == COLL_PROD ? (int64_t)(h % 5u) - 2 : (int64_t)(h % 2001u) - 1000;
    switch (dt) {
      case COLL_F16: ((uint16_t *)buf)[i] = coll__f2h(v / 16.0f); break;
      case COLL_BF16: ((uint16_t *)buf)[i] = coll__f2bf(v); break;
      case COLL_F32: ((float *)buf)[i] = v; break;
      case COLL_F64: ((double *)buf)[i] = (double)v * (1.0 + 1e-9 * r); break;
      case COLL_I8:
        ((int8_t *)buf)[i] =
            (int8_t)(op == COLL_PROD ? k : (int64_t)(h % 255u) - 127);
        break;
      case COLL_U8:
        ((uint8_t *)buf)[i] =
            (uint8_t)(op == COLL_PROD ? (uint64_t)(h % 3u) : h % 256u);
        break;
      case COLL_I32: ((int32_t *)buf)[i] = (int32_t)k; break;
      case COLL_I64: ((int64_t *)buf)[i] = k * 1000003; break;
      default: break;
    }
  }
}

/* What a rank must hold: block `block` of every rank's values (seed
 * r + 4 * block for rank r: bt_fill_values) combined in rank order with
 * the scalar kernel, in the dtype the CPU backend works in (8-bit SUM and
 * AVG widened), then finished as the backend does (narrowed, scaled). */
int bt_reference(void *want, coll_dtype_t dt, coll_op_t op, int world,
                 int block, size_t n) {
  int wide =
      (dt == COLL_I8 || dt == COLL_U8) && (op == COLL_SUM || op == COLL_AVG);
  coll_dtype_t wdt = wide ? COLL_I32 : dt;
  coll_op_t aop = op == COLL_AVG ? COLL_SUM : op;
  size_t es = coll_dtype_size(dt), wes = coll_dtype_size(wdt);
  coll_reduce_fn_t fn = coll__reduce_fn_scalar(wdt, aop);
  char *acc = malloc(n * wes + 1), *in = malloc(n * es + 1);
  char *win = malloc(n * wes + 1);
  if (fn == NULL || acc == NULL || in == NULL || win == NULL) {
    free(acc);
    free(in);
    free(win);
    return -1;
  }
  for (int r = 0; r < world; r++) {
    bt_fill_values(in, dt, op, r + 4 * block, n);
    if (wide)
      coll__widen_8bit(dt, (int32_t *)win, in, n);
    else
      memcpy(win, in, n * es);
    if (r == 0)
      memcpy(acc, win, n * wes);
    else
      fn(acc, win, n);
  }
  if (wide)
    coll__narrow_8bit(dt, op, want, (const int32_t *)acc, n, world);
  else if (op != COLL_AVG ||
           coll__scale_copy(dt, want, acc, n, 1.0 / world) != 0) {
    memcpy(want, acc, n * es);
    if (op == COLL_AVG) coll__int_div(dt, want, n, world);
  }
  free(acc);
  free(in);
  free(win);
  return 0;
}

void bt_fail_out(int *status, char *msg, size_t cap, coll_status_t s,
                 const char *fmt, ...) {
  va_list ap;
  if (*status != 0) return;
  *status = s == COLL_OK ? -1 : (int)s;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
}

void bt_launch_env(int rank, int world, int port) {
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  snprintf(v, sizeof v, "%d", world);
  setenv("WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", port);
  setenv("MASTER_PORT", v, 1);
  setenv("COLL_BACKEND", "cpu", 1);
}

coll_status_t bt_tcp_setup(int rank, int world, int port, const char *job,
                           int64_t timeout_ms, char *why, size_t cap) {
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  char token[64];
  coll_status_t s;
  snprintf(token, sizeof token, "%s-token", job);
  cfg.rank = rank;
  cfg.world = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.job_id = job;
  cfg.timeout_ms = timeout_ms;
  cfg.auth_token = token;
  s = coll_tcp_create(&cfg, &t);
  snprintf(why, cap, "%s", coll_last_error());
  if (t != NULL) coll_transport_destroy(t);
  return s;
}
