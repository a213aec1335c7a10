/* SPDX-License-Identifier: Apache-2.0 */
/* job.c: the supervision loop: output, exits, signals, timeout, stopping. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "coll_run.h"

/* After the last rank exited, output still in flight (or held open by a
 * process the rank left behind) is read for at most this long. */
#define RUN_DRAIN_NS (500ull * 1000000ull)

typedef struct job {
  const run_opts_t *o;
  run_rank_t *ranks;
  struct pollfd *pfds;
  run_stream_t **pstreams; /* the stream behind each pfds entry */
  int running;             /* started ranks whose exit was not seen yet */
  int code;                /* coll-run's exit code once decided, else -1 */
  int kg_ok, kg_sig;       /* --keep-going: ranks that exited 0; the code
                              of the first one killed (0: none) */
  int stopping, killed;    /* SIGTERM (or a forwarded signal) / SIGKILL sent */
  uint64_t deadline_ns;    /* --timeout; 0: none */
  uint64_t kill_ns;        /* when a stop turns into SIGKILL */
  uint64_t stop_ns;        /* after a rank failed: when the others are
                              stopped unless they ended (0: none pending) */
  uint64_t drain_ns;       /* when to give up on output, once all exited */
} job_t;

/* Signals reach the loop as bytes in this pipe (the handler only writes). */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  if (write(sig_pipe[1], &b, 1) < 0) {
    /* the pipe is full: enough wakeups are already queued */
  }
  errno = saved;
}

static int setup_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  struct sigaction sa;
  size_t i;
  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    run_msg("cannot create the signal pipe: %s", strerror(errno));
    return -1;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the launcher */
  return 0;
}

/* Sends sig to every rank's process group, also to ranks that exited:
 * their unreaped zombie keeps the group id, so what they left behind is
 * reached and nothing else can be. */
static void signal_all(job_t *j, int sig) {
  int i;
  for (i = 0; i < j->o->nranks; i++) run_signal(&j->ranks[i], sig);
}

static void begin_stop(job_t *j, int sig, int code) {
  if (j->code < 0) j->code = code;
  if (j->stopping) return;
  j->stopping = 1;
  j->kill_ns = uv_hrtime() + (uint64_t)(j->o->grace_s * 1e9);
  signal_all(j, sig);
}

static void kill_all(job_t *j) {
  if (j->killed) return;
  j->killed = 1;
  signal_all(j, SIGKILL);
}

static void describe_exit(int rank, const run_rank_t *r, char *buf,
                          size_t cap) {
  if (r->sig != 0)
    snprintf(buf, cap, "rank %d was killed by signal %d (%s)", rank, r->sig,
             strsignal(r->sig));
  else
    snprintf(buf, cap, "rank %d exited with code %d", rank, r->code);
}

static void check_exits(job_t *j) {
  char what[160];
  int i;
  for (i = 0; i < j->o->nranks; i++) {
    run_rank_t *r = &j->ranks[i];
    if (!run_check_exit(r)) continue;
    j->running--;
    if (j->o->keep_going && !j->stopping) {
      /* The others go on: report every exit, stop no one. */
      describe_exit(i, r, what, sizeof what);
      run_msg("%s", what);
      if (r->sig != 0 && j->kg_sig == 0) j->kg_sig = r->code;
      if (r->sig == 0 && r->code == 0) j->kg_ok++;
      if (r->sig == 0 && r->code != 0 && j->code < 0) j->code = r->code;
      continue;
    }
    if (r->code == 0 || j->stopping || j->stop_ns != 0) continue;
    describe_exit(i, r, what, sizeof what);
    if (j->code < 0) j->code = r->code;
    if (j->running == 0) {
      run_msg("%s", what);
    } else if (j->o->drain_s > 0) {
      /* Their failure is on its way to them: a libcoll rank reports it
       * within milliseconds, prints, and flushes its output as it exits.
       * A SIGTERM now would lose what sits in their stdio buffers. */
      run_msg("%s; stopping the other ranks in %g s unless they end first",
              what, j->o->drain_s);
      j->stop_ns = uv_hrtime() + (uint64_t)(j->o->drain_s * 1e9);
    } else {
      run_msg("%s; stopping the other ranks", what);
      begin_stop(j, SIGTERM, r->code);
    }
  }
}

static const char *sig_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

static void handle_signals(job_t *j) {
  unsigned char buf[64];
  ssize_t n, k;
  while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0) {
    for (k = 0; k < n; k++) {
      int sig = buf[k];
      if (sig == SIGCHLD) {
        check_exits(j);
      } else if (!j->stopping) {
        run_msg("got %s; stopping %d ranks", sig_name(sig), j->running);
        begin_stop(j, sig, 128 + sig);
      } else if (!j->killed) {
        run_msg("got %s while stopping; killing the ranks", sig_name(sig));
        kill_all(j);
      }
    }
  }
}

