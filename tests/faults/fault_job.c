/* SPDX-License-Identifier: Apache-2.0 */
/* fault_job.c: the parent side of a fault job: it forks the helper and
 * the ranks, waits until the ranks are inside the fault's allreduce,
 * injects the fault, lets the late rank in once every other rank ended,
 * and collects what each rank saw. Every wait is bounded; a rank still
 * running at the bound is killed and the job marked hung. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_int.h"

/* Bounds of the job's own steps (a loaded machine makes comms slowly). */
#define UP_MS 60000
#define ENTER_MS 30000
#define EXIT_MS 30000

fj_spec_t fj_spec_default(fj_path_t path) {
  fj_spec_t s;
  memset(&s, 0, sizeof s);
  s.path = path;
  s.world = 4;
  s.count = 4096;
  s.timeout_ms = 30000;
  s.hb_ms = -1;
  s.proxy_lo = 0;
  s.proxy_hi = 1;
  s.before = 1;
  s.tail_ms = 500;
  s.late = -1;
  s.late_ms = 60000;
  s.settle_ms = 30;
  s.bound_ms = 20000;
  return s;
}

const char *fj_path_name(fj_path_t p) {
  switch (p) {
    case FJ_SHM: return "shm";
    case FJ_TCP: return "tcp";
    default: return "two-level";
  }
}

const char *fj_fault_name(fj_fault_t f) {
  static const char *const names[] = {"none", "kill",    "abort",
                                      "stop", "garbage", "partition"};
  return f >= FJ_NONE && f <= FJ_PARTITION ? names[f] : "?";
}

/* A port of 127.0.0.1 that was free a moment ago (rank 0 serves the store
 * on it), or -1. */
static int free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
  if (fd < 0) return -1;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, len) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* A child that dies with the test process rather than outlive it. */
static pid_t spawn(fj_shared_t *sh, int rank) {
  pid_t pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  _exit(rank < 0 ? fj_helper_main(sh) : fj_rank_main(sh, rank));
}

/* 1 once pid exited (its code in *code), 0 while it runs. */
static int reap(pid_t pid, int *code) {
  int st;
  pid_t r = waitpid(pid, &st, WNOHANG);
  if (r != pid) return r < 0;
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return 1;
}

typedef struct job {
  const fj_spec_t *s;
  fj_shared_t *sh;
  fj_result_t *res;
  pid_t helper, pids[FJ_MAXW];
  int exited[FJ_MAXW], stopped;
} job_t;

static void poll_exits(job_t *j) {
  for (int r = 0; r < j->s->world; r++)
    if (!j->exited[r] && j->pids[r] > 0 &&
        reap(j->pids[r], &j->res->r[r].exit_code))
      j->exited[r] = 1;
}

/* Rank r has ended its stream (or its process). */
static int ended(job_t *j, int r) {
  return j->exited[r] || atomic_load(&j->sh->done[r]);
}

static int check_spec(const fj_spec_t *s, fj_result_t *res) {
  const char *bad = NULL;
  if (s->world < 2 || s->world > FJ_MAXW)
    bad = "world out of range";
  else if (s->proxy && s->path == FJ_SHM)
    bad = "the proxy needs TCP links";
  else if ((s->fault == FJ_PARTITION ||
            (s->fault == FJ_GARBAGE && !s->garbage_shm)) &&
           !s->proxy)
    bad = "this fault needs the proxy";
  else if (s->fault == FJ_GARBAGE && s->garbage_shm && s->path != FJ_ROUTE)
    bad = "garbage in shared memory needs the two-level path's messages";
  else if (s->fault != FJ_NONE && (s->victim < 0 || s->victim >= s->world))
    bad = "victim out of range";
  else if (s->count == 0 || s->before < 1)
    bad = "count and before must be at least 1";
  if (bad != NULL) snprintf(res->why, sizeof res->why, "spec: %s", bad);
  return bad != NULL ? -1 : 0;
}

