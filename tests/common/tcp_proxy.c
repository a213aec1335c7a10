/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy.c: the proxy's thread (one poll() loop over its listening
 * socket, a wake pipe and every accepted connection), the commands tests
 * send it, and the connections' lives: accept, dial the target, forward,
 * pass a close on, reset. Faults on the bytes are in tcp_proxy_flow.c. */
#include "tcp_proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp_proxy_flow.h"
#include "transport/tcp/tcp_sock.h"

#define LINKS_MAX 8
/* How long a command, or a dial of the target, may take. */
#define CMD_WAIT_MS 5000
#define DIAL_MS 2000
/* The loop wakes at least this often, so nothing waits on a lost wakeup. */
#define TICK_MS 100

enum {
  CMD_TARGET = 1,
  CMD_PASS,
  CMD_DELAY,
  CMD_STALL,
  CMD_RESET,
  CMD_CORRUPT,
  CMD_HOLD,
  CMD_STATS,
  CMD_STOP,
};

typedef struct cmd {
  int op;
  tcp_proxy_dir_t dir;
  int64_t ms;
  tcp_proxy_at_t at;
  size_t off, n;
  struct sockaddr_storage ss;
  socklen_t len;
  tcp_proxy_stats_t st; /* CMD_STATS: the answer */
} cmd_t;

/* One accepted connection: fd[0] faces the connector, fd[1] the acceptor.
 * flow[UP] goes fd[0] -> fd[1], flow[DOWN] fd[1] -> fd[0]. */
typedef struct link {
  int fd[2];
  flow_t flow[2];
  int shut[2]; /* the flow's end of stream was passed on */
  int cut[2];  /* the flow's source was reset: nothing more, no close */
  int used;
} link_t;

struct tcp_proxy {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int wake[2];
  int lfd;
  char addr[COLL_TCP_ADDR_MAX];
  /* Under mu: the one command in flight. */
  cmd_t cmd;
  uint64_t issued, done;
  /* The proxy thread's own (commands run on it, with mu held). */
  int stop;
  struct sockaddr_storage target;
  socklen_t tlen;
  int64_t delay[2];
  int stalled[2];
  int accepted;
  tcp_proxy_stats_t retired; /* the counters of links already freed */
  link_t links[LINKS_MAX];
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int src_fd(const link_t *l, int d) {
  return l->fd[d == TCP_PROXY_UP ? 0 : 1];
}
static int dst_fd(const link_t *l, int d) {
  return l->fd[d == TCP_PROXY_UP ? 1 : 0];
}

/* Closes so that the peer sees a reset, not an orderly end. */
static void close_rst(int fd) {
  struct linger lg = {1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

static void link_free(tcp_proxy_t *p, link_t *l) {
  int i;
  for (i = 0; i < 2; i++) {
    p->retired.fwd[i] += l->flow[i].fwd;
    p->retired.frames[i] += l->flow[i].frames;
    p->retired.flipped[i] += l->flow[i].flipped;
    if (l->fd[i] >= 0) close(l->fd[i]);
    l->fd[i] = -1;
    flow_free(&l->flow[i]);
  }
  l->used = 0;
}

/* A peer reset or broke: the other side learns it the same way. */
static void link_reset(tcp_proxy_t *p, link_t *l) {
  int i;
  for (i = 0; i < 2; i++) {
    if (l->fd[i] >= 0) close_rst(l->fd[i]);
    l->fd[i] = -1;
  }
  link_free(p, l);
}

/* ---- accepting and dialling --------------------------------------------- */

/* A blocking dial of the target, bounded by DIAL_MS. The fd or -1. */
static int dial(const tcp_proxy_t *p) {
  struct pollfd pf;
  int err = 0, fd = coll__tcp_socket(p->target.ss_family, 0);
  socklen_t elen = sizeof err;
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)&p->target, p->tlen) == 0) return fd;
  if (errno != EINPROGRESS) goto fail;
  pf.fd = fd;
  pf.events = POLLOUT;
  if (poll(&pf, 1, DIAL_MS) != 1) goto fail;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)
    goto fail;
  return fd;
fail:
  close(fd);
  return -1;
}

