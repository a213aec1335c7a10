/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: coll-perf: ranks as threads (--threads N, over the in-process
 * transport, or on NCCL comms with --nccl) or as processes
 * (coll_comm_init_env), each running the benchmark in bench.c (or the cost
 * table of cost.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "perf.h"

/* The ranks of --threads mode. When one rank's call fails it aborts every
 * comm, so the others return at once instead of waiting on it. */
typedef struct perf_threads {
  const perf_opts_t *o;
  const perf_device_t *dev; /* --nccl */
  int world;
  coll_comm_t **comms;
  coll_abort_handle_t **aborts;
  int *rcs;
} perf_threads_t;

typedef struct perf_thread_arg {
  perf_threads_t *t;
  int rank;
} perf_thread_arg_t;

static void abort_all(void *ctx) {
  perf_threads_t *t = ctx;
  int i;
  for (i = 0; i < t->world; i++)
    if (t->aborts[i] != NULL) coll_abort(t->aborts[i]);
}

static void rank_thread(void *arg) {
  perf_thread_arg_t *a = arg;
  perf_threads_t *t = a->t;
  perf_rank_t pr = {t->o,      t->comms[a->rank], a->rank, t->world,
                    "threads", abort_all,         t};
  if (t->o->cost)
    t->rcs[a->rank] = perf_cost_bench(&pr, t->dev);
  else
    t->rcs[a->rank] =
        t->o->peer_protocol ? perf_peer_bench(&pr) : perf_bench(&pr);
}

/* --nccl: rank r's comm by coll_comm_init_rank on its own thread (the
 * ranks of an NCCL init wait for each other), on the device's rank r. */
typedef struct nccl_init {
  perf_threads_t *t;
  coll_unique_id_t id;
  int rank;
  coll_status_t s;
} nccl_init_t;

static void nccl_init_thread(void *arg) {
  nccl_init_t *a = arg;
  perf_threads_t *t = a->t;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  t->dev->select(a->rank);
  a->s =
      coll_comm_init_rank(a->rank, t->world, &a->id, &cfg, &t->comms[a->rank]);
  if (a->s != COLL_OK)
    fprintf(stderr, "coll-perf: rank %d: coll_comm_init_rank failed: %s: %s\n",
            a->rank, coll_status_name(a->s), coll_last_error());
  else
    a->s = coll_comm_abort_handle(t->comms[a->rank], &t->aborts[a->rank]);
}

static int make_nccl_comms(perf_threads_t *t) {
  nccl_init_t *a = calloc((size_t)t->world, sizeof *a);
  uv_thread_t *th = calloc((size_t)t->world, sizeof *th);
  coll_unique_id_t id;
  coll_status_t s = COLL_ERR_NO_MEMORY;
  int i, started = 0, bad = 0;
  if (a != NULL && th != NULL) s = coll_unique_id_create(&id);
  if (s != COLL_OK) {
    fprintf(stderr, "coll-perf: --nccl: %s: %s\n", coll_status_name(s),
            coll_last_error());
    bad = 1;
  }
  for (i = 0; !bad && i < t->world; i++) {
    a[i] = (nccl_init_t){t, id, i, COLL_OK};
    if (uv_thread_create(&th[i], nccl_init_thread, &a[i]) != 0) break;
    started++;
  }
  for (i = 0; i < started; i++) uv_thread_join(&th[i]);
  for (i = 0; i < started; i++) bad |= a[i].s != COLL_OK;
  bad |= started < t->world;
  free(a);
  free(th);
  return bad ? -1 : 0;
}

static int check_root(const perf_opts_t *o, int world, int print) {
  if (!perf_coll_rooted(o->coll) || o->root < world) return 0;
  if (print)
    fprintf(stderr, "coll-perf: -r %d: the root must be below %d ranks\n",
            o->root, world);
  return PERF_EXIT_USAGE;
}

/* Comms over the in-process transport, and an abort handle for each. */
static int make_comms(perf_threads_t *t) {
  coll_transport_t **tr = calloc((size_t)t->world, sizeof *tr);
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_status_t s = COLL_ERR_NO_MEMORY;
  const char *what = "calloc";
  int i;
  if (tr == NULL) goto out;
  what = "coll_inproc_create";
  if ((s = coll_inproc_create(t->world, tr)) != COLL_OK) goto out;
  for (i = 0; i < t->world && s == COLL_OK; i++) {
    what = "coll_comm_create";
    s = coll_comm_create(tr[i], &cfg, &t->comms[i]);
    tr[i] = NULL; /* the comm owns it now, also after a failure */
    if (s == COLL_OK) {
      what = "coll_comm_abort_handle";
      s = coll_comm_abort_handle(t->comms[i], &t->aborts[i]);
    }
  }
  for (; i < t->world; i++) coll_transport_destroy(tr[i]);
out:
  if (s != COLL_OK)
    fprintf(stderr, "coll-perf: %s failed: %s: %s\n", what, coll_status_name(s),
            coll_last_error());
  free(tr);
  return s == COLL_OK ? 0 : -1;
}

static void free_comms(perf_threads_t *t) {
  int i;
  for (i = 0; i < t->world; i++) {
    coll_comm_destroy(t->comms[i]);
    if (t->aborts[i] != NULL) coll_abort_handle_release(t->aborts[i]);
  }
}

static int run_threads(const perf_opts_t *o, const perf_device_t *dev) {
  perf_threads_t t = {o, dev, o->threads, NULL, NULL, NULL};
  uv_thread_t *th = calloc((size_t)t.world, sizeof *th);
  perf_thread_arg_t *args = calloc((size_t)t.world, sizeof *args);
  int rc = PERF_EXIT_FAILED, started = 0, i;
  t.comms = calloc((size_t)t.world, sizeof *t.comms);
  t.aborts = calloc((size_t)t.world, sizeof *t.aborts);
  t.rcs = calloc((size_t)t.world, sizeof *t.rcs);
  if (th == NULL || args == NULL || t.comms == NULL || t.aborts == NULL ||
      t.rcs == NULL) {
    fprintf(stderr, "coll-perf: out of memory\n");
    goto out;
  }
  if ((o->nccl ? make_nccl_comms(&t) : make_comms(&t)) != 0) goto out_comms;
  for (; started < t.world; started++) {
    args[started] = (perf_thread_arg_t){&t, started};
    if (uv_thread_create(&th[started], rank_thread, &args[started]) != 0) {
      fprintf(stderr, "coll-perf: cannot start rank thread %d\n", started);
      abort_all(&t);
      break;
    }
  }
  for (i = 0; i < started; i++) uv_thread_join(&th[i]);
  rc = started == t.world ? 0 : PERF_EXIT_FAILED;
  for (i = 0; i < started; i++)
    if (t.rcs[i] != 0) rc = t.rcs[i];
out_comms:
  free_comms(&t);
out:
  free(th);
  free(args);
  free(t.comms);
  free(t.aborts);
  free(t.rcs);
  return rc;
}

/* Whether a launcher gave this process a rank (the variables
 * coll_comm_init_env reads it from): without one, the way out of a failed
 * init is a launcher; with one, the library's message says what failed. */
static int under_launcher(void) {
  static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                          "PMI_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
    if (getenv(rank_vars[i]) != NULL) return 1;
  return 0;
}

static int run_env(const perf_opts_t *o) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *comm = NULL;
  perf_rank_t pr = {o, NULL, 0, 0, "processes", NULL, NULL};
  coll_status_t s = coll_comm_init_env(&cfg, &comm);
  int rc;
  if (s != COLL_OK) {
    fprintf(stderr, "coll-perf: coll_comm_init_env failed: %s: %s\n",
            coll_status_name(s), coll_last_error());
    if (!under_launcher())
      fprintf(stderr,
              "coll-perf: run it under a launcher (coll-run -n N "
              "coll-perf ...), or use --threads N\n");
    return PERF_EXIT_FAILED;
  }
  pr.comm = comm;
  pr.rank = coll_comm_rank(comm);
  pr.world = coll_comm_size(comm);
  rc = check_root(o, pr.world, pr.rank == 0);
  if (rc == 0 && o->cost && strcmp(coll_comm_backend(comm), "cpu") != 0) {
    fprintf(stderr,
            "coll-perf: --cost under a launcher takes CPU comms; "
            "for NCCL comms use --threads N --nccl\n");
    rc = PERF_EXIT_USAGE;
  } else if (rc == 0 && o->cost) {
    rc = perf_cost_bench(&pr, NULL);
  } else if (rc == 0) {
    rc = o->peer_protocol ? perf_peer_bench(&pr) : perf_bench(&pr);
  }
  if ((s = coll_comm_destroy(comm)) != COLL_OK) {
    fprintf(stderr, "coll-perf: rank %d: coll_comm_destroy failed: %s: %s\n",
            pr.rank, coll_status_name(s), coll_last_error());
    if (rc == 0) rc = PERF_EXIT_FAILED;
  }
  return rc;
}

int perf_main(int argc, char **argv, const perf_device_t *(*device)(void)) {
  const perf_device_t *dev = NULL;
  perf_opts_t o = {.min_bytes = 32u << 20,
                   .max_bytes = 32u << 20,
                   .factor = 2,
                   .iters = 20,
                   .warmup = 5,
                   .dtype = COLL_F32,
                   .op = COLL_SUM,
                   .check = 1,
                   .coll = PERF_ALLREDUCE,
                   .format = PERF_TEXT,
                   .offset = -1};
  int rc = perf_parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.list_env) {
    perf_print_env();
    return 0;
  }
  if (o.nccl) {
    if (o.threads <= 0 || !o.cost) {
      fprintf(stderr, "coll-perf: --nccl takes --threads N and --cost\n");
      return PERF_EXIT_USAGE;
    }
    dev = device != NULL ? device() : NULL;
    if (dev == NULL || dev->setup(o.threads) != 0) return PERF_EXIT_FAILED;
  }
  if (o.threads > 0) {
    if ((rc = check_root(&o, o.threads, 1)) != 0) return rc;
    return run_threads(&o, dev);
  }
  return run_env(&o);
}
