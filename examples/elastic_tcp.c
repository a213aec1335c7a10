/* SPDX-License-Identifier: Apache-2.0 */
/* elastic_tcp.c: data-parallel training that survives the loss of a rank.
 * Every rank runs full-batch gradient descent for a least-squares model on
 * its shard of a synthetic data set, summing the gradients with
 * coll_allreduce. When a rank dies (kill -9, say), the others' allreduce
 * fails; they call coll_comm_shrink, get a comm of the survivors, agree on
 * the last step every one of them completed, spread the whole data set
 * over themselves and go on.
 *
 *   coll-run -n 4 --keep-going ./elastic_tcp --steps 400 --step-ms 5
 *   (then kill -9 one rank's process while it trains)
 *
 * The gradient of each step is the sum over all samples, however the
 * samples are spread, so the weights after the last step are those of a
 * single process that ran every step on the whole data set whichever rank
 * died and whenever: they are checked against that run, computed here in
 * double precision, to within TOLERANCE (float rounding, and sums taken
 * in another order by another number of ranks). Exit code 0 on every
 * survivor when they match and are identical on all survivors. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define SAMPLES 4096
#define FEATURES 16
#define LEARNING_RATE 0.5
#define SEED 42
#define TOLERANCE 1e-4

typedef struct dataset {
  float x[SAMPLES][FEATURES];
  float y[SAMPLES];
} dataset_t;

typedef struct opts {
  int steps;
  int step_ms;   /* sleep after each step: time to kill a rank mid-run */
  int kill_rank; /* this (original) rank kills itself ... */
  int kill_step; /* ... before this step; -1: never */
} opts_t;

/* splitmix64: the same stream on every rank. */
static double uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-53 * 2.0 - 1.0; /* [-1, 1) */
}

static void make_dataset(dataset_t *d) {
  uint64_t state = SEED;
  int i, j;
  for (i = 0; i < SAMPLES; i++) {
    double y = 0.01 * uniform(&state);
    for (j = 0; j < FEATURES; j++) {
      d->x[i][j] = (float)uniform(&state);
      y += d->x[i][j] * ((j % 5) - 2 + 0.25 * j);
    }
    d->y[i] = (float)y;
  }
}

/* The single process: every step on every sample, in double. */
static void train_serial(const dataset_t *d, int steps, double *w) {
  double g[FEATURES];
  int step, i, j;
  for (j = 0; j < FEATURES; j++) w[j] = 0;
  for (step = 0; step < steps; step++) {
    for (j = 0; j < FEATURES; j++) g[j] = 0;
    for (i = 0; i < SAMPLES; i++) {
      double r = -(double)d->y[i];
      for (j = 0; j < FEATURES; j++) r += d->x[i][j] * w[j];
      for (j = 0; j < FEATURES; j++) g[j] += r * d->x[i][j];
    }
    for (j = 0; j < FEATURES; j++) w[j] -= LEARNING_RATE * g[j] / SAMPLES;
  }
}

/* The gradient's sum over this rank's shard of the current world. */
static void shard_gradient(const dataset_t *d, int rank, int world,
                           const float *w, float *g) {
  int lo = (int)((int64_t)SAMPLES * rank / world);
  int hi = (int)((int64_t)SAMPLES * (rank + 1) / world);
  int i, j;
  for (j = 0; j < FEATURES; j++) g[j] = 0;
  for (i = lo; i < hi; i++) {
    float r = -d->y[i];
    for (j = 0; j < FEATURES; j++) r += d->x[i][j] * w[j];
    for (j = 0; j < FEATURES; j++) g[j] += r * d->x[i][j];
  }
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  if (ms > 0) nanosleep(&ts, NULL);
}

static int parse(int argc, char **argv, opts_t *o) {
  int i;
  o->steps = 200;
  o->step_ms = 0;
  o->kill_rank = -1;
  o->kill_step = -1;
  for (i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--steps") == 0 && v > 0)
      o->steps = v;
    else if (strcmp(argv[i], "--step-ms") == 0 && v >= 0)
      o->step_ms = v;
    else if (strcmp(argv[i], "--kill-rank") == 0 && v >= 0)
      o->kill_rank = v;
    else if (strcmp(argv[i], "--kill-step") == 0 && v >= 0)
      o->kill_step = v;
    else
      break;
  }
  if (i == argc) return 0;
  fprintf(stderr,
          "usage: elastic_tcp [--steps N] [--step-ms MS] [--kill-rank R "
          "--kill-step S]\n");
  return -1;
}

/* The training state a shrink must reconcile: a rank whose last allreduce
 * completed may be one step ahead of one whose allreduce failed. */
typedef struct state {
  int step;
  float w[FEATURES], w_prev[FEATURES];
} state_t;

