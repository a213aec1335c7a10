/* SPDX-License-Identifier: Apache-2.0 */
/* args.c: coll-perf's command line, in the shape of nccl-tests'. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf.h"

static const char usage_text[] =
    "usage: coll-perf [options]\n"
    "\n"
    "Measures a libcoll collective over a range of sizes, like nccl-tests.\n"
    "Ranks are threads of this process (--threads N), or processes started\n"
    "by a launcher: coll-run -n N coll-perf ..., torchrun --standalone\n"
    "--no_python (docs/launching.md), or mpirun/srun with MASTER_ADDR and\n"
    "MASTER_PORT exported. Only rank 0 prints.\n"
    "\n"
    "  -b, --minbytes B      smallest size (K, M, G suffixes; default 32M)\n"
    "  -e, --maxbytes B      largest size (default 32M)\n"
    "  -f, --stepfactor F    size multiplier between steps (default 2)\n"
    "  -n, --iters N         timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N  untimed iterations first (default 5)\n"
    "  -d, --datatype T      f16 bf16 f32 f64 i8 u8 i32 i64, or all\n"
    "                        (default f32)\n"
    "  -o, --op OP           sum prod max min avg, or all (default sum)\n"
    "  -c, --check 0|1       verify every result (default 1)\n"
    "  -r, --root R          root of broadcast and reduce (default 0)\n"
    "  -C, --coll NAME       allreduce allgather reduce-scatter broadcast\n"
    "                        reduce barrier (default allreduce)\n"
    "      --csv             comma-separated rows instead of the table\n"
    "      --json            one JSON object instead of the table\n"
    "      --threads N       N ranks as threads (in-process transport)\n"
    "      --env             list the environment variables libcoll reads\n"
    "      --peer-protocol   the measurement of bench/'s drivers (bench/\n"
    "                        bench_loop.h): in-place f32 SUM allreduce of 4K "
    "64K\n"
    "                        1M 16M 64M (those within -b/-e if given), timed\n"
    "                        for BENCH_SECONDS (default 0.5) each, in their\n"
    "                        table; -n -w -d -o -c -C do not apply\n"
    "      --cost            the per-call cost of an f32 sum allreduce "
    "instead\n"
    "                        of the table: until coll_iallreduce returns and\n"
    "                        until coll_wait returned, the slowest rank's\n"
    "                        median, in us (-b -e -f -n -w apply)\n"
    "      --nccl            with --threads N and --cost: NCCL comms, rank r\n"
    "                        on CUDA device r, device buffers\n"
    "      --offset B        every buffer starts B bytes into a page (a\n"
    "                        multiple of 16 up to 4080; default: where\n"
    "                        malloc puts it); copies' speed can hang on it\n"
    "  -h, --help            this text\n"
    "\n"
    "algbw = size / time (GB = 1e9 bytes); busbw = algbw * 2(n-1)/n for\n"
    "allreduce, (n-1)/n for allgather and reduce-scatter, 1 for broadcast\n"
    "and reduce. time is the slowest rank's mean time per iteration. Exit\n"
    "code 1 if any element was wrong or any call failed.\n";

static const char *const coll_names[PERF_COLL_COUNT] = {
    "allreduce", "allgather", "reduce-scatter",
    "broadcast", "reduce",    "barrier"};

const char *perf_coll_name(perf_coll_t c) {
  return (unsigned)c < PERF_COLL_COUNT ? coll_names[c] : "?";
}

int perf_coll_reduces(perf_coll_t c) {
  return c == PERF_ALLREDUCE || c == PERF_REDUCE_SCATTER || c == PERF_REDUCE;
}

int perf_coll_rooted(perf_coll_t c) {
  return c == PERF_BROADCAST || c == PERF_REDUCE;
}

/* Names nccl-tests users type, beside libcoll's own. */
static const struct {
  const char *name;
  coll_dtype_t dt;
} dtype_aliases[] = {
    {"half", COLL_F16},    {"float16", COLL_F16}, {"bfloat16", COLL_BF16},
    {"float", COLL_F32},   {"float32", COLL_F32}, {"double", COLL_F64},
    {"float64", COLL_F64}, {"int8", COLL_I8},     {"char", COLL_I8},
    {"uint8", COLL_U8},    {"int32", COLL_I32},   {"int", COLL_I32},
    {"int64", COLL_I64}};

