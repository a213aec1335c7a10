/* SPDX-License-Identifier: Apache-2.0 */
/* ddp_tcp.c: data-parallel training over processes. Every rank trains the
 * same linear model on its shard of a synthetic data set; after each step's
 * backward pass the gradients are averaged with coll_allreduce(COLL_AVG),
 * so every rank takes the same step, the one a single process would take on
 * the whole data set.
 *
 *   coll-run -n 4 ./ddp_tcp
 *
 * (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
 * At the end it checks that all ranks hold identical weights, and that
 * they match a single-process run, computed here in double precision, to
 * within TOLERANCE. Exit code 0 when both hold. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"

#define SAMPLES 4096
#define FEATURES 16
#define STEPS 100
#define LEARNING_RATE 0.5
#define SEED 42
/* The distributed run works in float and sums in a different order than
 * the double-precision reference; both converge to the same weights, so
 * what is left is float rounding, far below this. */
#define TOLERANCE 1e-4

typedef struct dataset {
  float x[SAMPLES][FEATURES];
  float y[SAMPLES];
} dataset_t;

/* splitmix64: the same stream on every rank, so every rank builds the same
 * data set and then keeps only its shard. */
static double uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-53 * 2.0 - 1.0; /* [-1, 1) */
}

/* y = x . w_true + small noise, with x uniform in [-1, 1). */
static void make_dataset(dataset_t *d, double *w_true) {
  uint64_t state = SEED;
  int i, j;
  for (j = 0; j < FEATURES; j++) w_true[j] = (j % 5) - 2 + 0.25 * j;
  for (i = 0; i < SAMPLES; i++) {
    double y = 0.01 * uniform(&state);
    for (j = 0; j < FEATURES; j++) {
      d->x[i][j] = (float)uniform(&state);
      y += d->x[i][j] * w_true[j];
    }
    d->y[i] = (float)y;
  }
}

/* The single-process reference: full-batch gradient descent on all
 * samples, in double. */
static void train_serial(const dataset_t *d, double *w) {
  double g[FEATURES];
  int step, i, j;
  for (j = 0; j < FEATURES; j++) w[j] = 0;
  for (step = 0; step < STEPS; step++) {
    for (j = 0; j < FEATURES; j++) g[j] = 0;
    for (i = 0; i < SAMPLES; i++) {
      double r = -(double)d->y[i];
      for (j = 0; j < FEATURES; j++) r += d->x[i][j] * w[j];
      for (j = 0; j < FEATURES; j++) g[j] += r * d->x[i][j];
    }
    for (j = 0; j < FEATURES; j++) w[j] -= LEARNING_RATE * g[j] / SAMPLES;
  }
}

/* This rank's share of the gradient of the mean squared error (and of the
 * loss, in g[FEATURES]), scaled by world/SAMPLES: the average over ranks is
 * then the gradient over the whole data set, also when shards differ in
 * size by one sample. */
static void local_gradient(const dataset_t *d, int lo, int hi, int world,
                           const float *w, float *g) {
  float scale = (float)world / SAMPLES;
  int i, j;
  for (j = 0; j <= FEATURES; j++) g[j] = 0;
  for (i = lo; i < hi; i++) {
    float r = -d->y[i];
    for (j = 0; j < FEATURES; j++) r += d->x[i][j] * w[j];
    for (j = 0; j < FEATURES; j++) g[j] += r * d->x[i][j];
    g[FEATURES] += 0.5f * r * r;
  }
  for (j = 0; j <= FEATURES; j++) g[j] *= scale;
}

static int report(int rank, coll_status_t s, const char *what) {
  fprintf(stderr, "ddp_tcp: rank %d: %s failed: %s: %s\n", rank, what,
          coll_status_name(s), coll_last_error());
  return 1;
}

/* Data-parallel training: local backward pass, average, identical step. */
static int train(coll_comm_t *c, const dataset_t *d, float *w) {
  int rank = coll_comm_rank(c), world = coll_comm_size(c), step, j;
  int lo = (int)((int64_t)SAMPLES * rank / world);
  int hi = (int)((int64_t)SAMPLES * (rank + 1) / world);
  float g[FEATURES + 1];
  coll_status_t s;
  for (j = 0; j < FEATURES; j++) w[j] = 0;
  for (step = 0; step < STEPS; step++) {
    local_gradient(d, lo, hi, world, w, g);
    s = coll_allreduce(c, g, g, FEATURES + 1, COLL_F32, COLL_AVG, NULL);
    if (s != COLL_OK) return report(rank, s, "allreduce of the gradients");
    for (j = 0; j < FEATURES; j++) w[j] -= (float)LEARNING_RATE * g[j];
    if (rank == 0 && (step % 20 == 0 || step == STEPS - 1))
      printf("step %3d  loss %.6f\n", step, g[FEATURES]);
  }
  return 0;
}

/* Sets *same to 1 if every rank holds bit-identical weights (their max and
 * min over ranks agree). Returns 0, or 1 if a call failed. */
static int weights_identical(coll_comm_t *c, const float *w, int *same) {
  float hi[FEATURES], lo[FEATURES];
  coll_status_t s;
  int j;
  s = coll_allreduce(c, w, hi, FEATURES, COLL_F32, COLL_MAX, NULL);
  if (s == COLL_OK)
    s = coll_allreduce(c, w, lo, FEATURES, COLL_F32, COLL_MIN, NULL);
  if (s != COLL_OK)
    return report(coll_comm_rank(c), s, "allreduce of the weights");
  *same = 1;
  for (j = 0; j < FEATURES; j++)
    if (hi[j] != lo[j]) *same = 0;
  return 0;
}

int main(void) {
  static dataset_t data;
  double w_true[FEATURES], w_ref[FEATURES], diff = 0, err = 0;
  float w[FEATURES];
  coll_comm_t *c = NULL;
  coll_status_t s = coll_comm_init_env(NULL, &c);
  int rank, same = 0, rc, j;
  if (s != COLL_OK) {
    fprintf(stderr,
            "ddp_tcp: coll_comm_init_env failed: %s: %s\n"
            "ddp_tcp: start it with a launcher, e.g. coll-run -n 4 ./ddp_tcp\n",
            coll_status_name(s), coll_last_error());
    return 1;
  }
  rank = coll_comm_rank(c);
  if (rank == 0)
    printf("ddp_tcp: %d ranks, %d samples, %d features, %d steps\n",
           coll_comm_size(c), SAMPLES, FEATURES, STEPS);
  make_dataset(&data, w_true);
  rc = train(c, &data, w);
  if (rc == 0) rc = weights_identical(c, w, &same);
  if (rc == 0) {
    train_serial(&data, w_ref);
    for (j = 0; j < FEATURES; j++) {
      diff = fmax(diff, fabs(w[j] - w_ref[j]));
      err = fmax(err, fabs(w[j] - w_true[j]));
    }
    if (rank == 0) {
      printf("weights identical on all ranks: %s\n", same ? "yes" : "NO");
      printf("max |w - w_single_process| = %.3g (tolerance %g)\n", diff,
             TOLERANCE);
      printf("max |w - w_true| = %.3g\n", err);
    }
    rc = same && diff <= TOLERANCE ? 0 : 1;
  }
  s = coll_comm_destroy(c);
  if (s != COLL_OK && rc == 0) rc = report(rank, s, "coll_comm_destroy");
  return rc;
}
