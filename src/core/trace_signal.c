/* SPDX-License-Identifier: Apache-2.0 */
/* trace_signal.c: the list of live flight recorders, and SIGUSR1.
 *
 * A signal handler cannot write JSON safely, so the handler only writes a
 * byte to a pipe (async-signal-safe) and then calls the handler that was
 * there before it, if any; a libcoll thread reads the pipe and dumps every
 * recorder in the list. The handler is installed once, by the first comm
 * made with COLL_TRACE_FILE set, and stays for the life of the process
 * (the thread too: it sleeps in read()). A previous handler is never
 * dropped: it keeps running after ours, and a WARN says it is chained. A
 * previous SIG_IGN or SIG_DFL (which would end the process) is replaced. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/trace_int.h"

/* The list of live recorders; a dump of all holds the lock, so a recorder
 * is unlisted (by its last release) only between dumps. */
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static coll_trace_t *g_reg_head;

static pthread_once_t g_install_once = PTHREAD_ONCE_INIT;
static int g_pipe[2] = {-1, -1};
static struct sigaction g_prev;

static void on_sigusr1(int sig, siginfo_t *info, void *uctx) {
  int saved = errno;
  char b = 1;
  /* Nonblocking: with the pipe full a dump is already due. */
  ssize_t n = write(g_pipe[1], &b, 1);
  (void)n;
  errno = saved;
  if (g_prev.sa_flags & SA_SIGINFO) {
    if (g_prev.sa_sigaction != NULL) g_prev.sa_sigaction(sig, info, uctx);
  } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN &&
             g_prev.sa_handler != NULL) {
    g_prev.sa_handler(sig);
  }
}

static void *dump_thread(void *arg) {
  char buf[64];
  (void)arg;
  for (;;) {
    ssize_t n = read(g_pipe[0], buf, sizeof buf);
    if (n > 0) {
      (void)coll__trace_dump_all("SIGUSR1");
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  return NULL;
}

static void install(void) {
  struct sigaction sa;
  pthread_t th;
  pthread_attr_t attr;
  sigset_t all, old;
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    COLL_WARN(COLL_LOG_INIT,
              "flight recorder: no pipe for SIGUSR1 (%s); "
              "dumps on abort and timeout only",
              strerror(errno));
    return;
  }
  (void)fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
  /* The thread blocks every signal, so none is delivered to it. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, dump_thread, NULL) != 0) {
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    COLL_WARN(COLL_LOG_INIT,
              "flight recorder: no thread for SIGUSR1; "
              "dumps on abort and timeout only");
    return;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigusr1;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, &g_prev) != 0) {
    COLL_WARN(COLL_LOG_INIT, "flight recorder: cannot handle SIGUSR1 (%s)",
              strerror(errno));
    return;
  }
  if ((g_prev.sa_flags & SA_SIGINFO) ||
      (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN))
    COLL_WARN(COLL_LOG_INIT,
              "flight recorder: SIGUSR1 already had a handler; libcoll's "
              "runs first, then calls it");
}

void coll__trace_register(coll_trace_t *t) {
  pthread_once(&g_install_once, install);
  pthread_mutex_lock(&g_reg_mu);
  t->reg_prev = NULL;
  t->reg_next = g_reg_head;
  if (g_reg_head != NULL) g_reg_head->reg_prev = t;
  g_reg_head = t;
  pthread_mutex_unlock(&g_reg_mu);
}

void coll__trace_unregister(coll_trace_t *t) {
  pthread_mutex_lock(&g_reg_mu);
  if (t->reg_prev != NULL)
    t->reg_prev->reg_next = t->reg_next;
  else if (g_reg_head == t)
    g_reg_head = t->reg_next;
  if (t->reg_next != NULL) t->reg_next->reg_prev = t->reg_prev;
  t->reg_prev = t->reg_next = NULL;
  pthread_mutex_unlock(&g_reg_mu);
}

int coll__trace_dump_all(const char *reason) {
  coll_trace_t *t;
  int n = 0;
  pthread_mutex_lock(&g_reg_mu);
  for (t = g_reg_head; t != NULL; t = t->reg_next)
    if (coll__trace_dump(t, reason) == 0) n++;
  pthread_mutex_unlock(&g_reg_mu);
  return n;
}
