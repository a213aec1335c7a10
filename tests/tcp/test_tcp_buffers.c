/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_buffers.c: the socket buffers of connections within a host.
 * Rank processes over 127.0.0.1: where the host's ranks outnumber its
 * cores, every connection to a peer has the local buffers
 * (COLL_TCP_LOCAL_BUFFER_BYTES), on the side that dialled and on the side
 * that accepted; with a core per rank, or with the variable at 0, they keep
 * the buffers every connection is made with. The host's cores are set
 * through the transport's extra knobs, so both cases run on any host. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "tcp_test_util.h"

#define JOB_MS 60000
#define LOCAL 65536

/* Counts this process's connected sockets whose send and receive buffers
 * are both what the kernel makes of a request for `bytes` (twice it), and
 * the others. The ranks rendezvous through files, so every connected
 * socket is a connection of the transport. */
static void count_sockets(int bytes, int *match, int *other) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  *match = *other = 0;
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name), snd = 0, rcv = 0;
    socklen_t len = sizeof snd;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;
    if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
    if (getpeername(fd, (struct sockaddr *)&ss, &slen) != 0) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &len) != 0) continue;
    len = sizeof rcv;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len) != 0) continue;
    if (snd == 2 * bytes && rcv == 2 * bytes)
      (*match)++;
    else
      (*other)++;
  }
  closedir(d);
}

typedef struct want {
  unsigned cores; /* the host's cores the transport is told */
  int local;      /* 1: the connections have the local buffers */
} want_t;

/* A rank: creates its transport on a host of w->cores cores and checks
 * its connections' buffers. */
static int rank_main(tt_job_t *job, int rank, int world, void *arg) {
  const want_t *w = arg;
  coll_transport_t *t = NULL;
  coll_status_t s;
  int match, other, rc = 0, want_match = w->local ? world - 1 : 0;
  char text[TT_TEXT];
  job->x.host_cores = w->cores;
  s = tt_create(job, rank, world, &t);
  if (s != COLL_OK) return tt_failed(job, rank, "create", s);
  count_sockets(LOCAL, &match, &other);
  if (match != want_match || other != world - 1 - want_match) {
    snprintf(text, sizeof text,
             "%d connections with %d-byte buffers and %d others; want %d and "
             "%d",
             match, 2 * LOCAL, other, want_match, world - 1 - want_match);
    tt_note(job, rank, COLL_ERR_INTERNAL, text);
    rc = 1;
  }
  coll_transport_destroy(t);
  return rc;
}

/* Runs world ranks with COLL_TCP_LOCAL_BUFFER_BYTES set to env. */
static void run_world(int world, const char *env, unsigned cores, int local) {
  tt_job_t job;
  want_t w = {cores, local};
  char msg[256];
  int r, rc;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  setenv("COLL_TCP_LOCAL_BUFFER_BYTES", env, 1);
  rc = tt_run(&job, world, rank_main, &w, JOB_MS, msg, sizeof msg);
  unsetenv("COLL_TCP_LOCAL_BUFFER_BYTES");
  for (r = 0; r < world; r++)
    if (job.sh->status[r] != COLL_OK)
      fprintf(stderr, "world %d rank %d: %s\n", world, r, job.sh->text[r]);
  tt_job_fini(&job);
  if (rc != 0) fail_msg("world %d on %u cores, %s: %s", world, cores, env, msg);
}

static void test_crowded_host(void **state) {
  (void)state;
  run_world(2, "65536", 1, 1);
  run_world(4, "65536", 2, 1);
}

static void test_core_per_rank(void **state) {
  (void)state;
  run_world(3, "65536", 3, 0);
  run_world(2, "65536", 64, 0);
}

static void test_off(void **state) {
  (void)state;
  run_world(3, "0", 1, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crowded_host),
      cmocka_unit_test(test_core_per_rank),
      cmocka_unit_test(test_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
