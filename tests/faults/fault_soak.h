/* SPDX-License-Identifier: Apache-2.0 */
/* fault_soak.h: random faults, one per job, and the tallies the fault
 * tool prints (fault_tool.c): the soak, the late-rank release times and
 * the stall times. */
#ifndef COLL_TESTS_FAULT_SOAK_H
#define COLL_TESTS_FAULT_SOAK_H

#include <stdint.h>

#include "fault_job.h"
#include "fault_judge.h"

/* The heartbeat timeout of the soak's jobs. */
#define FS_HB_MS 1000

/* A random job with one random fault (kill, stop, abort, garbage, and a
 * partition where the job has TCP links) on a random path, victim, late
 * rank and moment, drawn from *rng. */
fj_spec_t fs_random_spec(uint64_t *rng);
/* One line that says what spec does ("tcp kill of rank 2, rank 1 late,
 * 4096 floats"). */
void fs_describe(const fj_spec_t *s, char *buf, size_t n);

/* Times in ms, kept to take percentiles of. */
typedef struct fs_times {
  int64_t *v;
  int n, cap;
} fs_times_t;
void fs_times_add(fs_times_t *t, int64_t ms);
/* The p-th percentile (0..100) of what was added; -1 if nothing was. */
int64_t fs_times_pct(fs_times_t *t, double p);
void fs_times_free(fs_times_t *t);

#endif
