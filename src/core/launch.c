/* SPDX-License-Identifier: Apache-2.0 */
/* launch.c: rank, world size and local rank from the variables that
 * torchrun, mpirun, PMI launchers and srun set (see launch.h for the
 * order). Reading is quiet except for the values it refuses. */
#include "core/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

/* No local variable of its own. */
#define NO_VAR COLL_ENV_COUNT

typedef struct source {
  const char *name;
  coll_env_t rank, world;
  coll_env_t local_rank, local_world; /* NO_VAR: none */
} source_t;

static const source_t sources[] = {
    {"torchrun", COLL_ENV_RANK, COLL_ENV_WORLD_SIZE, COLL_ENV_LOCAL_RANK,
     COLL_ENV_LOCAL_WORLD_SIZE},
    {"Open MPI's mpirun", COLL_ENV_OMPI_RANK, COLL_ENV_OMPI_SIZE,
     COLL_ENV_OMPI_LOCAL_RANK, COLL_ENV_OMPI_LOCAL_SIZE},
    {"a PMI launcher", COLL_ENV_PMI_RANK, COLL_ENV_PMI_SIZE, NO_VAR, NO_VAR},
    /* Slurm's local world size comes from SLURM_STEP_TASKS_PER_NODE. */
    {"Slurm's srun", COLL_ENV_SLURM_PROCID, COLL_ENV_SLURM_NTASKS,
     COLL_ENV_SLURM_LOCALID, NO_VAR},
};
#define NSOURCES (int)(sizeof sources / sizeof sources[0])

/* The first source that sets its rank or its world variable; NULL when
 * none does. */
static const source_t *chosen(void) {
  int i;
  for (i = 0; i < NSOURCES; i++)
    if (coll__env(sources[i].rank) != NULL ||
        coll__env(sources[i].world) != NULL)
      return &sources[i];
  return NULL;
}

/* A decimal within [lo, hi] from variable id; `range` says which values
 * are allowed, for the message. */
static coll_status_t parse(coll_env_t id, int64_t lo, int64_t hi,
                           const char *range, int *out) {
  const char *name = coll__env_name(id), *v = coll__env(id);
  char *end = NULL;
  long long x;
  errno = 0;
  x = strtoll(v, &end, 10);
  if (errno == ERANGE)
    return coll__err(COLL_ERR_INVALID_ARG, "%s=%s is out of range (%s)", name,
                     v, range);
  if (errno != 0 || end == v || *end != '\0')
    return coll__err(COLL_ERR_INVALID_ARG, "%s='%s' is not a number", name, v);
  if (x < lo || x > hi)
    return coll__err(COLL_ERR_INVALID_ARG, "%s=%lld is out of range (%s)", name,
                     x, range);
  *out = (int)x;
  return COLL_OK;
}

static coll_status_t none_set(void) {
  return coll__err(COLL_ERR_INVALID_ARG,
                   "no rank in the environment: RANK and WORLD_SIZE are not "
                   "set (torchrun), nor OMPI_COMM_WORLD_RANK and "
                   "OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_RANK and "
                   "PMI_SIZE (a PMI launcher: MPICH, Intel MPI), "
                   "SLURM_PROCID and SLURM_NTASKS (Slurm's srun)");
}

/* Says at INFO which later sources were ignored, when they disagree. */
static void note_ignored(const source_t *used, const coll_launch_t *l) {
  const source_t *s;
  int64_t r, w;
  for (s = used + 1; s < sources + NSOURCES; s++) {
    if (coll__env_parse_int(s->rank, &r) != 1 ||
        coll__env_parse_int(s->world, &w) != 1 ||
        (r == l->rank && w == l->world))
      continue;
    COLL_INFO(COLL_LOG_INIT,
              "%s=%d and %s=%d (%s) are used; %s=%lld and %s=%lld (%s) "
              "are ignored",
              l->rank_var, l->rank, l->world_var, l->world, l->source,
              coll__env_name(s->rank), (long long)r, coll__env_name(s->world),
              (long long)w, s->name);
  }
}

