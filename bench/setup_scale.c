/* SPDX-License-Identifier: Apache-2.0 */
/* setup_scale.c: what a comm's setup costs as the world grows: the time
 * from the first rank's start to the last rank's comm (and to the end of
 * its first collective, a 4-byte allreduce, which makes whatever the
 * algorithms connect on first use), and the descriptors each rank holds
 * afterwards. Run by bench/setup-scale.sh under coll-run; rank 0 prints
 *
 *   ranks N setup_s S first_s F fds_max D fds_mean M
 *
 * where S and F are wall seconds (CLOCK_REALTIME, one host) from the
 * earliest rank's start, and D and M the open descriptors per rank after
 * the first collective (stdin, stdout and stderr included). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coll.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Open descriptors of this process, less the one reading the list. */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;
}

static int fail(const char *what, coll_status_t s) {
  fprintf(stderr, "setup_scale: %s: %s: %s\n", what, coll_status_name(s),
          coll_last_error());
  return 1;
}

int main(void) {
  double start = now_s(), t[4];
  coll_comm_t *c = NULL;
  coll_status_t s = coll_comm_init_env(NULL, &c);
  float one = 1.0f;
  int n;
  if (s != COLL_OK) return fail("coll_comm_init_env", s);
  t[1] = now_s();
  s = coll_allreduce(c, &one, &one, 1, COLL_F32, COLL_SUM, NULL);
  if (s != COLL_OK) return fail("first allreduce", s);
  t[2] = now_s();
  n = coll_comm_size(c);
  /* Earliest start (as a max of its negation), latest ends, fds. */
  t[0] = -start;
  t[3] = (double)open_fds();
  s = coll_allreduce(c, t, t, 4, COLL_F64, COLL_MAX, NULL);
  if (s == COLL_OK) {
    double fds = (double)open_fds(), sum = fds;
    s = coll_allreduce(c, &sum, &sum, 1, COLL_F64, COLL_SUM, NULL);
    if (s == COLL_OK && coll_comm_rank(c) == 0)
      printf("ranks %d setup_s %.3f first_s %.3f fds_max %.0f fds_mean %.1f\n",
             n, t[1] + t[0], t[2] + t[0], t[3], sum / n);
  }
  if (s != COLL_OK) return fail("collecting the figures", s);
  coll_comm_destroy(c);
  return 0;
}
