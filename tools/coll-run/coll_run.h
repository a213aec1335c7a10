/* SPDX-License-Identifier: Apache-2.0 */
/* coll_run.h: the pieces of coll-run: options, rank processes, output. */
#ifndef COLL_RUN_H
#define COLL_RUN_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

/* Exit codes of coll-run itself (a rank's own code is passed through). */
#define RUN_EXIT_USAGE 2     /* bad command line */
#define RUN_EXIT_SETUP 1     /* could not start the job (fork, pipe, ...) */
#define RUN_EXIT_TIMEOUT 124 /* --timeout expired, as timeout(1) */
#define RUN_EXIT_NOEXEC 127  /* a rank could not execute the program */

/* Random bytes in the token coll-run makes for a job; the ranks get them
 * as hex. */
#define RUN_TOKEN_BYTES 32

/* What the command line asked for. */
typedef struct run_opts {
  int nranks;
  const char *master_addr;
  int master_port;  /* 0: pick a free one */
  double timeout_s; /* 0: no limit */
  double grace_s;   /* SIGTERM -> SIGKILL delay when stopping ranks */
  double drain_s;   /* after a rank failed: time the others get to end on
                       their own before they are stopped */
  int keep_going;   /* a rank's failure does not stop the others */
  int bind;         /* each rank pinned to its block of `cpus` (--bind) */
  cpu_set_t cpus;   /* the CPUs coll-run itself may run on */
  char **argv;      /* the program and its arguments, NULL-terminated */
  /* COLL_AUTH_TOKEN for the ranks; "": they inherit the environment's. */
  char token[2 * RUN_TOKEN_BYTES + 1];
} run_opts_t;

/* One output stream of a rank (its stdout or stderr): the read end of a
 * pipe and the current line, kept behind its "[rank] " prefix so that a
 * finished line leaves in one write. */
typedef struct run_stream {
  int fd;     /* read end; -1 once the rank closed its end */
  int dst;    /* STDOUT_FILENO or STDERR_FILENO */
  char *line; /* prefix, then the bytes of the unfinished line */
  size_t len; /* bytes used in line, prefix included */
  size_t prefix_len;
} run_stream_t;

/* One rank: a child process, leader of its own process group. */
typedef struct run_rank {
  pid_t pid;  /* also the process group id; 0 if never started */
  int exited; /* its exit was seen; it stays a zombie until run_reap */
  int code;   /* exit code, or 128+signal */
  int sig;    /* the signal that killed it, else 0 */
  run_stream_t out, err;
} run_rank_t;

/* main.c */
void run_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* spawn.c: processes. */
/* Fills o->token with a fresh random secret for the job, unless the
 * environment has COLL_AUTH_TOKEN already (then the ranks inherit it and
 * o->token stays ""). 0, or -1 with a message when no random bytes could
 * be had. */
int run_make_token(run_opts_t *o);
/* A TCP port that is free right now (bind port 0, read it, close); 0 and a
 * message on failure. */
int run_pick_port(void);
/* Starts `rank` with its pipes and environment. 0 on success; -1 with a
 * message when the pipes or the fork failed (nothing is left open). */
int run_spawn(const run_opts_t *o, int port, int rank, run_rank_t *r);
/* Sends sig to the rank's process group (ignored once nothing is left). */
void run_signal(const run_rank_t *r, int sig);
/* Whether the rank exited, without reaping it, so its pid (and so its
 * process group id) cannot be reused while coll-run may still signal it.
 * Returns 1 the first time the exit is seen and fills r->code. */
int run_check_exit(run_rank_t *r);
/* Reaps an exited rank (waits for it if it has not exited yet). */
void run_reap(run_rank_t *r);

/* output.c: "[rank] " prefixed output. */
int run_stream_init(run_stream_t *s, int rank, int dst, int fd);
/* Reads what the pipe holds and writes every finished line. Returns 1 at
 * end of file (the stream is then flushed and closed), else 0. */
int run_stream_pump(run_stream_t *s);
/* Writes a partial last line (ending it with a newline), closes, frees. */
void run_stream_close(run_stream_t *s);
/* write(2) until done; gives up quietly if the reader went away. */
void run_write_all(int fd, const char *buf, size_t len);

/* job.c: the supervision loop. Returns coll-run's exit code. */
int run_job(const run_opts_t *o);

#endif
