/* SPDX-License-Identifier: Apache-2.0 */
/* reduce.c: reduce to root, two ways (the CPU backend chooses by size,
 * cpu/rooted.c): a binomial tree toward root (log2 n latencies), or a ring
 * reduce-scatter over near-equal blocks after which every rank streams its
 * reduced block to root, so no link carries much more than the buffer.
 * Other ranks' buffers end as scratch. */
#include <string.h>

#include "algo/algo_util.h"
#include "algo/ring.h"

#define REDUCE_MAX_CHILDREN 32

typedef struct tree {
  algo_run_t run;
  char *buf;
  size_t count, bytes;
  coll_reduce_fn_t fn;
  algo_req_t req[REDUCE_MAX_CHILDREN];
} tree_t;

/* Children (vr + 2^j below vr's lowest set bit) send their subtree's
 * reduction; they are combined in that order, the smallest subtree first,
 * and the result goes to the parent. */
static coll_status_t tree_body(tree_t *T, int root) {
  const coll_algo_ctx_t *ctx = T->run.ctx;
  int n = ctx->world, vr = (ctx->rank - root + n) % n, mask, k, nkids = 0;
  int up; /* vr's lowest set bit: the parent is vr - up */
  char *slots;
  for (up = 1; up < n && !(vr & up); up <<= 1)
    if (vr + up < n) nkids++;
  slots = coll__scratch_get(ctx->scratch, (size_t)nkids * T->bytes);
  if (slots == NULL && nkids > 0)
    return coll__algo_fail(&T->run, COLL_ERR_NO_MEMORY, "receive buffers");
  /* Post every child's receive first: children finish in any order. */
  for (k = 0, mask = 1; k < nkids; mask <<= 1, k++)
    COLL_CHECK(coll__algo_irecv(&T->run, &T->req[k], (vr + mask + root) % n,
                                slots + (size_t)k * T->bytes, T->bytes));
  for (k = 0; k < nkids; k++) {
    COLL_CHECK(coll__algo_wait(&T->run, &T->req[k], T->bytes));
    T->fn(T->buf, slots + (size_t)k * T->bytes, T->count);
  }
  if (vr == 0) return COLL_OK;
  COLL_CHECK(coll__algo_isend(&T->run, &T->req[0], (vr - up + root) % n, T->buf,
                              T->bytes));
  return coll__algo_wait(&T->run, &T->req[0], 0);
}

static coll_status_t reduce_tree(const coll_algo_ctx_t *ctx, char *buf,
                                 size_t count, size_t esz, coll_reduce_fn_t fn,
                                 int root) {
  tree_t T;
  memset(&T, 0, sizeof T);
  coll__algo_run_init(&T.run, ctx, "tree reduce", ALGO_PH_REDUCE);
  T.buf = buf;
  T.count = count;
  T.bytes = count * esz;
  T.fn = fn;
  if (tree_body(&T, root) != COLL_OK)
    coll__algo_cancel(&T.run, T.req, REDUCE_MAX_CHILDREN);
  return coll__algo_done(&T.run);
}

/* Block c of the reduce-scatter lives on rank c: stream it to root. */
static coll_status_t gather_blocks(const coll_algo_ctx_t *ctx, char *buf,
                                   size_t count, size_t esz, int root) {
  algo_run_t run;
  size_t off, len;
  int c;
  coll__algo_run_init(&run, ctx, "ring reduce (gather)", ALGO_PH_GATHER);
  if (ctx->rank != root) {
    len = coll__ring_block(count, ctx->world, ctx->rank, &off);
    (void)coll__algo_stream(&run, -1, root, buf + off * esz, len * esz,
                            ctx->seg_bytes);
    return coll__algo_done(&run);
  }
  for (c = 0; c < ctx->world; c++) {
    if (c == root) continue;
    len = coll__ring_block(count, ctx->world, c, &off);
    if (coll__algo_stream(&run, c, -1, buf + off * esz, len * esz,
                          ctx->seg_bytes) != COLL_OK)
      break;
  }
  return coll__algo_done(&run);
}

coll_status_t coll__reduce_tree(const coll_algo_ctx_t *ctx, void *buf,
                                size_t count, coll_dtype_t dt, coll_op_t op,
                                int root) {
  coll_reduce_fn_t fn = coll__algo_kernel("reduce", dt, op);
  if (fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (ctx->world == 1 || count == 0) return COLL_OK;
  return reduce_tree(ctx, buf, count, coll_dtype_size(dt), fn,
                     coll__ctx_pos(ctx, root));
}

coll_status_t coll__reduce_ring(const coll_algo_ctx_t *ctx, void *buf,
                                size_t count, coll_dtype_t dt, coll_op_t op,
                                int root) {
  coll_ring_pass_t p = {0};
  int n = ctx->world;
  size_t esz = coll_dtype_size(dt);
  coll_reduce_fn_t fn = coll__algo_kernel("reduce", dt, op);
  if (fn == NULL) return COLL_ERR_UNSUPPORTED;
  if (n == 1 || count == 0) return COLL_OK;
  p.what = "ring reduce";
  p.buf = buf;
  p.esz = esz;
  p.q = count / (size_t)n;
  p.rem = count % (size_t)n;
  p.shift = -1; /* block r ends on rank r, as in the reduce-scatter */
  p.nsteps = n - 1;
  p.nreduce = n - 1;
  p.fn = fn;
  p.blocks = NULL; /* this file's own layout, by position */
  COLL_CHECK(coll__ring_run(ctx, &p));
  return gather_blocks(ctx, buf, count, esz, coll__ctx_pos(ctx, root));
}
