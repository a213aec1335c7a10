/* SPDX-License-Identifier: Apache-2.0 */
/* choose.h: every CPU collective's algorithms as rows of one table each,
 * the one chooser over them, and the descriptor check that every row's
 * algorithm gets through it (choose.c). */
#ifndef COLL_CPU_CHOOSE_H
#define COLL_CPU_CHOOSE_H

#include <stddef.h>

#include "cpu/cpu.h"

/* An algorithm as a row of its collective's table. A table is an array of
 * structs whose member `row` is this, with the algorithm's entry point
 * beside it (its signature is the collective's). */
typedef struct coll_cpu_row {
  /* The COLL_ALGO word that names it (core/env.h: COLL_ALGO_RING...). */
  int word;
  /* Whether it can run on this comm; NULL: on every comm. */
  int (*can)(const coll_cpu_t *cpu);
  /* Whether auto gives it `bytes` (the collective's largest buffer, in
   * the work dtype); NULL: every size. */
  int (*fits)(const coll_cpu_t *cpu, size_t bytes);
  /* 1: it carries the descriptor check (ctx->check) in its own first
   * messages or round (algo/agree.h); 0: the check runs alone before it. */
  int carries;
} coll_cpu_row_t;

/* A table as the chooser sees it: n rows, the first at `first`, each
 * `stride` bytes after the one before. */
typedef struct coll_cpu_table {
  const char *what; /* the collective: "allreduce" */
  const coll_cpu_row_t *first;
  size_t stride, n;
} coll_cpu_table_t;
#define COLL_CPU_TABLE(what, rows)             \
  {                                            \
    (what), &(rows)[0].row, sizeof((rows)[0]), \
        sizeof(rows) / sizeof((rows)[0])       \
  }

static inline const coll_cpu_row_t *coll__cpu_row(const coll_cpu_table_t *t,
                                                  size_t i) {
  return (const coll_cpu_row_t *)((const char *)t->first + i * t->stride);
}

/* The tables, one per collective that has more than one algorithm. */
extern const coll_cpu_table_t coll__cpu_allreduce_algos;
extern const coll_cpu_table_t coll__cpu_broadcast_algos;
extern const coll_cpu_table_t coll__cpu_reduce_algos;
extern const coll_cpu_table_t coll__cpu_allgather_algos;
extern const coll_cpu_table_t coll__cpu_reduce_scatter_algos;

/* The index of the row to run for `bytes`. COLL_ALGO=auto: the first row
 * that can run on the comm and fits the size. Another word: the row it
 * names, where that can run; else auto's choice among the rows other than
 * the shared-memory one (which runs only under auto or shm). The last row
 * of every table runs on every comm at every size. */
size_t coll__cpu_choose(const coll_cpu_t *cpu, const coll_cpu_table_t *t,
                        size_t bytes);

/* The one way a collective runs one of its algorithms: chooses the row
 * for `bytes` (*row), and makes *ctx for it (one sequence number). With d
 * (NULL: nothing to check), where the comm checks (COLL_CHECK_MISMATCH,
 * two ranks or more), the ranks check that they all passed d: a row that
 * carries the check gets it in ctx->check; for any other row it runs here,
 * alone, first (coll__check_alone), and ctx->check is NULL after. Returns
 * COLL_OK, or what the check returned (COLL_ERR_LENGTH_MISMATCH on every
 * rank, the same text whatever the row; a failure). d is kept by the
 * caller until the collective ends. */
coll_status_t coll__cpu_pick(coll_cpu_t *cpu, const coll_cpu_table_t *t,
                             size_t bytes, const coll_desc_t *d,
                             coll_algo_ctx_t *ctx, size_t *row);

/* Rows' `can` for the algorithms designed for the transport's shared
 * memory: it has some, and there are peers to share it with. */
int coll__cpu_shared(const coll_cpu_t *cpu);
/* Rows' `fits` for broadcast and allgather through the transport's
 * shared memory (algo/broadcast_shm.c and the like): `bytes` is below its
 * others_below; for reduce-scatter, below reduce_scatter_below. */
int coll__cpu_shm_others_fit(const coll_cpu_t *cpu, size_t bytes);
int coll__cpu_shm_reduce_scatter_fits(const coll_cpu_t *cpu, size_t bytes);

#endif
