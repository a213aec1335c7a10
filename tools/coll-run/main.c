/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: coll-run's command line. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_run.h"

#define RUN_MAX_RANKS 1024

static const char usage_text[] =
    "usage: coll-run -n N [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N ranks of PROGRAM on this host, each with RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, and\n"
    "prefixes every line they print with \"[rank] \". The ranks also get\n"
    "COLL_AUTH_TOKEN, a random secret made for this job, so that only they\n"
    "can join its rendezvous and connect to one another (a COLL_AUTH_TOKEN\n"
    "set already is passed on instead).\n"
    "\n"
    "options:\n"
    "  -n, --nproc N         number of ranks (1..1024)\n"
    "      --master-addr A   MASTER_ADDR for the ranks (default 127.0.0.1)\n"
    "      --master-port P   MASTER_PORT (default: a free port)\n"
    "      --timeout S       stop the job after S seconds, exit code 124\n"
    "      --grace S         seconds between SIGTERM and SIGKILL when\n"
    "                        stopping ranks (default 5)\n"
    "      --drain S         after a rank failed, seconds the others get to\n"
    "                        end on their own (a libcoll rank learns of the\n"
    "                        failure within milliseconds, prints it and\n"
    "                        exits) before they are stopped, so that what\n"
    "                        they print is not lost (default 2; 0: at once)\n"
    "      --bind block|none block (default): the C CPUs coll-run may use are\n"
    "                        cut into N blocks in order and rank r runs on\n"
    "                        block r (one CPU each when N = C; CPU r mod C\n"
    "                        when N > C); none: ranks float over all of\n"
    "                        them\n"
    "      --keep-going      a rank that fails or dies does not stop the\n"
    "                        others (for jobs that shrink and continue);\n"
    "                        every rank's exit is reported\n"
    "  -h, --help            this text\n"
    "\n"
    "When a rank fails, the others are stopped (after --drain) and coll-run\n"
    "exits with the first non-zero exit code (128+N for a rank killed by "
    "signal N). With\n"
    "--keep-going coll-run waits for every rank and exits with the first\n"
    "non-zero code of a rank that exited on its own, else 0 when one exited\n"
    "0, else 128+N of the first rank killed. Ctrl-C\n"
    "or SIGTERM is forwarded to every rank; a second one kills them. Ranks\n"
    "read stdin from /dev/null.\n";

void run_msg(const char *fmt, ...) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "coll-run: ");
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  run_write_all(STDERR_FILENO, buf, (size_t)n);
}

static int usage_error(const char *fmt, const char *arg) {
  char what[512];
  snprintf(what, sizeof what, fmt, arg);
  run_msg("%s", what);
  fprintf(stderr, "Try 'coll-run --help'.\n");
  return RUN_EXIT_USAGE;
}

/* A whole decimal number in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, int *out) {
  char *end = NULL;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* Seconds as a decimal number (fractions allowed), > 0 and finite. */
static int parse_seconds(const char *s, double *out) {
  char *end = NULL;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v <= 0 ||
      v > 1e7)
    return -1;
  *out = v;
  return 0;
}

/* Seconds as a decimal number >= 0 (fractions allowed). */
static int parse_seconds0(const char *s, double *out) {
  if (strcmp(s, "0") == 0) {
    *out = 0;
    return 0;
  }
  return parse_seconds(s, out);
}

/* The option getopt stumbled on: a short one by its letter (it may sit in
 * a group such as -xq), a long one by its word. */
static const char *bad_option(char **argv, char *buf, size_t cap) {
  if (optopt > 0 && optopt < 128) {
    snprintf(buf, cap, "-%c", optopt);
    return buf;
  }
  return argv[optind - 1];
}

enum {
  OPT_ADDR = 256,
  OPT_PORT,
  OPT_TIMEOUT,
  OPT_GRACE,
  OPT_DRAIN,
  OPT_KEEP_GOING,
  OPT_BIND
};

static const struct option long_opts[] = {
    {"nproc", required_argument, NULL, 'n'},
    {"master-addr", required_argument, NULL, OPT_ADDR},
    {"master-port", required_argument, NULL, OPT_PORT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"drain", required_argument, NULL, OPT_DRAIN},
    {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
    {"bind", required_argument, NULL, OPT_BIND},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* Fills o from argv; returns -1 to go on, else the exit code to end with.
 * Option parsing stops at PROGRAM, so its own options are left alone. */
static int parse_args(int argc, char **argv, run_opts_t *o) {
  char name[8];
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:n:h", long_opts, NULL)) != -1) {
    switch (c) {
      case 'n':
        if (parse_int(optarg, 1, RUN_MAX_RANKS, &o->nranks) != 0)
          return usage_error("-n: '%s' is not a rank count in 1..1024", optarg);
        break;
      case OPT_ADDR:
        if (optarg[0] == '\0')
          return usage_error("--master-addr: empty address%s", "");
        o->master_addr = optarg;
        break;
      case OPT_PORT:
        if (parse_int(optarg, 1, 65535, &o->master_port) != 0)
          return usage_error("--master-port: '%s' is not a port in 1..65535",
                             optarg);
        break;
      case OPT_TIMEOUT:
        if (parse_seconds(optarg, &o->timeout_s) != 0)
          return usage_error("--timeout: '%s' is not a number of seconds > 0",
                             optarg);
        break;
      case OPT_KEEP_GOING: o->keep_going = 1; break;
      case OPT_BIND:
        if (strcmp(optarg, "block") == 0)
          o->bind = 1;
        else if (strcmp(optarg, "none") == 0)
          o->bind = 0;
        else
          return usage_error("--bind: '%s' is not block or none", optarg);
        break;
      case OPT_GRACE:
        if (parse_seconds(optarg, &o->grace_s) != 0)
          return usage_error("--grace: '%s' is not a number of seconds > 0",
                             optarg);
        break;
      case OPT_DRAIN:
        if (parse_seconds0(optarg, &o->drain_s) != 0)
          return usage_error("--drain: '%s' is not a number of seconds >= 0",
                             optarg);
        break;
      case 'h': fputs(usage_text, stdout); return 0;
      case ':':
        return usage_error("option '%s' needs a value",
                           bad_option(argv, name, sizeof name));
      default:
        return usage_error("unknown option '%s'",
                           bad_option(argv, name, sizeof name));
    }
  }
  if (o->nranks == 0) return usage_error("-n N is required%s", "");
  if (optind >= argc) return usage_error("no program to run%s", "");
  o->argv = argv + optind;
  return -1;
}

int main(int argc, char **argv) {
  run_opts_t o;
  int rc;
  memset(&o, 0, sizeof o);
  o.master_addr = "127.0.0.1";
  o.grace_s = 5.0;
  o.drain_s = 2.0;
  o.bind = 1;
  rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  if (run_make_token(&o) != 0) return RUN_EXIT_SETUP;
  /* Ranks that float share cores at random: on a small host two ranks
   * woken by each other's loopback traffic often end up on one core and
   * halve a 1 MiB allreduce (docs/performance.md). */
  if (o.bind && sched_getaffinity(0, sizeof o.cpus, &o.cpus) != 0) {
    run_msg(
        "--bind block: cannot read the CPUs this process may use (%s); "
        "ranks are not bound",
        strerror(errno));
    o.bind = 0;
  }
  return run_job(&o);
}