static void accept_all(tcp_proxy_t *p) {
  int one = 1;
  for (;;) {
    link_t *l = NULL;
    int i, cfd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (i = 0; i < LINKS_MAX && l == NULL; i++)
      if (!p->links[i].used) l = &p->links[i];
    /* No target yet, no room, no target listening: the connector sees a
     * reset and dials again, as it would a peer not up yet. */
    if (l == NULL || p->tlen == 0) {
      close_rst(cfd);
      continue;
    }
    memset(l, 0, sizeof *l);
    l->fd[0] = cfd;
    l->fd[1] = dial(p);
    l->used = 1;
    if (l->fd[1] < 0 ||
        flow_init(&l->flow[TCP_PROXY_UP], COLL_TCP_HELLO_BYTES) != 0 ||
        flow_init(&l->flow[TCP_PROXY_DOWN],
                  COLL_TCP_CHALLENGE_BYTES + COLL_TCP_WELCOME_BYTES) != 0) {
      if (l->fd[1] < 0) fprintf(stderr, "tcp_proxy: cannot dial the target\n");
      link_reset(p, l);
      continue;
    }
    p->accepted++;
  }
}

/* ---- forwarding ------------------------------------------------------- */

static void link_io(tcp_proxy_t *p, link_t *l, int64_t now) {
  int d;
  for (d = 0; d < 2 && l->used; d++) {
    flow_t *f = &l->flow[d];
    int src = src_fd(l, d), dst = dst_fd(l, d), r = 0;
    if (src >= 0 && !l->cut[d]) r = flow_read(f, src, now, p->delay[d]);
    if (r == 0 && dst >= 0) r = flow_write(f, dst, now, p->stalled[d]);
    if (r < 0) {
      link_reset(p, l);
      return;
    }
    /* A stalled direction holds the close too, as a cut network would. */
    if (f->eof && !l->cut[d] && !p->stalled[d] && f->fwd == f->in &&
        !l->shut[d] && dst >= 0) {
      shutdown(dst, SHUT_WR);
      l->shut[d] = 1;
    }
  }
  /* Both ends closed in order: done. After a reset the socket left open
   * stays so (silent) until the proxy stops. */
  if (l->used && l->shut[0] && l->shut[1] && !l->cut[0] && !l->cut[1])
    link_free(p, l);
}

/* Fills pfd for l's two sockets; -1 for a socket with nothing to wait for,
 * so a closed peer does not wake the loop over and over. */
static void link_events(link_t *l, struct pollfd *pfd, int64_t now,
                        const int *stalled) {
  int i, d;
  for (i = 0; i < 2; i++) {
    pfd[i].fd = -1;
    pfd[i].events = 0;
  }
  for (d = 0; d < 2; d++) {
    int s = d == TCP_PROXY_UP ? 0 : 1;
    if (l->fd[s] >= 0 && !l->cut[d] && flow_can_read(&l->flow[d]))
      pfd[s].events |= POLLIN;
    if (l->fd[1 - s] >= 0 && flow_can_write(&l->flow[d], now, stalled[d]))
      pfd[1 - s].events |= POLLOUT;
  }
  for (i = 0; i < 2; i++)
    if (pfd[i].events != 0) pfd[i].fd = l->fd[i];
}

/* ---- commands --------------------------------------------------------- */

static void stats_fill(const tcp_proxy_t *p, tcp_proxy_stats_t *st) {
  int i, d;
  *st = p->retired;
  st->links = p->accepted;
  for (i = 0; i < LINKS_MAX; i++) {
    const link_t *l = &p->links[i];
    if (!l->used) continue;
    st->open++;
    for (d = 0; d < 2; d++) {
      st->fwd[d] += l->flow[d].fwd;
      st->queued[d] += l->flow[d].in - l->flow[d].fwd;
      st->frames[d] += l->flow[d].frames;
      st->flipped[d] += l->flow[d].flipped;
      st->held[d] |= flow_held(&l->flow[d]);
    }
  }
}

/* Resets the socket toward d's receiver; d's queue is lost, and the other
 * direction (whose source that socket was) ends without a close. */
