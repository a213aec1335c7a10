/* SPDX-License-Identifier: Apache-2.0 */
/* rank_helper.c: a rank program for the coll-run tests; what it does is
 * chosen by its first argument (see usage below). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: rank_helper MODE ...\n"
    "  exit-if R CODE            rank R exits CODE, the others 0\n"
    "  signal-if R SIG           rank R kills itself with SIG, the others "
    "exit 0\n"
    "  fail-sleep R CODE DIR [ignore-term]\n"
    "                            every rank starts a sleeping child, writes\n"
    "                            DIR/child.<rank> and DIR/pid.<rank>; rank R\n"
    "                            waits for all pid files and exits CODE, the\n"
    "                            others sleep (ignoring SIGTERM if asked)\n"
    "  sleep-pid DIR             write DIR/pid.<rank>, sleep\n"
    "  fail-report R CODE MS     rank R exits CODE at once; the others print\n"
    "                            a line into stdout's buffer (no flush), take\n"
    "                            MS ms to learn of it and exit 1\n"
    "  print                     lines on stdout and stderr, a long line, and\n"
    "                            a last line without newline\n"
    "  env                       print the launcher's variables\n"
    "  token                     print COLL_AUTH_TOKEN\n"
    "  affinity                  print the CPUs this rank may run on\n";

static const char *env_str(const char *name) {
  const char *v = getenv(name);
  return v != NULL ? v : "(unset)";
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v != NULL ? atoi(v) : -1;
}

/* Long enough to outlive any test; the launcher is expected to stop it. */
static void sleep_long(void) {
  struct timespec ts = {60, 0};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Writes pid into DIR/what.rank, complete or not at all (rename). */
static int write_pid(const char *dir, const char *what, int rank, pid_t pid) {
  char path[4096], tmp[4200];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "w");
  if (f == NULL) return -1;
  fprintf(f, "%d\n", (int)pid);
  if (fclose(f) != 0) return -1;
  return rename(tmp, path);
}

/* Waits (at most 10 s) until DIR/pid.<r> exists for every rank. */
static void wait_pid_files(const char *dir, int world) {
  char path[4096];
  int r, tries;
  for (tries = 0; tries < 1000; tries++) {
    for (r = 0; r < world; r++) {
      snprintf(path, sizeof path, "%s/pid.%d", dir, r);
      if (access(path, F_OK) != 0) break;
    }
    if (r == world) return;
    sleep_ms(10);
  }
}

static int fail_sleep(int rank, int argc, char **argv) {
  int fail_rank = atoi(argv[2]), code = atoi(argv[3]);
  const char *dir = argv[4];
  int ignore_term = argc > 5 && strcmp(argv[5], "ignore-term") == 0;
  pid_t child;
  if (ignore_term) signal(SIGTERM, SIG_IGN);
  child = fork();
  if (child == 0) {
    sleep_long();
    _exit(0);
  }
  /* The child's pid first: once pid.<rank> exists, child.<rank> does. */
  write_pid(dir, "child", rank, child);
  write_pid(dir, "pid", rank, getpid());
  if (rank != fail_rank) {
    sleep_long();
    return 0;
  }
  wait_pid_files(dir, env_int("WORLD_SIZE"));
  return code;
}

static int print_lines(int rank) {
  static char longline[40001];
  printf("out %d line 1\n", rank);
  printf("out %d line 2\n", rank);
  fflush(stdout);
  fprintf(stderr, "err %d\n", rank);
  memset(longline, 'x', sizeof longline - 1);
  printf("%s\n", longline);
  printf("tail %d", rank);
  return 0;
}

/* "cpus 0 3 5": the CPUs of this process's affinity mask. */
static int print_affinity(void) {
  cpu_set_t set;
  int cpu;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    perror("sched_getaffinity");
    return 1;
  }
  printf("cpus");
  for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &set)) printf(" %d", cpu);
  printf("\n");
  return 0;
}

int main(int argc, char **argv) {
  int rank = env_int("RANK");
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "exit-if") == 0 && argc == 4)
    return rank == atoi(argv[2]) ? atoi(argv[3]) : 0;
  if (strcmp(mode, "signal-if") == 0 && argc == 4) {
    if (rank == atoi(argv[2])) {
      signal(atoi(argv[3]), SIG_DFL);
      raise(atoi(argv[3]));
    }
    return 0;
  }
  if (strcmp(mode, "fail-sleep") == 0 && argc >= 5)
    return fail_sleep(rank, argc, argv);
  if (strcmp(mode, "sleep-pid") == 0 && argc == 3) {
    write_pid(argv[2], "pid", rank, getpid());
    sleep_long();
    return 0;
  }
  if (strcmp(mode, "fail-report") == 0 && argc == 5) {
    if (rank == atoi(argv[2])) return atoi(argv[3]);
    /* stdout is a pipe: the line stays in stdio's buffer until exit. */
    printf("rank %d: saw rank %s fail\n", rank, argv[2]);
    sleep_ms(atol(argv[4]));
    return 1;
  }
  if (strcmp(mode, "print") == 0) return print_lines(rank);
  if (strcmp(mode, "affinity") == 0) return print_affinity();
  if (strcmp(mode, "env") == 0) {
    printf("env %s %s %s %s %s %s\n", env_str("RANK"), env_str("WORLD_SIZE"),
           env_str("LOCAL_RANK"), env_str("LOCAL_WORLD_SIZE"),
           env_str("MASTER_ADDR"), env_str("MASTER_PORT"));
    return 0;
  }
  if (strcmp(mode, "token") == 0) {
    printf("token %s\n", env_str("COLL_AUTH_TOKEN"));
    return 0;
  }
  fputs(usage, stderr);
  return 2;
}
