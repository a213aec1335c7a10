/* SPDX-License-Identifier: Apache-2.0 */
/* choose.c: the one chooser over every collective's table of algorithms,
 * and the descriptor check that every row's algorithm gets through it
 * (choose.h). Each table lives beside its collective (allreduce.c,
 * rooted.c, gather_scatter.c). */
#include "cpu/choose.h"

#include "algo/algo.h"

/* A row that may run under a forced word that does not name it: anything
 * but the shared-memory rows, which run only under auto or shm. */
static int stand_in(const coll_cpu_row_t *r) {
  return r->word != COLL_ALGO_SHM;
}

static int row_can(const coll_cpu_t *cpu, const coll_cpu_row_t *r) {
  return r->can == NULL || r->can(cpu);
}

size_t coll__cpu_choose(const coll_cpu_t *cpu, const coll_cpu_table_t *t,
                        size_t bytes) {
  int forced = cpu->tune.algo != COLL_ALGO_AUTO;
  size_t i;
  if (forced)
    for (i = 0; i < t->n; i++) {
      const coll_cpu_row_t *r = coll__cpu_row(t, i);
      if (r->word == cpu->tune.algo && row_can(cpu, r)) return i;
    }
  for (i = 0; i + 1 < t->n; i++) {
    const coll_cpu_row_t *r = coll__cpu_row(t, i);
    if (forced && !stand_in(r)) continue;
    if (row_can(cpu, r) && (r->fits == NULL || r->fits(cpu, bytes))) return i;
  }
  return t->n - 1;
}

coll_status_t coll__cpu_pick(coll_cpu_t *cpu, const coll_cpu_table_t *t,
                             size_t bytes, const coll_desc_t *d,
                             coll_algo_ctx_t *ctx, size_t *row) {
  *row = coll__cpu_choose(cpu, t, bytes);
  if (d == NULL) {
    coll__cpu_ctx(cpu, ctx);
    return COLL_OK;
  }
  coll__cpu_ctx_checked(cpu, ctx, d);
  if (ctx->check == NULL || coll__cpu_row(t, *row)->carries) return COLL_OK;
  /* The check and the algorithm share the sequence number: ranks whose
   * descriptors differ may choose rows that carry and rows that do not,
   * and must still take as many numbers as each other. */
  COLL_CHECK(coll__check_alone(ctx));
  ctx->check = NULL;
  return COLL_OK;
}

int coll__cpu_shared(const coll_cpu_t *cpu) {
  return cpu->tune.shared && cpu->comm->world > 1;
}

/* Measured with coll-perf (-c 0, medians of 3 interleaved runs, processes
 * over COLL_TRANSPORT=shm, COLL_ALGO=auto against ring) on the 2-vCPU VM
 * while two builds ran: indicative only. Time per call in us, shared
 * rounds / messages:
 *
 *   ranks  collective      4K          64K         1M          16M
 *   2      broadcast       8.6/13.4    21.6/11.9   111/141     2416/2619
 *   2      allgather       27.7/27.4   19.1/57.3   106/336     1982/3905
 *   2      reduce-scatter  6.7/7.1     6.7/20.3    94.6/296    1806/5742
 *   4      broadcast       91.6/77.7   45.8/78.7   241/367     4713/6365
 *   4      allgather       73.2/109    45.0/99.9   204/463     4202/5216
 *   4      reduce-scatter  84.7/68.9   76.0/112    641/525     10540/8981
 *
 * The shared rounds lead at most sizes, and where they trail the runs
 * differed by more than the gap; measure again on a quiet machine before
 * adding a threshold. */
int coll__cpu_shm_others_fit(const coll_cpu_t *cpu, size_t bytes) {
  return bytes < cpu->tune.shm_others_below;
}

int coll__cpu_shm_reduce_scatter_fits(const coll_cpu_t *cpu, size_t bytes) {
  return bytes < cpu->tune.shm_reduce_scatter_below;
}
