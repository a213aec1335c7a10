/* SPDX-License-Identifier: Apache-2.0 */
/* threads_allreduce.c: data parallelism across threads of one process.
 *
 * N worker threads each own a per-rank comm over the in-process transport
 * and, per step, allreduce (sum) a gradient buffer and check the result.
 * With --abort-at K, rank 0 stops at step K and aborts every rank's comm
 * through their abort handles (as a job-wide watchdog would); the others
 * return from the collective they are blocked in with COLL_ERR_ABORTED (or
 * COLL_ERR_PEER_LOST, when a peer's abort reached them before their own)
 * and exit cleanly.
 *
 *   threads_allreduce [--ranks N] [--steps S] [--count C] [--abort-at K]
 */
#include <coll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int ranks, steps, abort_at;
  size_t count;
  coll_comm_t **comms;
  coll_abort_handle_t **handles;
  int *failures;     /* per rank: wrong results or unexpected errors */
  int *aborted_seen; /* per rank: stopped by the abort (ABORTED/PEER_LOST) */
} job_t;

typedef struct {
  job_t *job;
  int rank;
} worker_arg_t;

static void *worker(void *p) {
  worker_arg_t *a = p;
  job_t *job = a->job;
  int rank = a->rank, n = job->ranks, step, r;
  coll_comm_t *comm = job->comms[rank];
  float *grad = malloc(job->count * sizeof *grad);
  size_t i;
  if (grad == NULL) {
    job->failures[rank]++;
    return NULL;
  }
  for (step = 0; step < job->steps; step++) {
    coll_status_t s;
    if (rank == 0 && step == job->abort_at) {
      printf("rank 0: aborting the job at step %d\n", step);
      for (r = 0; r < n; r++) coll_abort(job->handles[r]);
    }
    for (i = 0; i < job->count; i++)
      grad[i] = (float)((rank + 1) * (int)((i + (size_t)step) % 7));
    s = coll_allreduce(comm, grad, grad, job->count, COLL_F32, COLL_SUM, NULL);
    if (s == COLL_ERR_ABORTED ||
        (s == COLL_ERR_PEER_LOST && job->abort_at >= 0)) {
      job->aborted_seen[rank] = 1;
      printf("rank %d: step %d: %s (%s)\n", rank, step, coll_strerror(s),
             coll_last_error());
      break;
    }
    if (s != COLL_OK) {
      fprintf(stderr, "rank %d: step %d: %s\n", rank, step, coll_last_error());
      job->failures[rank]++;
      break;
    }
    for (i = 0; i < job->count; i++) {
      float want = (float)(n * (n + 1) / 2 * (int)((i + (size_t)step) % 7));
      if (grad[i] != want) {
        fprintf(stderr, "rank %d: step %d: grad[%zu] = %g, want %g\n", rank,
                step, i, (double)grad[i], (double)want);
        job->failures[rank]++;
        break;
      }
    }
  }
  free(grad);
  return NULL;
}

int main(int argc, char **argv) {
  job_t job = {4, 20, -1, 1 << 20, NULL, NULL, NULL, NULL};
  coll_transport_t **ts;
  pthread_t *th;
  worker_arg_t *args;
  int i, bad = 0, aborted = 0;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ranks") == 0)
      job.ranks = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--steps") == 0)
      job.steps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--count") == 0)
      job.count = (size_t)atol(argv[i + 1]);
    else if (strcmp(argv[i], "--abort-at") == 0)
      job.abort_at = atoi(argv[i + 1]);
    else
      break;
  }
  if (i < argc || job.ranks < 1 || job.steps < 0) {
    fprintf(stderr,
            "usage: %s [--ranks N] [--steps S] [--count C] [--abort-at K]\n",
            argv[0]);
    return 2;
  }
  ts = calloc((size_t)job.ranks, sizeof *ts);
  job.comms = calloc((size_t)job.ranks, sizeof *job.comms);
  job.handles = calloc((size_t)job.ranks, sizeof *job.handles);
  job.failures = calloc((size_t)job.ranks, sizeof *job.failures);
  job.aborted_seen = calloc((size_t)job.ranks, sizeof *job.aborted_seen);
  th = calloc((size_t)job.ranks, sizeof *th);
  args = calloc((size_t)job.ranks, sizeof *args);
  if (!ts || !job.comms || !job.handles || !job.failures || !job.aborted_seen ||
      !th || !args) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  if (coll_inproc_create(job.ranks, ts) != COLL_OK) {
    fprintf(stderr, "coll_inproc_create: %s\n", coll_last_error());
    return 1;
  }
  for (i = 0; i < job.ranks; i++) {
    /* The comm owns its transport from here on. */
    if (coll_comm_create(ts[i], NULL, &job.comms[i]) != COLL_OK ||
        coll_comm_abort_handle(job.comms[i], &job.handles[i]) != COLL_OK) {
      fprintf(stderr, "rank %d: %s\n", i, coll_last_error());
      return 1;
    }
  }
  for (i = 0; i < job.ranks; i++) {
    args[i] = (worker_arg_t){&job, i};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (i = 0; i < job.ranks; i++) pthread_join(th[i], NULL);
  for (i = 0; i < job.ranks; i++) {
    bad += job.failures[i];
    aborted += job.aborted_seen[i];
    coll_comm_destroy(job.comms[i]);
    coll_abort_handle_release(job.handles[i]);
  }
  if (bad == 0 && job.abort_at >= 0 && job.abort_at < job.steps &&
      aborted != job.ranks) {
    fprintf(stderr, "only %d of %d ranks saw the abort\n", aborted, job.ranks);
    bad = 1;
  }
  printf("%d ranks, %d steps of %zu floats: %s\n", job.ranks, job.steps,
         job.count,
         bad       ? "FAILED"
         : aborted ? "aborted cleanly"
                   : "all results correct");
  free(ts);
  free(job.comms);
  free(job.handles);
  free(job.failures);
  free(job.aborted_seen);
  free(th);
  free(args);
  return bad ? 1 : 0;
}
