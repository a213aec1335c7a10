/* SPDX-License-Identifier: Apache-2.0 */
/* plain_ring.c: the floor a TCP ring stands on. N processes on this host
 * run a ring allreduce (reduce-scatter, then allgather) over loopback TCP
 * with nothing around it: one connection to each neighbour, nonblocking
 * sockets and poll, each step's send and receive in flight together and
 * every received segment reduced as it lands. No library, no framing, no
 * checks beyond the loop's verification. Run in bench/'s timing loop
 * (bench_loop.h), so vs-peers.sh puts it beside libcoll and Open MPI
 * in one table: what libcoll's TCP path leaves on the table, if anything,
 * is the gap to this column.
 *
 *   plain_ring N [name]       (forks N ranks; rank 0 prints)
 *
 * PLAIN_SEGMENT  bytes per send and reduce (default 256 KiB) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_loop.h"

typedef struct ring {
  int rank, n;
  int to, from; /* sockets to the right neighbour and from the left */
  size_t seg;
  float *tmp; /* one chunk received for reducing */
} ring_t;

static void die(const char *what) {
  perror(what);
  exit(1);
}

/* Sends `sn` bytes of `s` right while receiving `rn` bytes from the left
 * into `r`; with `acc`, adds each received segment into acc. */
static void step(ring_t *R, const char *s, size_t sn, char *r, size_t rn,
                 float *acc) {
  size_t so = 0, ro = 0, done = 0;
  while (so < sn || ro < rn) {
    struct pollfd p[2] = {{R->to, so < sn ? POLLOUT : 0, 0},
                          {R->from, ro < rn ? POLLIN : 0, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) die("poll");
    if (p[0].revents & (POLLOUT | POLLERR)) {
      size_t k = sn - so < R->seg ? sn - so : R->seg;
      ssize_t w = send(R->to, s + so, k, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN) die("send");
      if (w > 0) so += (size_t)w;
    }
    if (p[1].revents & (POLLIN | POLLERR | POLLHUP)) {
      ssize_t g = recv(R->from, r + ro, rn - ro, MSG_DONTWAIT);
      if (g == 0) {
        fprintf(stderr, "plain_ring: rank %d: the left neighbour left\n",
                R->rank);
        exit(1);
      }
      if (g < 0 && errno != EAGAIN) die("recv");
      if (g > 0) ro += (size_t)g;
      if (acc != NULL) {
        size_t upto = ro == rn ? rn : ro - ro % R->seg;
        float *a = acc + done / sizeof(float);
        const float *b = (const float *)(r + done);
        for (size_t i = 0; i < (upto - done) / sizeof(float); i++) a[i] += b[i];
        done = upto;
      }
    }
  }
}

/* Chunk c of count elements split n ways: [*lo, *lo + *len). */
static void chunk(size_t count, int n, int c, size_t *lo, size_t *len) {
  size_t q = count / (size_t)n, rem = count % (size_t)n, uc = (size_t)c;
  *lo = uc * q + (uc < rem ? uc : rem);
  *len = q + (uc < rem);
}

static void ar_ring(float *buf, size_t count, void *ctx) {
  ring_t *R = ctx;
  int n = R->n, s;
  for (s = 0; s < n - 1; s++) {
    size_t slo, sl, rlo, rl;
    chunk(count, n, ((R->rank - s) % n + n) % n, &slo, &sl);
    chunk(count, n, ((R->rank - s - 1) % n + n) % n, &rlo, &rl);
    step(R, (char *)(buf + slo), sl * sizeof(float), (char *)R->tmp,
         rl * sizeof(float), buf + rlo);
  }
  for (s = 0; s < n - 1; s++) {
    size_t slo, sl, rlo, rl;
    chunk(count, n, ((R->rank + 1 - s) % n + n) % n, &slo, &sl);
    chunk(count, n, ((R->rank - s) % n + n) % n, &rlo, &rl);
    step(R, (char *)(buf + slo), sl * sizeof(float), (char *)(buf + rlo),
         rl * sizeof(float), NULL);
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2, r, one = 1, *ls, rc = 0;
  struct sockaddr_in *at;
  const char *e = getenv("PLAIN_SEGMENT");
  ring_t R;
  if (n < 2 || n > 64) {
    fprintf(stderr, "usage: plain_ring N [name]   (2 <= N <= 64)\n");
    return 2;
  }
  ls = calloc((size_t)n, sizeof *ls);
  at = calloc((size_t)n, sizeof *at);
  /* Every listener is bound before any rank starts: ports from the kernel,
   * nothing to collide with. */
  for (r = 0; r < n; r++) {
    socklen_t len = sizeof at[r];
    at[r].sin_family = AF_INET;
    at[r].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((ls[r] = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        bind(ls[r], (struct sockaddr *)&at[r], sizeof at[r]) < 0 ||
        listen(ls[r], 1) < 0 ||
        getsockname(ls[r], (struct sockaddr *)&at[r], &len) < 0)
      die("listen");
  }
  memset(&R, 0, sizeof R);
  R.n = n;
  R.seg = e != NULL && atol(e) >= 4 ? (size_t)atol(e) & ~(size_t)3 : 256 * 1024;
  for (r = 1; r < n; r++)
    if (fork() == 0) break;
  R.rank = r == n ? 0 : r;
  for (r = 0; r < n; r++)
    if (r != R.rank) close(ls[r]);
  R.to = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(R.to, (struct sockaddr *)&at[(R.rank + 1) % n], sizeof at[0]))
    die("connect");
  if ((R.from = accept(ls[R.rank], NULL, NULL)) < 0) die("accept");
  close(ls[R.rank]);
  setsockopt(R.to, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  R.tmp = malloc((64u << 20) / (size_t)n + 64);
  if (R.tmp == NULL) die("malloc");
  rc =
      bench_loop_run(argc > 2 ? argv[2] : "plain_ring", R.rank, n, ar_ring, &R);
  close(R.to);
  close(R.from);
  if (R.rank == 0)
    for (r = 1; r < n; r++) {
      int st;
      if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
  free(R.tmp);
  free(ls);
  free(at);
  return rc;
}