static int start(job_t *j) {
  fj_shared_t *sh = j->sh;
  int64_t end;
  if (j->s->proxy) {
    j->helper = spawn(sh, -1);
    end = fj_now_ms() + 20000;
    while (atomic_load(&sh->help_ready) == 0 && fj_now_ms() < end)
      fj_sleep_ms(2);
    if (atomic_load(&sh->help_ready) != 1) {
      snprintf(j->res->why, sizeof j->res->why, "the helper did not start");
      return -1;
    }
  } else {
    sh->port = free_port();
  }
  for (int r = 0; r < j->s->world; r++) j->pids[r] = spawn(sh, r);
  end = fj_now_ms() + UP_MS;
  for (int r = 0; r < j->s->world; r++) {
    while (!atomic_load(&sh->up[r]) && !ended(j, r) && fj_now_ms() < end) {
      fj_sleep_ms(2);
      poll_exits(j);
    }
    if (!atomic_load(&sh->up[r])) {
      snprintf(j->res->why, sizeof j->res->why, "rank %d's comm: %.280s", r,
               sh->out[r].text[0] ? sh->out[r].text : "never stood");
      return -1;
    }
  }
  return 0;
}

/* Waits until every rank that is not late entered the fault's allreduce
 * (and is inside it, or past it when nobody is late), then settle_ms
 * more. */
static int wait_inside(job_t *j) {
  const fj_spec_t *s = j->s;
  int64_t end = fj_now_ms() + ENTER_MS;
  for (int r = 0; r < s->world; r++) {
    if (r == s->late) continue;
    while (atomic_load(&j->sh->reached[r]) < s->before + 1 && !ended(j, r) &&
           fj_now_ms() < end) {
      fj_sleep_ms(1);
      poll_exits(j);
    }
    if (atomic_load(&j->sh->reached[r]) < s->before + 1) {
      snprintf(j->res->why, sizeof j->res->why,
               "rank %d never entered allreduce %d: %.260s", r, s->before + 1,
               j->sh->out[r].text);
      return -1;
    }
  }
  fj_sleep_ms(s->settle_ms);
  return 0;
}

static int inject(job_t *j) {
  const fj_spec_t *s = j->s;
  fj_shared_t *sh = j->sh;
  int v = s->victim, dir;
  j->res->fault_ms = fj_now_ms();
  switch (s->fault) {
    case FJ_NONE: return 0;
    case FJ_KILL: return kill(j->pids[v], SIGKILL);
    case FJ_STOP: j->stopped = 1; return kill(j->pids[v], SIGSTOP);
    case FJ_ABORT:
    case FJ_GARBAGE:
      if (!s->proxy || s->garbage_shm || s->fault == FJ_ABORT) {
        atomic_store(&sh->cmd[v],
                     s->fault == FJ_ABORT ? FJ_CMD_ABORT : FJ_CMD_GARBAGE);
        return sem_post(&sh->cmd_sem[v]);
      }
      /* The victim's side of the proxied link sends the garbage: the
       * lower rank's bytes go down to the higher one. */
      dir = v == s->proxy_lo ? 1 : 0;
      return fj_helper_call(sh, FJ_HELP_CORRUPT, dir, NULL);
    case FJ_PARTITION: return fj_helper_call(sh, FJ_HELP_BLACKHOLE, 0, NULL);
  }
  return -1;
}

/* Lets the late rank in once every other rank ended (the stopped victim
 * once it ran again, the killed one at once). */
static void maybe_release(job_t *j) {
  const fj_spec_t *s = j->s;
  if (s->late < 0 || atomic_load(&j->sh->release)) return;
  for (int r = 0; r < s->world; r++)
    if (r != s->late && !ended(j, r)) return;
  atomic_store(&j->sh->release, 1);
}

/* After the fault: until every rank ended, resuming a stopped victim when
 * due; a rank running past the bound hung. */