coll_status_t coll__launch_read(int world_max, coll_launch_t *out) {
  const source_t *s = chosen();
  const char *rank_name, *world_name;
  char range[96];
  if (s == NULL) return none_set();
  rank_name = coll__env_name(s->rank);
  world_name = coll__env_name(s->world);
  if (coll__env(s->rank) == NULL || coll__env(s->world) == NULL) {
    int rank_missing = coll__env(s->rank) == NULL;
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s is not set but %s=%s is (%s sets both)",
                     rank_missing ? rank_name : world_name,
                     rank_missing ? world_name : rank_name,
                     coll__env(rank_missing ? s->world : s->rank), s->name);
  }
  snprintf(range, sizeof range, "1..%d", world_max);
  COLL_CHECK(parse(s->world, 1, world_max, range, &out->world));
  snprintf(range, sizeof range, "0..%d for %s=%d", out->world - 1, world_name,
           out->world);
  COLL_CHECK(parse(s->rank, 0, out->world - 1, range, &out->rank));
  out->source = s->name;
  out->rank_var = rank_name;
  out->world_var = world_name;
  note_ignored(s, out);
  return COLL_OK;
}

/* A non-negative integer variable: 1 and *out, 0 unset, -1 refused (a
 * warning says so). */
static int local_var(coll_env_t id, int64_t *out) {
  int r = coll__env_parse_int(id, out);
  if (r < 0) {
    COLL_WARN(COLL_LOG_INIT, "%s=%s is not a number; ignored",
              coll__env_name(id), coll__env(id));
    return -1;
  }
  if (r == 1 && *out < 0) {
    COLL_WARN(COLL_LOG_INIT, "%s=%lld is negative; ignored", coll__env_name(id),
              (long long)*out);
    return -1;
  }
  return r;
}

int coll__launch_local_rank(int64_t *out, const char **var) {
  const source_t *s = chosen();
  coll_env_t id = COLL_ENV_LOCAL_RANK;
  if (coll__env(id) == NULL) {
    if (s == NULL || s->local_rank == NO_VAR) return 0;
    id = s->local_rank;
  }
  if (var != NULL) *var = coll__env_name(id);
  return local_var(id, out) == 1;
}

int coll__slurm_tasks_on_node(const char *list, int64_t node, int64_t *out) {
  const char *p = list;
  char *end;
  long long tasks, reps;
  if (list == NULL || node < 0) return 0;
  for (;;) {
    errno = 0;
    tasks = strtoll(p, &end, 10);
    if (errno != 0 || end == p || tasks < 0) return 0;
    reps = 1;
    p = end;
    if (p[0] == '(') { /* "(xN)" */
      if (p[1] != 'x') return 0;
      errno = 0;
      reps = strtoll(p + 2, &end, 10);
      if (errno != 0 || end == p + 2 || reps < 1 || *end != ')') return 0;
      p = end + 1;
    }
    if (node < reps) {
      *out = tasks;
      return 1;
    }
    node -= reps;
    if (*p != ',') return 0; /* the end (no such node) or garbage */
    p++;
  }
}

int coll__launch_local_world(int64_t *out, const char **var) {
  const source_t *s = chosen();
  const char *list;
  int64_t node;
  if (coll__env(COLL_ENV_LOCAL_WORLD_SIZE) != NULL) {
    if (var != NULL) *var = coll__env_name(COLL_ENV_LOCAL_WORLD_SIZE);
    return local_var(COLL_ENV_LOCAL_WORLD_SIZE, out) == 1;
  }
  if (s == NULL) return 0;
  if (s->local_world != NO_VAR) {
    if (var != NULL) *var = coll__env_name(s->local_world);
    return local_var(s->local_world, out) == 1;
  }
  if (s->rank != COLL_ENV_SLURM_PROCID) return 0;
  list = coll__env(COLL_ENV_SLURM_STEP_TASKS_PER_NODE);
  if (list == NULL || local_var(COLL_ENV_SLURM_NODEID, &node) != 1) return 0;
  if (!coll__slurm_tasks_on_node(list, node, out)) {
    COLL_WARN(COLL_LOG_INIT,
              "SLURM_STEP_TASKS_PER_NODE='%s' has no entry for "
              "SLURM_NODEID=%lld; ignored",
              list, (long long)node);
    return 0;
  }
  if (var != NULL) *var = "SLURM_STEP_TASKS_PER_NODE";
  return 1;
}
