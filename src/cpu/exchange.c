/* SPDX-License-Identifier: Apache-2.0 */
/* exchange.c: gather, scatter and all-to-all on host memory: data that only
 * moves, so no work dtype and no finishing; the root's own block is copied
 * here, the others move through the algorithms (algo/gather.c,
 * algo/alltoall.c). */
#include <string.h>

#include "cpu/host.h"

static coll_status_t gather(coll_cpu_t *cpu, const coll_work_t *w) {
  size_t block = w->count * coll_dtype_size(w->dtype);
  coll_algo_ctx_t ctx;
  if (block == 0) return COLL_OK;
  if (cpu->comm->rank == w->root) {
    char *mine = (char *)w->recv + (size_t)w->root * block;
    if (w->send != mine) memcpy(mine, w->send, block);
  }
  coll__cpu_ctx(cpu, &ctx);
  return coll__gather(&ctx, w->send, w->recv, block, w->root);
}

static coll_status_t scatter(coll_cpu_t *cpu, const coll_work_t *w) {
  size_t block = w->count * coll_dtype_size(w->dtype);
  coll_algo_ctx_t ctx;
  if (block == 0) return COLL_OK;
  if (cpu->comm->rank == w->root) {
    const char *mine = (const char *)w->send + (size_t)w->root * block;
    if (w->recv != mine) memcpy(w->recv, mine, block);
  }
  coll__cpu_ctx(cpu, &ctx);
  return coll__scatter(&ctx, w->send, w->recv, block, w->root);
}

/* The blocks of w by comm rank, in scratch: equal blocks (nbufs 0) or the
 * work's per-rank buffers (alltoallv). */
static coll_status_t blocks(coll_cpu_t *cpu, const coll_work_t *w,
                            coll_a2a_t *a) {
  size_t n = (size_t)cpu->comm->world, es = coll_dtype_size(w->dtype), r;
  char *mem = coll__scratch_get(&cpu->extra, 2 * n * (sizeof(void *) + 8));
  const void **sp;
  void **rp;
  size_t *sn, *rn;
  if (mem == NULL) return COLL_ERR_NO_MEMORY;
  sp = (const void **)mem;
  rp = (void **)(mem + n * sizeof(void *));
  sn = (size_t *)(mem + 2 * n * sizeof(void *));
  rn = sn + n;
  for (r = 0; r < n; r++) {
    if (w->nbufs == 0) {
      sp[r] = (const char *)w->send + r * w->count * es;
      rp[r] = (char *)w->recv + r * w->count * es;
      sn[r] = rn[r] = w->count * es;
    } else {
      sp[r] = w->bufs[r].data;
      sn[r] = w->bufs[r].count * es;
      rp[r] = w->bufs[n + r].data;
      rn[r] = w->bufs[n + r].count * es;
    }
  }
  a->send = sp;
  a->send_bytes = sn;
  a->recv = rp;
  a->recv_bytes = rn;
  return COLL_OK;
}

/* After an alltoallv: every rank learns whether any pair's counts differed
 * (the receiver alone saw it), by a MAX allreduce of the pair's code, so
 * that every rank reports the mismatch. Keeps the receiver's own text. */
static coll_status_t agree_counts(coll_cpu_t *cpu, coll_status_t s, int from) {
  int n = cpu->comm->world, me = cpu->comm->rank;
  int64_t code = s == COLL_ERR_LENGTH_MISMATCH ? (int64_t)me * n + from + 1 : 0;
  char mine[COLL_ERRMSG_MAX];
  coll_algo_ctx_t ctx;
  coll_status_t r;
  if (s == COLL_ERR_LENGTH_MISMATCH) coll__err_save(mine);
  coll__cpu_ctx(cpu, &ctx);
  r = coll__allreduce_rd(&ctx, &code, &code, 1, COLL_I64, COLL_MAX);
  if (r != COLL_OK) return r;
  if (code == 0) return COLL_OK;
  if (s == COLL_ERR_LENGTH_MISMATCH) {
    coll__err_restore(mine);
    return s;
  }
  return coll__err(COLL_ERR_LENGTH_MISMATCH,
                   "rank %d expected another count from rank %d than it sent "
                   "(their send and receive counts differ)",
                   (int)((code - 1) / n), (int)((code - 1) % n));
}

static coll_status_t alltoall(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_algo_ctx_t ctx;
  coll_a2a_t a;
  coll_status_t s;
  int from;
  COLL_CHECK(blocks(cpu, w, &a));
  coll__cpu_ctx(cpu, &ctx);
  s = coll__alltoallv(&ctx, &a, &from);
  if (s != COLL_OK && s != COLL_ERR_LENGTH_MISMATCH) return s;
  /* Equal counts were agreed before; only alltoallv can differ by pair. */
  if (w->nbufs == 0 || !cpu->tune.check_mismatch || cpu->comm->world == 1)
    return s;
  return agree_counts(cpu, s, from);
}

coll_status_t coll__cpu_exchange(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_desc_t d = {.kind = (uint32_t)w->kind,
                   .dtype = (int32_t)w->dtype,
                   .op = -1,
                   .root = (int32_t)w->root,
                   .count = (uint64_t)w->count};
  if (w->kind == COLL_WORK_ALLTOALL) {
    d.root = -1;
    d.op = w->nbufs > 0; /* alltoallv: its counts are checked after */
  }
  COLL_CHECK(coll__cpu_check_alone(cpu, &d));
  switch (w->kind) {
    case COLL_WORK_GATHER: return gather(cpu, w);
    case COLL_WORK_SCATTER: return scatter(cpu, w);
    default: return alltoall(cpu, w);
  }
}
