/* SPDX-License-Identifier: Apache-2.0 */
/* fault_helper.c: the helper process of a fault job with a proxy: it
 * serves the ranks' store and runs the proxy on one link
 * (tests/common/tcp_proxy.h), taking commands through the shared region.
 * It lives in a process of its own because both have threads, and a
 * process that forks ranks must have none. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bootstrap/store/store.h"
#include "fault_int.h"
#include "tcp_proxy.h"

/* The longest a command may take to be answered. */
#define HELP_WAIT_MS 10000

static int timed_wait(sem_t *s, int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  for (;;) {
    if (sem_timedwait(s, &ts) == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

int fj_helper_call(fj_shared_t *sh, int cmd, int dir, const char *target) {
  int rc;
  if (timed_wait(&sh->help_lock, HELP_WAIT_MS) != 0) return -1;
  atomic_store(&sh->help_dir, dir);
  if (target != NULL) snprintf(sh->target, sizeof sh->target, "%s", target);
  atomic_store(&sh->help_cmd, cmd);
  sem_post(&sh->help_sem);
  rc = timed_wait(&sh->help_ack, HELP_WAIT_MS) == 0 ? atomic_load(&sh->help_rc)
                                                    : -1;
  sem_post(&sh->help_lock);
  return rc;
}

static int serve(fj_shared_t *sh, tcp_proxy_t *p, int cmd) {
  tcp_proxy_dir_t d = (tcp_proxy_dir_t)atomic_load(&sh->help_dir);
  switch (cmd) {
    case FJ_HELP_TARGET: return tcp_proxy_set_target(p, sh->target);
    case FJ_HELP_CORRUPT:
      return tcp_proxy_corrupt(p, d, TCP_PROXY_AT_HEADER, 0, 4);
    case FJ_HELP_BLACKHOLE:
      return tcp_proxy_stall(p, TCP_PROXY_UP) == 0 &&
                     tcp_proxy_stall(p, TCP_PROXY_DOWN) == 0
                 ? 0
                 : -1;
    default: return -1;
  }
}

int fj_helper_main(fj_shared_t *sh) {
  coll_store_server_t *srv = NULL;
  tcp_proxy_t *p = NULL;
  int quit = 0;
  if (coll__store_server_start("127.0.0.1", 0, NULL, &srv) != COLL_OK ||
      tcp_proxy_start(&p) != 0) {
    fprintf(stderr, "fault helper: %s\n", coll_last_error());
    atomic_store(&sh->help_ready, -1);
    coll__store_server_stop(srv);
    return 1;
  }
  sh->port = coll__store_server_port(srv);
  snprintf(sh->proxy_addr, sizeof sh->proxy_addr, "%s", tcp_proxy_addr(p));
  atomic_store(&sh->help_ready, 1);
  while (!quit) {
    int cmd;
    while (sem_wait(&sh->help_sem) != 0 && errno == EINTR) {
    }
    cmd = atomic_exchange(&sh->help_cmd, FJ_HELP_NONE);
    quit = cmd == FJ_HELP_QUIT;
    atomic_store(&sh->help_rc, quit ? 0 : serve(sh, p, cmd));
    sem_post(&sh->help_ack);
  }
  tcp_proxy_stop(p);
  coll__store_server_stop(srv);
  return 0;
}