static void reset_dir(tcp_proxy_t *p, link_t *l, int d) {
  int s = d == TCP_PROXY_UP ? 1 : 0;
  if (l->fd[s] < 0) return;
  close_rst(l->fd[s]);
  l->fd[s] = -1;
  l->cut[1 - d] = 1;
  l->flow[d].fwd = l->flow[d].in;
  l->flow[d].head = l->flow[d].tail = 0;
  l->shut[d] = 1;
  if (l->fd[1 - s] < 0) link_free(p, l);
}

/* Runs the pending command; mu held, proxy thread. */
static void run_cmd(tcp_proxy_t *p) {
  cmd_t *c = &p->cmd;
  int i, d = c->dir;
  if (c->op == CMD_TARGET) {
    p->target = c->ss;
    p->tlen = c->len;
  } else if (c->op == CMD_PASS) {
    p->stalled[d] = 0;
    p->delay[d] = 0;
  } else if (c->op == CMD_DELAY) {
    p->delay[d] = c->ms;
  } else if (c->op == CMD_STALL) {
    p->stalled[d] = 1;
  } else if (c->op == CMD_STOP) {
    p->stop = 1;
  }
  for (i = 0; i < LINKS_MAX; i++) {
    link_t *l = &p->links[i];
    if (!l->used) continue;
    if (c->op == CMD_PASS) flow_clear(&l->flow[d]);
    if (c->op == CMD_HOLD) flow_hold(&l->flow[d]);
    if (c->op == CMD_CORRUPT) flow_corrupt(&l->flow[d], c->at, c->off, c->n);
    if (c->op == CMD_RESET) reset_dir(p, l, d);
  }
  if (c->op == CMD_STATS) stats_fill(p, &c->st);
}

static void deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Hands c to the proxy thread and waits until it ran. 0, or -1 when the
 * thread did not answer in time. */
static int send_cmd(tcp_proxy_t *p, cmd_t *c) {
  struct timespec dl;
  uint64_t mine;
  int rc = 0;
  char one = 1;
  deadline_in(&dl, CMD_WAIT_MS);
  pthread_mutex_lock(&p->mu);
  while (p->issued != p->done && rc == 0)
    rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
  if (rc == 0) {
    p->cmd = *c;
    mine = ++p->issued;
    if (write(p->wake[1], &one, 1) < 0) {
      /* The pipe is full of wakeups already: the thread will look. */
    }
    while (p->done < mine && rc == 0)
      rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    if (rc == 0) *c = p->cmd;
  }
  pthread_mutex_unlock(&p->mu);
  if (rc != 0) fprintf(stderr, "tcp_proxy: command %d not answered\n", c->op);
  return rc == 0 ? 0 : -1;
}

/* ---- the thread ------------------------------------------------------- */

static void *proxy_main(void *arg) {
  tcp_proxy_t *p = arg;
  struct pollfd pfd[2 + 2 * LINKS_MAX];
  char drain[64];
  int i, stop = 0;
  while (!stop) {
    int64_t now = now_ms(), wait = TICK_MS;
    pfd[0] = (struct pollfd){p->wake[0], POLLIN, 0};
    pfd[1] = (struct pollfd){p->lfd, POLLIN, 0};
    for (i = 0; i < LINKS_MAX; i++) {
      link_t *l = &p->links[i];
      int d;
      pfd[2 + 2 * i].fd = pfd[3 + 2 * i].fd = -1;
      if (!l->used) continue;
      link_events(l, &pfd[2 + 2 * i], now, p->stalled);
      for (d = 0; d < 2; d++) {
        int64_t due = p->stalled[d] ? -1 : flow_next_due(&l->flow[d], now);
        if (due >= 0 && due - now < wait) wait = due - now > 0 ? due - now : 0;
      }
    }
    (void)poll(pfd, 2 + 2 * LINKS_MAX, (int)wait);
    while (read(p->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&p->mu);
    if (p->issued != p->done) {
      run_cmd(p);
      p->done = p->issued;
      pthread_cond_broadcast(&p->cv);
    }
    stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    accept_all(p);
    now = now_ms();
    for (i = 0; i < LINKS_MAX; i++)
      if (p->links[i].used) link_io(p, &p->links[i], now);
  }
  return NULL;
}

int tcp_proxy_start(tcp_proxy_t **out) {
  tcp_proxy_t *p = calloc(1, sizeof *p);
  pthread_condattr_t ca;
  int i;
  *out = NULL;
  if (p == NULL) return -1;
  p->wake[0] = p->wake[1] = p->lfd = -1;
  for (i = 0; i < LINKS_MAX; i++) p->links[i].fd[0] = p->links[i].fd[1] = -1;
  if (pipe2(p->wake, O_NONBLOCK | O_CLOEXEC) != 0 ||
      coll__tcp_listen("127.0.0.1", 16, 0, &p->lfd, p->addr, sizeof p->addr) !=
          COLL_OK) {
    fprintf(stderr, "tcp_proxy: cannot listen: %s\n", coll_last_error());
    if (p->wake[0] >= 0) close(p->wake[0]);
    if (p->wake[1] >= 0) close(p->wake[1]);
    free(p);
    return -1;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&p->th, NULL, proxy_main, p) != 0) {
    fprintf(stderr, "tcp_proxy: cannot start its thread\n");
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return -1;
  }
  *out = p;
  return 0;
}

