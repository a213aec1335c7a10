/* SPDX-License-Identifier: Apache-2.0 */
/* multi_gpu_group.c: data parallelism over the GPUs of one process.
 *
 * A group over every visible GPU broadcasts the initial parameters from
 * device 0, then is split into per-rank comms, one per worker thread. Each
 * worker owns one GPU and, per step, computes its gradient, averages it with
 * the others (allreduce AVG on its own CUDA stream) and applies the update.
 * At the end every worker holds the same parameters as a serial run.
 * With fewer than two GPUs it says so and exits 77, the code test drivers
 * (ctest's SKIP_RETURN_CODE, automake) read as "skipped", not as passed.
 *
 *   multi_gpu_group [--steps S] [--count C]
 */
#include <coll.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit code for "cannot run here": fewer than two GPUs. */
#define EXIT_SKIP 77

typedef struct {
  int ndev, steps;
  size_t count;
  coll_comm_t **comms;
  float **params_dev; /* per device, after the broadcast */
  float **result;     /* per worker: its final parameters (host) */
  int *failed;
} job_t;

typedef struct {
  job_t *job;
  int rank;
} worker_arg_t;

/* Rank r's gradient at parameter p: a toy loss pulling p toward r. */
static float grad_of(float p, int rank) { return p - (float)rank; }

static void *worker(void *arg) {
  worker_arg_t *a = arg;
  job_t *job = a->job;
  int rank = a->rank, step;
  size_t i, n = job->count;
  float *params = malloc(n * sizeof *params), *grad = malloc(n * sizeof *grad);
  float *grad_dev = NULL;
  cudaStream_t stream = NULL;
  coll_status_t s;
  /* The comm belongs to this GPU: make it current for our own CUDA calls. */
  cudaSetDevice(rank);
  if (cudaStreamCreate(&stream) != cudaSuccess ||
      cudaMalloc((void **)&grad_dev, n * sizeof(float)) != cudaSuccess) {
    fprintf(stderr, "rank %d: cannot allocate on GPU %d\n", rank, rank);
    job->failed[rank] = 1;
    goto out;
  }
  cudaMemcpy(params, job->params_dev[rank], n * sizeof(float),
             cudaMemcpyDeviceToHost);
  for (step = 0; step < job->steps; step++) {
    for (i = 0; i < n; i++) grad[i] = grad_of(params[i], rank);
    cudaMemcpyAsync(grad_dev, grad, n * sizeof(float), cudaMemcpyHostToDevice,
                    stream);
    /* Ordered after the copy on `stream`; returns once the mean is there. */
    s = coll_allreduce(job->comms[rank], grad_dev, grad_dev, n, COLL_F32,
                       COLL_AVG, stream);
    if (s != COLL_OK) {
      fprintf(stderr, "rank %d step %d: %s\n", rank, step, coll_last_error());
      job->failed[rank] = 1;
      goto out;
    }
    cudaMemcpy(grad, grad_dev, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (i = 0; i < n; i++) params[i] -= 0.1f * grad[i];
  }
  memcpy(job->result[rank], params, n * sizeof(float));
out:
  cudaFree(grad_dev);
  if (stream != NULL) cudaStreamDestroy(stream);
  free(params);
  free(grad);
  return NULL;
}

/* Broadcasts device 0's initial parameters to every GPU of the group. */
static int init_params(job_t *job, coll_group_t *g) {
  float *init = malloc(job->count * sizeof *init);
  size_t i;
  int d;
  for (i = 0; i < job->count; i++) init[i] = (float)(i % 10);
  for (d = 0; d < job->ndev; d++) {
    cudaSetDevice(d);
    if (cudaMalloc((void **)&job->params_dev[d], job->count * sizeof(float)) !=
        cudaSuccess)
      return -1;
    if (d == 0)
      cudaMemcpy(job->params_dev[0], init, job->count * sizeof(float),
                 cudaMemcpyHostToDevice);
  }
  free(init);
  if (coll_group_broadcast(g, (void *const *)job->params_dev, job->ndev,
                           job->count, COLL_F32, 0, NULL, 0) != COLL_OK) {
    fprintf(stderr, "broadcast: %s\n", coll_last_error());
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  job_t job = {0, 20, 1 << 16, NULL, NULL, NULL, NULL};
  coll_group_t *g = NULL;
  pthread_t *th;
  worker_arg_t *args;
  int *devs, d, i, bad = 0;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--steps") == 0)
      job.steps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--count") == 0)
      job.count = (size_t)atol(argv[i + 1]);
  }
  if (cudaGetDeviceCount(&job.ndev) != cudaSuccess) job.ndev = 0;
  if (job.ndev < 2) {
    printf("multi_gpu_group: needs two or more GPUs, found %d; skipped\n",
           job.ndev);
    return EXIT_SKIP;
  }
  devs = malloc((size_t)job.ndev * sizeof *devs);
  job.comms = calloc((size_t)job.ndev, sizeof *job.comms);
  job.params_dev = calloc((size_t)job.ndev, sizeof *job.params_dev);
  job.result = calloc((size_t)job.ndev, sizeof *job.result);
  job.failed = calloc((size_t)job.ndev, sizeof *job.failed);
  th = calloc((size_t)job.ndev, sizeof *th);
  args = calloc((size_t)job.ndev, sizeof *args);
  for (d = 0; d < job.ndev; d++) devs[d] = d;
  if (coll_group_create(devs, job.ndev, &g) != COLL_OK) {
    fprintf(stderr, "group_create: %s\n", coll_last_error());
    return 1;
  }
  if (init_params(&job, g) != 0) return 1;
  /* The group's comms move to the workers; the group is left empty. */
  coll_group_split(g, job.comms);
  coll_group_destroy(g);
  for (d = 0; d < job.ndev; d++) {
    job.result[d] = malloc(job.count * sizeof(float));
    args[d] = (worker_arg_t){&job, d};
    pthread_create(&th[d], NULL, worker, &args[d]);
  }
  for (d = 0; d < job.ndev; d++) pthread_join(th[d], NULL);
  for (d = 0; d < job.ndev; d++) {
    bad |= job.failed[d];
    if (!job.failed[d] &&
        memcmp(job.result[d], job.result[0], job.count * sizeof(float)) != 0)
      bad = 1;
    coll_comm_destroy(job.comms[d]);
    cudaFree(job.params_dev[d]);
    free(job.result[d]);
  }
  printf("multi_gpu_group: %d GPUs, %d steps: %s\n", job.ndev, job.steps,
         bad ? "FAILED" : "all ranks agree");
  free(devs), free(job.comms), free(job.params_dev), free(job.result);
  free(job.failed), free(th), free(args);
  return bad;
}
