/* SPDX-License-Identifier: Apache-2.0 */
/* negotiate.c: agreeing on a reduction dtype across a mixed-precision mesh. */
#include <stdint.h>

#include "cpu/host.h"

coll_status_t coll__cpu_negotiate(coll_cpu_t *cpu, const coll_work_t *w) {
  int n = cpu->comm->world, i, same = 1, any_f64 = 0;
  coll_algo_ctx_t ctx;
  int32_t *all = coll__scratch_get(&cpu->extra, (size_t)n * sizeof *all);
  if (all == NULL) return COLL_ERR_NO_MEMORY;
  all[cpu->comm->rank] = (int32_t)w->dtype;
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__allgather_ring(&ctx, all, sizeof *all));
  for (i = 0; i < n; i++) {
    if (all[i] < 0 || all[i] >= COLL_DTYPE_COUNT)
      return coll__err(COLL_ERR_PROTOCOL, "rank %d sent dtype code %d", i,
                       (int)all[i]);
    if (all[i] != all[0]) same = 0;
    if (all[i] == COLL_F64) any_f64 = 1;
  }
  *w->agreed = same ? (coll_dtype_t)all[0] : any_f64 ? COLL_F64 : COLL_F32;
  return COLL_OK;
}