void tcp_proxy_stop(tcp_proxy_t *p) {
  cmd_t c = {.op = CMD_STOP};
  int i;
  if (p == NULL) return;
  if (send_cmd(p, &c) != 0) {
    /* The thread is stuck: leaking it beats freeing what it uses. */
    fprintf(stderr, "tcp_proxy: its thread did not stop\n");
    return;
  }
  pthread_join(p->th, NULL);
  for (i = 0; i < LINKS_MAX; i++)
    if (p->links[i].used) link_free(p, &p->links[i]);
  close(p->lfd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

const char *tcp_proxy_addr(const tcp_proxy_t *p) { return p->addr; }

int tcp_proxy_set_target(tcp_proxy_t *p, const char *addr) {
  cmd_t c = {.op = CMD_TARGET};
  if (coll__tcp_addr_parse(addr, &c.ss, &c.len) != COLL_OK) return -1;
  return send_cmd(p, &c);
}

static int dir_cmd(tcp_proxy_t *p, int op, tcp_proxy_dir_t d) {
  cmd_t c = {.op = op, .dir = d};
  return send_cmd(p, &c);
}

int tcp_proxy_pass(tcp_proxy_t *p, tcp_proxy_dir_t d) {
  return dir_cmd(p, CMD_PASS, d);
}

int tcp_proxy_delay(tcp_proxy_t *p, tcp_proxy_dir_t d, int64_t ms) {
  cmd_t c = {.op = CMD_DELAY, .dir = d, .ms = ms < 0 ? 0 : ms};
  return send_cmd(p, &c);
}

int tcp_proxy_stall(tcp_proxy_t *p, tcp_proxy_dir_t d) {
  return dir_cmd(p, CMD_STALL, d);
}

int tcp_proxy_reset(tcp_proxy_t *p, tcp_proxy_dir_t d) {
  return dir_cmd(p, CMD_RESET, d);
}

int tcp_proxy_corrupt(tcp_proxy_t *p, tcp_proxy_dir_t d, tcp_proxy_at_t at,
                      size_t offset, size_t n) {
  cmd_t c = {.op = CMD_CORRUPT, .dir = d, .at = at, .off = offset, .n = n};
  return send_cmd(p, &c);
}

int tcp_proxy_hold_half_header(tcp_proxy_t *p, tcp_proxy_dir_t d) {
  return dir_cmd(p, CMD_HOLD, d);
}

int tcp_proxy_stats(tcp_proxy_t *p, tcp_proxy_stats_t *st) {
  cmd_t c = {.op = CMD_STATS};
  if (send_cmd(p, &c) != 0) return -1;
  *st = c.st;
  return 0;
}

int tcp_proxy_wait_queued(tcp_proxy_t *p, tcp_proxy_dir_t d, uint64_t bytes,
                          int64_t timeout_ms) {
  int64_t end = now_ms() + timeout_ms;
  tcp_proxy_stats_t st;
  do {
    struct timespec ts = {0, 5 * 1000000L};
    if (tcp_proxy_stats(p, &st) != 0) return -1;
    if (st.queued[d] >= bytes) return 0;
    nanosleep(&ts, NULL);
  } while (now_ms() < end);
  return -1;
}
