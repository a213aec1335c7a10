/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_congestion.c: COLL_TCP_CONGESTION. Rank processes over
 * 127.0.0.1: with it set, every connection to a peer runs the congestion
 * control it names, on the side that dialled and on the side that accepted;
 * unset, the host's default. A name the kernel has not, or one too long to
 * be a name, is refused at creation with the variable named. */
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

/* The host's default congestion control, and another one every Linux has
 * built in: reno, or cubic where reno is the default. */
static void names(char *host, size_t cap, const char **other) {
  FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  assert_non_null(f);
  assert_non_null(fgets(host, (int)cap, f));
  fclose(f);
  host[strcspn(host, "\n")] = '\0';
  *other = strcmp(host, "reno") == 0 ? "cubic" : "reno";
}

/* Counts this process's connected TCP sockets running `want` (*match) and
 * any other congestion control (*other). The ranks rendezvous through
 * files, so every such socket is a connection of the transport. */
static void count_sockets(const char *want, int *match, int *other) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  *match = *other = 0;
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    char cc[32];
    socklen_t len = sizeof cc;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
    memset(cc, 0, sizeof cc);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len) != 0) continue;
    if (getpeername(fd, (struct sockaddr *)&ss, &slen) != 0) continue;
    if (strcmp(cc, want) == 0)
      (*match)++;
    else
      (*other)++;
  }
  closedir(d);
}

/* A rank: creates its transport and checks its connections run arg, the
 * name it expects. */
static int rank_main(tt_job_t *job, int rank, int world, void *arg) {
  const char *want = arg;
  coll_transport_t *t = NULL;
  coll_status_t s = tt_create(job, rank, world, &t);
  int match, other, rc = 0;
  char text[TT_TEXT];
  if (s != COLL_OK) return tt_failed(job, rank, "create", s);
  count_sockets(want, &match, &other);
  if (match != world - 1 || other != 0) {
    snprintf(text, sizeof text,
             "%d connections run %s and %d another; want %d and 0", match, want,
             other, world - 1);
    tt_note(job, rank, COLL_ERR_INTERNAL, text);
    rc = 1;
  }
  coll_transport_destroy(t);
  return rc;
}

/* Runs world ranks with COLL_TCP_CONGESTION set to env (NULL: unset),
 * each expecting want. */
static void run_world(int world, const char *env, const char *want) {
  tt_job_t job;
  char msg[256];
  int r, rc;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  if (env != NULL)
    setenv("COLL_TCP_CONGESTION", env, 1);
  else
    unsetenv("COLL_TCP_CONGESTION");
  rc = tt_run(&job, world, rank_main, (void *)want, JOB_MS, msg, sizeof msg);
  unsetenv("COLL_TCP_CONGESTION");
  for (r = 0; r < world; r++)
    if (job.sh->status[r] != COLL_OK)
      fprintf(stderr, "world %d rank %d: %s\n", world, r, job.sh->text[r]);
  tt_job_fini(&job);
  if (rc != 0) fail_msg("world %d, %s: %s", world, env ? env : "unset", msg);
}

static void test_named(void **state) {
  char host[32];
  const char *other;
  (void)state;
  names(host, sizeof host, &other);
  run_world(2, other, other);
  run_world(4, other, other);
}

static void test_host_default(void **state) {
  char host[32];
  const char *other;
  (void)state;
  names(host, sizeof host, &other);
  run_world(3, NULL, host);
}

/* One rank alone: the name is tried before any connection. */
static void expect_refused(const char *env, const char *text) {
  tt_job_t job;
  coll_transport_t *t = NULL;
  coll_status_t s;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", NULL), 0);
  setenv("COLL_TCP_CONGESTION", env, 1);
  s = tt_create(&job, 0, 1, &t);
  unsetenv("COLL_TCP_CONGESTION");
  tt_job_fini(&job);
  if (s == COLL_OK) coll_transport_destroy(t);
  assert_int_equal(s, COLL_ERR_INVALID_ARG);
  assert_null(t);
  if (strstr(coll_last_error(), "COLL_TCP_CONGESTION") == NULL ||
      strstr(coll_last_error(), text) == NULL)
    fail_msg("'%s': error text \"%s\" lacks \"%s\"", env, coll_last_error(),
             text);
}

static void test_refused(void **state) {
  (void)state;
  /* The kernel's answer, with what this host offers (reno always). */
  expect_refused("no-such-cc", "reno");
  expect_refused("a-name-of-sixteen", "15 characters at most");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_named),
      cmocka_unit_test(test_host_default),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
