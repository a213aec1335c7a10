/* SPDX-License-Identifier: Apache-2.0 */
/* env_rank.c: one rank of an env:// job, for the multi-process and
 * multi-namespace tests. Creates its comm with coll_comm_init_env, runs an
 * allreduce and a few other collectives, checks every result against
 * values computed here, and exits 0 when all match.
 *
 *   env_rank [--expect-fail TEXT]
 *
 * With --expect-fail, it exits 0 only if coll_comm_init_env fails with a
 * message containing TEXT. Exit codes: 0 ok, 1 a wrong result or failed
 * collective, 2 init failed, 3 usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

#define N_SMALL 1000
#define N_LARGE (256 * 1024) /* several ring segments per rank */

static int fails;

static void check(int ok, int rank, const char *what) {
  if (ok) return;
  fprintf(stderr, "env_rank %d: %s: wrong result\n", rank, what);
  fails++;
}

static int ran(coll_status_t s, int rank, const char *what) {
  if (s == COLL_OK) return 1;
  fprintf(stderr, "env_rank %d: %s failed: %s: %s\n", rank, what,
          coll_status_name(s), coll_last_error());
  fails++;
  return 0;
}

/* Sum of (r+1)*v over ranks: small integers, exact in f32. */
static void allreduce_f32(coll_comm_t *c, int rank, int world, size_t n) {
  float *x = malloc(n * sizeof *x);
  float tri = (float)world * (float)(world + 1) / 2.0f;
  size_t i;
  int ok = 1;
  if (x == NULL) {
    fails++;
    return;
  }
  for (i = 0; i < n; i++) x[i] = (float)(rank + 1) * (float)(i % 13 + 1);
  if (ran(coll_allreduce(c, x, x, n, COLL_F32, COLL_SUM, NULL), rank,
          "allreduce f32")) {
    for (i = 0; i < n; i++) ok &= x[i] == tri * (float)(i % 13 + 1);
    check(ok, rank, "allreduce f32 sum");
  }
  free(x);
}

static void others(coll_comm_t *c, int rank, int world) {
  int64_t mx = rank * 10 + 7, seen;
  int32_t b[16], *g = calloc((size_t)world * 4, sizeof *g), mine[4];
  int i, ok = 1;
  if (g == NULL) {
    fails++;
    return;
  }
  if (ran(coll_allreduce(c, &mx, &seen, 1, COLL_I64, COLL_MAX, NULL), rank,
          "allreduce i64 max"))
    check(seen == (world - 1) * 10 + 7, rank, "allreduce i64 max");
  for (i = 0; i < 16; i++) b[i] = rank == world - 1 ? 1000 + i : -1;
  if (ran(coll_broadcast(c, b, 16, COLL_I32, world - 1, NULL), rank,
          "broadcast")) {
    for (i = 0; i < 16; i++) ok &= b[i] == 1000 + i;
    check(ok, rank, "broadcast");
  }
  for (i = 0; i < 4; i++) mine[i] = rank * 100 + i;
  if (ran(coll_allgather(c, mine, g, 4, COLL_I32, NULL), rank, "allgather")) {
    ok = 1;
    for (i = 0; i < world * 4; i++) ok &= g[i] == (i / 4) * 100 + i % 4;
    check(ok, rank, "allgather");
  }
  ran(coll_barrier(c), rank, "barrier");
  free(g);
}

int main(int argc, char **argv) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  const char *expect = NULL;
  coll_comm_t *c = NULL;
  coll_status_t s;
  int rank, world;
  if (argc == 3 && strcmp(argv[1], "--expect-fail") == 0) {
    expect = argv[2];
  } else if (argc != 1) {
    fprintf(stderr, "usage: env_rank [--expect-fail TEXT]\n");
    return 3;
  }
  cfg.name = "env_rank";
  s = coll_comm_init_env(&cfg, &c);
  if (expect != NULL) {
    if (s != COLL_OK && strstr(coll_last_error(), expect) != NULL) {
      printf("env_rank: failed as expected: %s: %s\n", coll_status_name(s),
             coll_last_error());
      return 0;
    }
    fprintf(stderr, "env_rank: expected a failure with \"%s\", got %s: %s\n",
            expect, coll_status_name(s), coll_last_error());
    coll_comm_destroy(c);
    return 2;
  }
  if (s != COLL_OK) {
    fprintf(stderr, "env_rank: coll_comm_init_env: %s: %s\n",
            coll_status_name(s), coll_last_error());
    return 2;
  }
  rank = coll_comm_rank(c);
  world = coll_comm_size(c);
  allreduce_f32(c, rank, world, N_SMALL);
  allreduce_f32(c, rank, world, N_LARGE);
  others(c, rank, world);
  s = coll_comm_destroy(c);
  if (s != COLL_OK) ran(s, rank, "comm_destroy");
  if (fails > 0) return 1;
  printf("env_rank: rank %d of %d ok (%s)\n", rank, world,
         "allreduce, "
         "broadcast, allgather, barrier");
  return 0;
}