static void check_clock(job_t *j) {
  uint64_t now = uv_hrtime();
  if (j->deadline_ns != 0 && !j->stopping && now >= j->deadline_ns) {
    run_msg("timeout: the job still ran after %g s; stopping %d ranks",
            j->o->timeout_s, j->running);
    begin_stop(j, SIGTERM, RUN_EXIT_TIMEOUT);
  }
  if (j->stop_ns != 0 && !j->stopping && now >= j->stop_ns) {
    if (j->running > 0)
      run_msg("stopping %d ranks still running %g s after the failure",
              j->running, j->o->drain_s);
    begin_stop(j, SIGTERM, j->code);
  }
  if (j->stopping && !j->killed && now >= j->kill_ns) {
    if (j->running > 0)
      run_msg("%d ranks still ran %g s after SIGTERM; sending SIGKILL",
              j->running, j->o->grace_s);
    kill_all(j);
  }
}

/* Milliseconds until the next deadline the loop must act on; -1: none. */
static int poll_timeout_ms(const job_t *j) {
  uint64_t next = UINT64_MAX, now = uv_hrtime();
  if (j->deadline_ns != 0 && !j->stopping) next = j->deadline_ns;
  if (j->stop_ns != 0 && !j->stopping && j->stop_ns < next) next = j->stop_ns;
  if (j->stopping && !j->killed && j->kill_ns < next) next = j->kill_ns;
  if (j->drain_ns != 0 && j->drain_ns < next) next = j->drain_ns;
  if (next == UINT64_MAX) return -1;
  if (next <= now) return 0;
  return (int)((next - now + 999999u) / 1000000u);
}

/* Fills pfds with the signal pipe and every open stream; returns the count. */
static int fill_pollfds(job_t *j) {
  int i, n = 1;
  j->pfds[0] = (struct pollfd){sig_pipe[0], POLLIN, 0};
  for (i = 0; i < j->o->nranks; i++) {
    run_stream_t *s[2] = {&j->ranks[i].out, &j->ranks[i].err};
    int k;
    for (k = 0; k < 2; k++) {
      if (s[k]->fd < 0) continue;
      j->pfds[n] = (struct pollfd){s[k]->fd, POLLIN, 0};
      j->pstreams[n++] = s[k];
    }
  }
  return n;
}

/* One round: wait for output, a signal or a deadline. 0 when the job is
 * over (all ranks exited and their output was read, or the drain ended). */
static int loop_once(job_t *j) {
  int n = fill_pollfds(j), i;
  if (j->running == 0) {
    uint64_t now = uv_hrtime();
    if (j->drain_ns == 0) j->drain_ns = now + RUN_DRAIN_NS;
    if (n == 1 || now >= j->drain_ns) return 0;
  }
  if (poll(j->pfds, (nfds_t)n, poll_timeout_ms(j)) < 0 && errno != EINTR) {
    run_msg("poll failed: %s; killing the ranks", strerror(errno));
    if (j->code < 0) j->code = RUN_EXIT_SETUP;
    kill_all(j);
    return 0;
  }
  for (i = 1; i < n; i++)
    if (j->pfds[i].revents != 0) run_stream_pump(j->pstreams[i]);
  handle_signals(j);
  check_clock(j);
  return 1;
}

static int start_ranks(job_t *j) {
  int port = j->o->master_port, i;
  if (port == 0 && (port = run_pick_port()) == 0) return -1;
  for (i = 0; i < j->o->nranks; i++) {
    if (run_spawn(j->o, port, i, &j->ranks[i]) != 0) return -1;
    j->running++;
  }
  return 0;
}

static void finish(job_t *j) {
  int i;
  /* Whatever a rank left behind in its process group goes with it. */
  signal_all(j, SIGKILL);
  for (i = 0; i < j->o->nranks; i++) {
    run_stream_close(&j->ranks[i].out);
    run_stream_close(&j->ranks[i].err);
    run_reap(&j->ranks[i]);
  }
}

int run_job(const run_opts_t *o) {
  job_t j;
  int i, nr = o->nranks;
  memset(&j, 0, sizeof j);
  j.o = o;
  j.code = -1;
  j.ranks = calloc((size_t)nr, sizeof *j.ranks);
  j.pfds = calloc((size_t)(2 * nr + 1), sizeof *j.pfds);
  j.pstreams = calloc((size_t)(2 * nr + 1), sizeof *j.pstreams);
  if (j.ranks == NULL || j.pfds == NULL || j.pstreams == NULL) {
    run_msg("out of memory");
    j.code = RUN_EXIT_SETUP;
    goto out;
  }
  for (i = 0; i < nr; i++) j.ranks[i].out.fd = j.ranks[i].err.fd = -1;
  if (setup_signals() != 0) {
    j.code = RUN_EXIT_SETUP;
    goto out;
  }
  if (o->timeout_s > 0)
    j.deadline_ns = uv_hrtime() + (uint64_t)(o->timeout_s * 1e9);
  if (start_ranks(&j) != 0) begin_stop(&j, SIGTERM, RUN_EXIT_SETUP);
  check_exits(&j); /* a rank may have exited before the handler was seen */
  while (loop_once(&j)) {
  }
  finish(&j);
  if (o->keep_going && j.code < 0 && j.kg_ok == 0) j.code = j.kg_sig;
out:
  free(j.ranks);
  free(j.pfds);
  free(j.pstreams);
  return j.code >= 0 ? j.code : 0;
}
