/* SPDX-License-Identifier: Apache-2.0 */
/* launch.h: this process's place in the job, from the variables launchers
 * set: torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) first,
 * then Open MPI's mpirun (OMPI_COMM_WORLD_*), a PMI launcher (PMI_RANK,
 * PMI_SIZE), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 * SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID). */
#ifndef COLL_CORE_LAUNCH_H
#define COLL_CORE_LAUNCH_H

#include <stdint.h>

#include "coll.h"

typedef struct coll_launch {
  const char *source;   /* "torchrun", "Open MPI's mpirun", ... */
  const char *rank_var; /* the variables the values came from */
  const char *world_var;
  int rank;
  int world;
} coll_launch_t;

/* Rank and world size from the first source, in the order above, that
 * sets either of its two variables; the later ones are then ignored (a
 * torchrun started by srun, or mpirun inside an sbatch job, sees both, and
 * the inner launcher is the one that knows). COLL_ERR_INVALID_ARG, naming
 * the variables, when no source is set (the message lists every launcher
 * looked for), when only one of the chosen pair is set, or when a value is
 * not a number or out of range (world 1..world_max, rank 0..world-1). Any
 * thread. */
coll_status_t coll__launch_read(int world_max, coll_launch_t *out);

/* This process's rank within its host: LOCAL_RANK when set, else the local
 * rank of the source coll__launch_read picks (Open MPI's or Slurm's).
 * Returns 1 and sets *out when known, 0 when not; a value that is not a
 * non-negative number is warned about and taken as unknown. *var (may be
 * NULL) names the variable used. Any thread. */
int coll__launch_local_rank(int64_t *out, const char **var);

/* The number of ranks on this host, the same way: LOCAL_WORLD_SIZE, else
 * OMPI_COMM_WORLD_LOCAL_SIZE, or under srun this node's entry of
 * SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of nodes 0..2,
 * one on node 3) at index SLURM_NODEID. Any thread. */
int coll__launch_local_world(int64_t *out, const char **var);

/* The count of tasks on node `node` from a Slurm tasks-per-node list:
 * 1 and *out, or 0 when the text is malformed or has no such node.
 * Exposed for tests. */
int coll__slurm_tasks_on_node(const char *list, int64_t node, int64_t *out);

#endif