/* After a shrink: every survivor resumes at the lowest step among them,
 * stepping back once if it is ahead. */
static coll_status_t resume(coll_comm_t *c, state_t *st) {
  int32_t low = st->step;
  coll_status_t s = coll_allreduce(c, &low, &low, 1, COLL_I32, COLL_MIN, NULL);
  if (s != COLL_OK) return s;
  if (st->step == low + 1) memcpy(st->w, st->w_prev, sizeof st->w);
  st->step = low;
  return COLL_OK;
}

/* Trains to the end, shrinking the comm as ranks are lost. Returns the
 * status of the call that could not be recovered from (COLL_OK at the
 * end); *c is the comm in use. */
static coll_status_t train(coll_comm_t **c, const dataset_t *d, const opts_t *o,
                           int first_rank, state_t *st) {
  float g[FEATURES];
  coll_status_t s;
  int j;
  while (st->step < o->steps) {
    int rank = coll_comm_rank(*c), world = coll_comm_size(*c);
    coll_comm_t *nc = NULL;
    if (first_rank == o->kill_rank && st->step == o->kill_step) raise(SIGKILL);
    shard_gradient(d, rank, world, st->w, g);
    s = coll_allreduce(*c, g, g, FEATURES, COLL_F32, COLL_SUM, NULL);
    if (s == COLL_OK) {
      memcpy(st->w_prev, st->w, sizeof st->w);
      for (j = 0; j < FEATURES; j++)
        st->w[j] -= (float)(LEARNING_RATE / SAMPLES) * g[j];
      st->step++;
      sleep_ms(o->step_ms);
      continue;
    }
    printf("rank %d: step %d: %s; shrinking\n", first_rank, st->step,
           coll_last_error());
    do {
      s = coll_comm_shrink(*c, NULL, &nc);
      if (s != COLL_OK) {
        fprintf(stderr, "elastic_tcp: rank %d: coll_comm_shrink: %s: %s\n",
                first_rank, coll_status_name(s), coll_last_error());
        return s;
      }
      coll_comm_destroy(*c);
      *c = nc;
      s = resume(*c, st); /* another loss here: shrink again */
    } while (s != COLL_OK);
    printf("rank %d: now rank %d of %d, resuming at step %d\n", first_rank,
           coll_comm_rank(*c), coll_comm_size(*c), st->step);
  }
  return COLL_OK;
}

int main(int argc, char **argv) {
  static dataset_t data;
  static state_t st;
  double w_ref[FEATURES], diff = 0;
  float hi[FEATURES], lo[FEATURES];
  coll_comm_t *c = NULL;
  coll_status_t s;
  opts_t o;
  int first_rank, same = 1, j;
  if (parse(argc, argv, &o) != 0) return 2;
  /* Control connections for shrink; TCP even where shm could be used. */
  setenv("COLL_ELASTIC", "1", 1);
  setenv("COLL_TRANSPORT", "tcp", 1);
  s = coll_comm_init_env(NULL, &c);
  if (s != COLL_OK) {
    fprintf(stderr,
            "elastic_tcp: coll_comm_init_env: %s: %s\n"
            "elastic_tcp: start it with coll-run -n 4 --keep-going\n",
            coll_status_name(s), coll_last_error());
    return 1;
  }
  first_rank = coll_comm_rank(c);
  make_dataset(&data);
  printf("rank %d: training, %d ranks, %d steps\n", first_rank,
         coll_comm_size(c), o.steps);
  fflush(stdout);
  s = train(&c, &data, &o, first_rank, &st);
  if (s == COLL_OK)
    s = coll_allreduce(c, st.w, hi, FEATURES, COLL_F32, COLL_MAX, NULL);
  if (s == COLL_OK)
    s = coll_allreduce(c, st.w, lo, FEATURES, COLL_F32, COLL_MIN, NULL);
  if (s != COLL_OK) {
    fprintf(stderr, "elastic_tcp: rank %d: %s: %s\n", first_rank,
            coll_status_name(s), coll_last_error());
    coll_comm_destroy(c);
    return 1;
  }
  train_serial(&data, o.steps, w_ref);
  for (j = 0; j < FEATURES; j++) {
    diff = fmax(diff, fabs(st.w[j] - w_ref[j]));
    if (hi[j] != lo[j]) same = 0;
  }
  printf(
      "rank %d: finished as rank %d of %d; identical on all: %s; max |w - "
      "w_reference| = %.3g (tolerance %g): %s\n",
      first_rank, coll_comm_rank(c), coll_comm_size(c), same ? "yes" : "NO",
      diff, TOLERANCE, same && diff <= TOLERANCE ? "match" : "MISMATCH");
  coll_comm_destroy(c);
  return same && diff <= TOLERANCE ? 0 : 1;
}
