/* SPDX-License-Identifier: Apache-2.0 */
/* test_util.c: rank threads with a bounded join, comm setup helpers. */
#include "test_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct rank_arg {
  int rank, world;
  test_rank_fn fn;
  void *arg;
  int *done;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
};

static void *rank_main(void *p) {
  struct rank_arg *a = p;
  a->fn(a->rank, a->world, a->arg);
  pthread_mutex_lock(a->mu);
  (*a->done)++;
  pthread_cond_broadcast(a->cv);
  pthread_mutex_unlock(a->mu);
  return NULL;
}

int64_t test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void test_run_ranks(int world, test_rank_fn fn, void *arg, int64_t timeout_ms,
                    const char *what) {
  pthread_t *th = calloc((size_t)world, sizeof *th);
  struct rank_arg *args = calloc((size_t)world, sizeof *args);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  pthread_condattr_t ca;
  int done = 0, i;
  struct timespec dl;
  if (th == NULL || args == NULL) {
    fprintf(stderr, "test_run_ranks: out of memory\n");
    exit(1);
  }
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &ca);
  for (i = 0; i < world; i++) {
    args[i] = (struct rank_arg){i, world, fn, arg, &done, &mu, &cv};
    if (pthread_create(&th[i], NULL, rank_main, &args[i]) != 0) {
      fprintf(stderr, "test_run_ranks: pthread_create failed\n");
      exit(1);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&mu);
  while (done < world) {
    if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT) {
      fprintf(stderr,
              "HANG: %s: %d of %d rank threads still running after %lld ms\n",
              what ? what : "ranks", world - done, world,
              (long long)timeout_ms);
      fflush(stderr);
      _exit(124);
    }
  }
  pthread_mutex_unlock(&mu);
  for (i = 0; i < world; i++) pthread_join(th[i], NULL);
  pthread_cond_destroy(&cv);
  pthread_condattr_destroy(&ca);
  free(th);
  free(args);
}

int test_inproc_comms(int world, int64_t timeout_ms, coll_comm_t **comms) {
  coll_transport_t **ts = calloc((size_t)world, sizeof *ts);
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  int i;
  if (ts == NULL) return -1;
  cfg.timeout_ms = timeout_ms;
  if (coll_inproc_create(world, ts) != COLL_OK) {
    fprintf(stderr, "coll_inproc_create: %s\n", coll_last_error());
    free(ts);
    return -1;
  }
  for (i = 0; i < world; i++) {
    if (coll_comm_create(ts[i], &cfg, &comms[i]) != COLL_OK) {
      fprintf(stderr, "coll_comm_create: %s\n", coll_last_error());
      while (--i >= 0) coll_comm_destroy(comms[i]);
      free(ts);
      return -1;
    }
  }
  free(ts);
  return 0;
}

void test_destroy_comms(int world, coll_comm_t **comms) {
  int i;
  for (i = 0; i < world; i++) coll_comm_destroy(comms[i]);
}

uint64_t test_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