static int parse_dtype(const char *s, coll_dtype_t *out) {
  size_t i;
  int d;
  for (d = 0; d < COLL_DTYPE_COUNT; d++)
    if (strcasecmp(s, coll_dtype_name((coll_dtype_t)d)) == 0) {
      *out = (coll_dtype_t)d;
      return 0;
    }
  for (i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
    if (strcasecmp(s, dtype_aliases[i].name) == 0) {
      *out = dtype_aliases[i].dt;
      return 0;
    }
  return -1;
}

static int parse_op(const char *s, coll_op_t *out) {
  int op;
  for (op = 0; op < COLL_OP_COUNT; op++)
    if (strcasecmp(s, coll_op_name((coll_op_t)op)) == 0) {
      *out = (coll_op_t)op;
      return 0;
    }
  return -1;
}

static int parse_coll(const char *s, perf_coll_t *out) {
  int c;
  for (c = 0; c < PERF_COLL_COUNT; c++)
    if (strcasecmp(s, coll_names[c]) == 0 ||
        (c == PERF_REDUCE_SCATTER && strcasecmp(s, "reducescatter") == 0)) {
      *out = (perf_coll_t)c;
      return 0;
    }
  return -1;
}

/* "4096", "64K", "1M", "2G" (powers of 1024, as nccl-tests). */
static int parse_bytes(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v, mul = 1;
  if (s[0] < '0' || s[0] > '9') return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return -1;
  switch (*end) {
    case 'k':
    case 'K':
      mul = 1ull << 10;
      end++;
      break;
    case 'm':
    case 'M':
      mul = 1ull << 20;
      end++;
      break;
    case 'g':
    case 'G':
      mul = 1ull << 30;
      end++;
      break;
    default: break;
  }
  if (*end != '\0' || v == 0 || v > (unsigned long long)SIZE_MAX / mul)
    return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out) {
  char *end = NULL;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int usage_error(const char *opt, const char *arg, const char *want) {
  fprintf(stderr, "coll-perf: %s: '%s' is not %s\nTry 'coll-perf --help'.\n",
          opt, arg, want);
  return PERF_EXIT_USAGE;
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
  OPT_CSV = 256,
  OPT_JSON,
  OPT_THREADS,
  OPT_ENV,
  OPT_PEER,
  OPT_OFFSET,
  OPT_COST,
  OPT_NCCL
};

static const struct option long_opts[] = {
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"check", required_argument, NULL, 'c'},
    {"root", required_argument, NULL, 'r'},
    {"coll", required_argument, NULL, 'C'},
    {"csv", no_argument, NULL, OPT_CSV},
    {"json", no_argument, NULL, OPT_JSON},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"env", no_argument, NULL, OPT_ENV},
    {"peer-protocol", no_argument, NULL, OPT_PEER},
    {"offset", required_argument, NULL, OPT_OFFSET},
    {"cost", no_argument, NULL, OPT_COST},
    {"nccl", no_argument, NULL, OPT_NCCL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option; returns -1 to go on, else the exit code. */
static int parse_one(int c, const char *arg, perf_opts_t *o) {
  int f = 0;
  switch (c) {
    case 'b':
      if (parse_bytes(arg, &o->min_bytes) == 0) return -1;
      return usage_error("-b", arg, "a size in bytes >= 1 (K, M, G)");
    case 'e':
      if (parse_bytes(arg, &o->max_bytes) == 0) return -1;
      return usage_error("-e", arg, "a size in bytes >= 1 (K, M, G)");
    case 'f':
      if (parse_int(arg, 2, 1 << 20, &f) == 0) {
        o->factor = (size_t)f;
        return -1;
      }
      return usage_error("-f", arg, "a factor >= 2");
    case 'n':
      if (parse_int(arg, 1, 1 << 30, &o->iters) == 0) return -1;
      return usage_error("-n", arg, "a number of iterations >= 1");
    case 'w':
      if (parse_int(arg, 0, 1 << 30, &o->warmup) == 0) return -1;
      return usage_error("-w", arg, "a number of iterations >= 0");
    case 'd':
      o->all_dtypes = strcasecmp(arg, "all") == 0;
      if (o->all_dtypes || parse_dtype(arg, &o->dtype) == 0) return -1;
      return usage_error("-d", arg, "f16 bf16 f32 f64 i8 u8 i32 i64 or all");
    case 'o':
      o->all_ops = strcasecmp(arg, "all") == 0;
      if (o->all_ops || parse_op(arg, &o->op) == 0) return -1;
      return usage_error("-o", arg, "sum prod max min avg or all");
    case 'c':
      if (parse_int(arg, 0, 1, &o->check) == 0) return -1;
      return usage_error("-c", arg, "0 or 1");
    case 'r':
      if (parse_int(arg, 0, 1 << 20, &o->root) == 0) return -1;
      return usage_error("-r", arg, "a rank >= 0");
    case 'C':
      if (parse_coll(arg, &o->coll) == 0) return -1;
      return usage_error("-C", arg,
                         "allreduce allgather reduce-scatter broadcast "
                         "reduce or barrier");
    case OPT_THREADS:
      if (parse_int(arg, 1, 1024, &o->threads) == 0) return -1;
      return usage_error("--threads", arg, "a rank count in 1..1024");
    case OPT_CSV: o->format = PERF_CSV; return -1;
    case OPT_JSON: o->format = PERF_JSON; return -1;
    case OPT_ENV: o->list_env = 1; return -1;
    case OPT_PEER: o->peer_protocol = 1; return -1;
    case OPT_COST: o->cost = 1; return -1;
    case OPT_NCCL: o->nccl = 1; return -1;
    case OPT_OFFSET:
      if (parse_int(arg, 0, 4080, &o->offset) == 0 && o->offset % 16 == 0)
        return -1;
      return usage_error("--offset", arg,
                         "a multiple of 16 in 0..4080 (malloc's alignment)");
    default: return PERF_EXIT_USAGE;
  }
}

int perf_parse_args(int argc, char **argv, perf_opts_t *o) {
  char name[8];
  int c, rc, csv = 0, json = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":b:e:f:n:w:d:o:c:r:C:h", long_opts,
                          NULL)) != -1) {
    if (c == 'h') {
      fputs(usage_text, stdout);
      return 0;
    }
    if (c == ':' || c == '?') {
      fprintf(stderr, "coll-perf: %s '%s'\nTry 'coll-perf --help'.\n",
              c == ':' ? "missing value for option" : "unknown option",
              bad_option(argv, name, sizeof name));
      return PERF_EXIT_USAGE;
    }
    csv |= c == OPT_CSV;
    o->sizes_given |= (c == 'b' ? 1 : 0) | (c == 'e' ? 2 : 0);
    json |= c == OPT_JSON;
    if ((rc = parse_one(c, optarg, o)) >= 0) return rc;
  }
  if (optind < argc) {
    fprintf(stderr, "coll-perf: unexpected argument '%s'\n", argv[optind]);
    return PERF_EXIT_USAGE;
  }
  if (csv && json) {
    fprintf(stderr, "coll-perf: --csv and --json exclude each other\n");
    return PERF_EXIT_USAGE;
  }
  if (o->cost && (csv || json || o->peer_protocol)) {
    fprintf(stderr,
            "coll-perf: --cost prints its own table; it excludes --csv, "
            "--json and --peer-protocol\n");
    return PERF_EXIT_USAGE;
  }
  if (o->peer_protocol && (csv || json)) {
    fprintf(stderr,
            "coll-perf: --peer-protocol prints the peers' table; it "
            "excludes --csv and --json\n");
    return PERF_EXIT_USAGE;
  }
  /* The peers' sizes, limited by what was given. */
  if (o->peer_protocol && !(o->sizes_given & 1)) o->min_bytes = 1;
  if (o->peer_protocol && !(o->sizes_given & 2)) o->max_bytes = SIZE_MAX;
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "coll-perf: -b %zu is larger than -e %zu\n", o->min_bytes,
            o->max_bytes);
    return PERF_EXIT_USAGE;
  }
  return -1;
}