static void follow(job_t *j) {
  const fj_spec_t *s = j->s;
  int64_t end = j->res->fault_ms + s->bound_ms;
  for (;;) {
    int all = 1;
    poll_exits(j);
    if (j->stopped && s->stop_ms >= 0 &&
        fj_now_ms() >= j->res->fault_ms + s->stop_ms) {
      kill(j->pids[s->victim], SIGCONT);
      j->res->resume_ms = fj_now_ms();
      j->stopped = 0;
    }
    maybe_release(j);
    if (fj_now_ms() >=
        j->res->fault_ms +
            (s->fault == FJ_STOP && s->stop_ms > 0 ? s->stop_ms : 0) +
            s->tail_ms)
      atomic_store(&j->sh->stream_stop, 1);
    /* A victim stopped for good is not waited for. */
    for (int r = 0; r < s->world; r++)
      all &= ended(j, r) || (j->stopped && s->stop_ms < 0 && r == s->victim);
    if (all) break;
    if (fj_now_ms() > end) {
      j->res->hung = 1;
      break;
    }
    fj_sleep_ms(1);
  }
}

static void finish(job_t *j) {
  const fj_spec_t *s = j->s;
  int64_t end;
  atomic_store(&j->sh->end, 1);
  atomic_store(&j->sh->release, 1);
  atomic_store(&j->sh->stream_stop, 1);
  if (j->stopped) {
    kill(j->pids[s->victim], SIGKILL);
    kill(j->pids[s->victim], SIGCONT);
  }
  end = fj_now_ms() + EXIT_MS;
  for (int r = 0; r < s->world; r++) {
    if (j->pids[r] <= 0) continue;
    while (!j->exited[r] && fj_now_ms() < end) {
      poll_exits(j);
      if (!j->exited[r]) fj_sleep_ms(2);
    }
    if (!j->exited[r]) {
      kill(j->pids[r], SIGKILL);
      waitpid(j->pids[r], NULL, 0);
      j->res->r[r].exit_code = -1;
      j->res->hung = 1;
    }
  }
  if (j->helper > 0) {
    int code;
    (void)fj_helper_call(j->sh, FJ_HELP_QUIT, 0, NULL);
    end = fj_now_ms() + 10000;
    while (!reap(j->helper, &code) && fj_now_ms() < end) fj_sleep_ms(2);
    kill(j->helper, SIGKILL);
    waitpid(j->helper, NULL, WNOHANG);
  }
}

static fj_shared_t *shared_new(const fj_spec_t *s) {
  fj_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return NULL;
  memset(sh, 0, sizeof *sh);
  sh->spec = *s;
  for (int r = 0; r < FJ_MAXW; r++) sem_init(&sh->cmd_sem[r], 1, 0);
  sem_init(&sh->help_sem, 1, 0);
  sem_init(&sh->help_ack, 1, 0);
  sem_init(&sh->help_lock, 1, 1);
  return sh;
}

static void shared_free(fj_shared_t *sh) {
  for (int r = 0; r < FJ_MAXW; r++) sem_destroy(&sh->cmd_sem[r]);
  sem_destroy(&sh->help_sem);
  sem_destroy(&sh->help_ack);
  sem_destroy(&sh->help_lock);
  munmap(sh, sizeof *sh);
}

int fj_run(const fj_spec_t *spec, fj_result_t *res) {
  job_t j;
  int rc = 0;
  memset(res, 0, sizeof *res);
  if (check_spec(spec, res) != 0) return -1;
  memset(&j, 0, sizeof j);
  j.s = spec;
  j.res = res;
  j.sh = shared_new(spec);
  if (j.sh == NULL) {
    snprintf(res->why, sizeof res->why, "mmap: %s", strerror(errno));
    return -1;
  }
  if (start(&j) != 0 || wait_inside(&j) != 0) {
    rc = -1;
  } else if (inject(&j) != 0) {
    snprintf(res->why, sizeof res->why, "injecting %s into rank %d failed",
             fj_fault_name(spec->fault), spec->victim);
    rc = -1;
  } else {
    follow(&j);
  }
  finish(&j);
  for (int r = 0; r < spec->world; r++) {
    int code = res->r[r].exit_code;
    res->r[r] = j.sh->out[r];
    res->r[r].exit_code = code;
  }
  shared_free(j.sh);
  return rc;
}
