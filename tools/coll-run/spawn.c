/* SPDX-License-Identifier: Apache-2.0 */
/* spawn.c: starting, signalling and reaping rank processes. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "coll_run.h"

int run_make_token(run_opts_t *o) {
  static const char hex[] = "0123456789abcdef";
  unsigned char b[RUN_TOKEN_BYTES];
  const char *have = getenv("COLL_AUTH_TOKEN");
  int rc, i;
  o->token[0] = '\0';
  if (have != NULL && have[0] != '\0') return 0;
  /* No loop and no callback: libuv fills the buffer synchronously. */
  rc = uv_random(NULL, NULL, b, sizeof b, 0, NULL);
  if (rc != 0) {
    run_msg("cannot make a random COLL_AUTH_TOKEN for the job: %s",
            uv_strerror(rc));
    return -1;
  }
  for (i = 0; i < RUN_TOKEN_BYTES; i++) {
    o->token[2 * i] = hex[b[i] >> 4];
    o->token[2 * i + 1] = hex[b[i] & 15];
  }
  o->token[2 * RUN_TOKEN_BYTES] = '\0';
  return 0;
}

int run_pick_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  if (fd < 0) {
    run_msg("cannot pick a free port: socket: %s", strerror(errno));
    return 0;
  }
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    run_msg("cannot pick a free port: %s", strerror(errno));
  else
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static void set_env_int(const char *name, int v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(name, buf, 1);
}

/* Rank's block of o->cpus: with C CPUs and N ranks, the CPUs in positions
 * [rank*C/N, (rank+1)*C/N) of the set in order when N <= C, so that every
 * rank gets C/N of them (its own threads too: a framework's intra-op pool
 * keeps cores to run on); else the one in position rank mod C. */
static void rank_cpus(const run_opts_t *o, int rank, cpu_set_t *out) {
  long count = CPU_COUNT(&o->cpus), n = o->nranks, lo, hi, k = 0;
  if (n <= count) {
    lo = rank * count / n;
    hi = (rank + 1) * count / n;
  } else {
    lo = rank % count;
    hi = lo + 1;
  }
  CPU_ZERO(out);
  for (int cpu = 0; cpu < CPU_SETSIZE && k < hi; cpu++) {
    if (!CPU_ISSET(cpu, &o->cpus)) continue;
    if (k >= lo) CPU_SET(cpu, out);
    k++;
  }
}

/* In the child, between fork and exec. coll-run is single-threaded, so
 * setenv and stdio are safe here. Never returns. */
static void child_exec(const run_opts_t *o, int port, int rank, int out_w,
                       int err_w, pid_t parent, const sigset_t *mask) {
  static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  size_t i;
  int null_fd;
  /* Its own process group: a Ctrl-C in the terminal reaches coll-run only,
   * and stopping a rank also stops whatever it started. */
  setpgid(0, 0);
  /* Die with coll-run, even if coll-run is killed with SIGKILL. The check
   * after it closes the window where coll-run died before the prctl. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(RUN_EXIT_NOEXEC);
  for (i = 0; i < sizeof handled / sizeof handled[0]; i++)
    signal(handled[i], SIG_DFL); /* ignored signals survive exec */
  sigprocmask(SIG_SETMASK, mask, NULL);
  null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != STDIN_FILENO) {
    dup2(null_fd, STDIN_FILENO);
    close(null_fd);
  }
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
    _exit(RUN_EXIT_NOEXEC);
  if (o->bind) {
    cpu_set_t mine;
    rank_cpus(o, rank, &mine);
    if (sched_setaffinity(0, sizeof mine, &mine) != 0)
      dprintf(STDERR_FILENO, "coll-run: rank %d: not bound to its CPUs: %s\n",
              rank, strerror(errno));
  }
  set_env_int("RANK", rank);
  set_env_int("WORLD_SIZE", o->nranks);
  set_env_int("LOCAL_RANK", rank);
  set_env_int("LOCAL_WORLD_SIZE", o->nranks);
  setenv("MASTER_ADDR", o->master_addr, 1);
  set_env_int("MASTER_PORT", port);
  if (o->token[0] != '\0') setenv("COLL_AUTH_TOKEN", o->token, 1);
  execvp(o->argv[0], o->argv);
  dprintf(STDERR_FILENO, "coll-run: cannot execute '%s': %s\n", o->argv[0],
          strerror(errno));
  _exit(RUN_EXIT_NOEXEC);
}

static void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  p[0] = p[1] = -1;
}

int run_spawn(const run_opts_t *o, int port, int rank, run_rank_t *r) {
  int out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
  sigset_t all, old;
  pid_t parent = getpid(), pid;
  if (pipe2(out_p, O_CLOEXEC) != 0 || pipe2(err_p, O_CLOEXEC) != 0) {
    run_msg("rank %d: cannot create its output pipes: %s", rank,
            strerror(errno));
    goto fail;
  }
  /* No signal handler may run in the child before exec: it would write
   * into coll-run's signal pipe. */
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid = fork();
  if (pid == 0) child_exec(o, port, rank, out_p[1], err_p[1], parent, &old);
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    run_msg("rank %d: fork failed: %s", rank, strerror(errno));
    goto fail;
  }
  setpgid(pid, pid); /* also here, so no signal can miss the new group */
  close(out_p[1]);
  close(err_p[1]);
  r->pid = pid;
  r->exited = 0;
  r->code = r->sig = 0;
  if (run_stream_init(&r->out, rank, STDOUT_FILENO, out_p[0]) != 0 ||
      run_stream_init(&r->err, rank, STDERR_FILENO, err_p[0]) != 0) {
    run_msg("rank %d: out of memory", rank);
    return -1; /* the rank is started; the caller stops it */
  }
  return 0;
fail:
  close_pair(out_p);
  close_pair(err_p);
  return -1;
}

void run_signal(const run_rank_t *r, int sig) {
  if (r->pid > 0) kill(-r->pid, sig);
}

int run_check_exit(run_rank_t *r) {
  siginfo_t si;
  if (r->pid <= 0 || r->exited) return 0;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      si.si_pid == 0)
    return 0;
  r->exited = 1;
  r->sig = si.si_code == CLD_EXITED ? 0 : si.si_status;
  r->code = r->sig == 0 ? si.si_status : 128 + r->sig;
  return 1;
}

void run_reap(run_rank_t *r) {
  if (r->pid <= 0) return;
  while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {
  }
  r->pid = 0;
}
