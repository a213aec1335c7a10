/* SPDX-License-Identifier: Apache-2.0 */
/* rank_procs.c: the rank runners of rank_procs.h. */
#include "rank_procs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#define RP_MAX 8

typedef struct rp_threads {
  coll_comm_t *comms[RP_MAX];
  rp_body_t body;
  char *outs;
  size_t out_size;
} rp_threads_t;

static void thread_rank(int rank, int world, void *p) {
  rp_threads_t *a = p;
  a->body(a->comms[rank], rank, world, a->outs + (size_t)rank * a->out_size);
}

static int on_threads(int world, int64_t comm_ms, int64_t bound_ms,
                      rp_body_t body, void *outs, size_t out_size) {
  rp_threads_t a;
  memset(&a, 0, sizeof a);
  if (test_inproc_comms(world, comm_ms, a.comms) != 0) {
    fprintf(stderr, "rank_procs: no in-process comms of %d\n", world);
    return -1;
  }
  a.body = body;
  a.outs = outs;
  a.out_size = out_size;
  test_run_ranks(world, thread_rank, &a, bound_ms, "rank threads");
  test_destroy_comms(world, a.comms);
  return 0;
}

/* A port on 127.0.0.1 that was free a moment ago. */
static int free_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* A forked rank: its comm from the environment, then the body. */
static int child(int rank, int world, int port, const char *transport,
                 int64_t comm_ms, rp_body_t body, void *out) {
  char buf[32];
  coll_comm_t *c = NULL;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", world);
  setenv("WORLD_SIZE", buf, 1);
  snprintf(buf, sizeof buf, "%d", port);
  setenv("MASTER_PORT", buf, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("COLL_TRANSPORT", transport, 1);
  setenv("COLL_BACKEND", "cpu", 1);
  cfg.timeout_ms = comm_ms;
  if (coll_comm_init_env(&cfg, &c) != COLL_OK) {
    fprintf(stderr, "rank %d: comm over %s: %s\n", rank, transport,
            coll_last_error());
    return 2;
  }
  body(c, rank, world, out);
  coll_comm_destroy(c);
  return 0;
}

static int on_processes(int world, const char *transport, int64_t comm_ms,
                        int64_t bound_ms, rp_body_t body, void *outs,
                        size_t out_size) {
  size_t bytes = (size_t)world * out_size;
  char *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int64_t deadline = test_now_ms() + bound_ms;
  pid_t pid[RP_MAX];
  int port = free_port(), r, bad = 0;
  if (shared == MAP_FAILED || port <= 0) {
    fprintf(stderr, "rank_procs: no shared memory or port\n");
    return -1;
  }
  memset(shared, 0, bytes);
  fflush(NULL);
  for (r = 0; r < world; r++) {
    pid[r] = fork();
    if (pid[r] == 0)
      _exit(child(r, world, port, transport, comm_ms, body,
                  shared + (size_t)r * out_size));
  }
  for (r = 0; r < world; r++) {
    int st = 0;
    if (pid[r] < 0) {
      bad = 1;
      continue;
    }
    while (waitpid(pid[r], &st, WNOHANG) == 0) {
      if (test_now_ms() > deadline) {
        fprintf(stderr, "HANG: rank %d of %d over %s still runs\n", r, world,
                transport);
        kill(pid[r], SIGKILL);
        waitpid(pid[r], &st, 0);
        bad = 1;
        break;
      }
      test_sleep_ms(5);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
  }
  memcpy(outs, shared, bytes);
  munmap(shared, bytes);
  return bad ? -1 : 0;
}

int rp_run(int world, const char *transport, int64_t comm_ms, int64_t bound_ms,
           rp_body_t body, void *outs, size_t out_size) {
  memset(outs, 0, (size_t)world * out_size);
  if (world < 1 || world > RP_MAX) return -1;
  if (strcmp(transport, "inproc") == 0)
    return on_threads(world, comm_ms, bound_ms, body, outs, out_size);
  return on_processes(world, transport, comm_ms, bound_ms, body, outs,
                      out_size);
}
