/* SPDX-License-Identifier: Apache-2.0 */
/* bench.c: one rank's benchmark: for each size, the out-of-place and
 * in-place variants (warm-up, one checked call, the timed loop), then the
 * slowest rank's time and the wrong elements of all ranks, by collectives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "perf.h"

/* The buffers of one size. count is nccl-tests' count: the elements of the
 * larger buffer; block is a rank's share for allgather and reduce-scatter. */
typedef struct perf_bufs {
  size_t count, block, send_n, recv_n;
  char *send, *recv;
  void *send_raw, *recv_raw; /* what perf_buf_free takes */
} perf_bufs_t;

static size_t esize(const perf_rank_t *pr) {
  return coll_dtype_size(pr->o->dtype);
}

static void size_counts(const perf_rank_t *pr, size_t bytes, perf_bufs_t *b) {
  size_t n = bytes / esize(pr), w = (size_t)pr->world;
  memset(b, 0, sizeof *b);
  switch (pr->o->coll) {
    case PERF_ALLGATHER:
    case PERF_REDUCE_SCATTER:
      b->block = n / w > 0 ? n / w : 1;
      b->count = b->block * w;
      b->send_n = pr->o->coll == PERF_ALLGATHER ? b->block : b->count;
      b->recv_n = pr->o->coll == PERF_ALLGATHER ? b->count : b->block;
      break;
    case PERF_BARRIER: break;
    default:
      b->count = b->block = n > 0 ? n : 1;
      b->send_n = pr->o->coll == PERF_BROADCAST ? 0 : b->count;
      b->recv_n = b->count;
      break;
  }
}

static double bus_factor(perf_coll_t c, int world) {
  double n = world;
  switch (c) {
    case PERF_ALLREDUCE: return 2 * (n - 1) / n;
    case PERF_ALLGATHER:
    case PERF_REDUCE_SCATTER: return (n - 1) / n;
    case PERF_BARRIER: return 0;
    default: return 1;
  }
}

/* Collectives without an out-of-place form run in place only. */
static int has_out_of_place(perf_coll_t c) {
  return c != PERF_BROADCAST && c != PERF_BARRIER;
}

static coll_status_t call(const perf_rank_t *pr, const perf_bufs_t *b,
                          const void *send, void *recv) {
  const perf_opts_t *o = pr->o;
  coll_comm_t *c = pr->comm;
  switch (o->coll) {
    case PERF_ALLREDUCE:
      return coll_allreduce(c, send, recv, b->count, o->dtype, o->op, NULL);
    case PERF_ALLGATHER:
      return coll_allgather(c, send, recv, b->block, o->dtype, NULL);
    case PERF_REDUCE_SCATTER:
      return coll_reduce_scatter(c, send, recv, b->block, o->dtype, o->op,
                                 NULL);
    case PERF_BROADCAST:
      return coll_broadcast(c, recv, b->count, o->dtype, o->root, NULL);
    case PERF_REDUCE:
      return coll_reduce(c, send, recv, b->count, o->dtype, o->op, o->root,
                         NULL);
    default: return coll_barrier(c);
  }
}

/* Where the variant reads and writes: in place, allgather's input is the
 * rank's own block of the output and reduce-scatter's output is the rank's
 * block of the input, as in nccl-tests. */
static void variant_ptrs(const perf_rank_t *pr, const perf_bufs_t *b,
                         int in_place, char **send, char **recv) {
  size_t off = (size_t)pr->rank * b->block * esize(pr);
  *send = b->send;
  *recv = b->recv;
  if (!in_place) return;
  if (pr->o->coll == PERF_ALLGATHER)
    *send = b->recv + off;
  else if (pr->o->coll == PERF_REDUCE_SCATTER)
    *recv = b->send + off;
  else
    *send = b->recv;
}

static void prepare(const perf_rank_t *pr, const perf_bufs_t *b, int in_place,
                    char *send, char *recv) {
  const perf_opts_t *o = pr->o;
  switch (o->coll) {
    case PERF_ALLGATHER:
      perf_poison(o->dtype, b->recv, b->count);
      perf_fill(o, pr->world, pr->rank, send, b->block);
      break;
    case PERF_REDUCE_SCATTER:
      perf_fill(o, pr->world, pr->rank, send, b->count);
      if (!in_place) perf_poison(o->dtype, recv, b->block);
      break;
    case PERF_BROADCAST:
      if (pr->rank == o->root)
        perf_fill(o, pr->world, o->root, recv, b->count);
      else
        perf_poison(o->dtype, recv, b->count);
      break;
    case PERF_BARRIER: break;
    default: /* allreduce, reduce */
      if (!in_place) perf_poison(o->dtype, recv, b->count);
      perf_fill(o, pr->world, pr->rank, send, b->count);
      break;
  }
}

static int64_t verify(const perf_rank_t *pr, const perf_bufs_t *b,
                      const char *recv) {
  const perf_opts_t *o = pr->o;
  size_t bs = b->block * esize(pr);
  int64_t wrong = 0;
  int r;
  switch (o->coll) {
    case PERF_ALLREDUCE:
      return perf_check_reduced(o, pr->world, recv, 0, b->count);
    case PERF_REDUCE:
      if (pr->rank != o->root) return 0;
      return perf_check_reduced(o, pr->world, recv, 0, b->count);
    case PERF_REDUCE_SCATTER:
      return perf_check_reduced(o, pr->world, recv, (size_t)pr->rank * b->block,
                                b->block);
    case PERF_ALLGATHER:
      for (r = 0; r < pr->world; r++)
        wrong +=
            perf_check_input(o, pr->world, r, recv + (size_t)r * bs, b->block);
      return wrong;
    case PERF_BROADCAST:
      return perf_check_input(o, pr->world, o->root, recv, b->count);
    default: return 0;
  }
}

/* Reports a failed call; other ranks' ABORTED (coll-perf aborts them when
 * one rank fails) would only repeat it. */
static int failed(const perf_rank_t *pr, coll_status_t s, const char *what,
                  size_t bytes) {
  if (s != COLL_ERR_ABORTED || pr->fail == NULL)
    fprintf(stderr, "coll-perf: rank %d: %s (%zu bytes) failed: %s: %s\n",
            pr->rank, what, bytes, coll_status_name(s), coll_last_error());
  if (pr->fail != NULL) pr->fail(pr->fail_ctx);
  return -1;
}

#define PERF_CALL(expr, what)                                               \
  do {                                                                      \
    coll_status_t s_ = (expr);                                              \
    if (s_ != COLL_OK) return failed(pr, s_, (what), b->count * esize(pr)); \
  } while (0)

/* Warm-up, one checked call (if -c 1), then the timed loop. */
static int run_variant(const perf_rank_t *pr, const perf_bufs_t *b,
                       int in_place, double *time_us, int64_t *wrong) {
  const char *name = perf_coll_name(pr->o->coll);
  char *send, *recv;
  uint64_t t0;
  int i;
  variant_ptrs(pr, b, in_place, &send, &recv);
  for (i = 0; i < pr->o->warmup; i++) PERF_CALL(call(pr, b, send, recv), name);
  *wrong = 0;
  if (pr->o->check) {
    prepare(pr, b, in_place, send, recv);
    PERF_CALL(call(pr, b, send, recv), name);
    *wrong = verify(pr, b, recv);
  }
  /* Start together, so the slowest rank's time is the collective's. */
  PERF_CALL(coll_barrier(pr->comm), "barrier before the timed loop");
  t0 = uv_hrtime();
  for (i = 0; i < pr->o->iters; i++) PERF_CALL(call(pr, b, send, recv), name);
  *time_us = (double)(uv_hrtime() - t0) / 1e3 / pr->o->iters;
  return 0;
}

static void fill_result(const perf_rank_t *pr, size_t bytes, double time_us,
                        int64_t wrong, perf_result_t *res) {
  res->valid = 1;
  res->time_us = time_us;
  res->algbw = time_us > 0 ? (double)bytes / time_us / 1e3 : 0;
  res->busbw = res->algbw * bus_factor(pr->o->coll, pr->world);
  res->wrong = pr->o->check ? wrong : -1;
}

/* Both variants of one size. Every rank ends with the same row (the times
 * and wrong counts are reduced over ranks); rank 0 prints it. */
static int run_size(const perf_rank_t *pr, const perf_bufs_t *b,
                    perf_row_t *row) {
  double t[2] = {0, 0};
  int64_t w[2] = {0, 0};
  int oop = has_out_of_place(pr->o->coll);
  if (oop && run_variant(pr, b, 0, &t[0], &w[0]) != 0) return -1;
  if (run_variant(pr, b, 1, &t[1], &w[1]) != 0) return -1;
  /* The slowest rank's time and everyone's wrong elements. These two
   * collectives also prove the comm still works after the run. */
  PERF_CALL(coll_allreduce(pr->comm, t, t, 2, COLL_F64, COLL_MAX, NULL),
            "allreduce(max) of the times");
  PERF_CALL(coll_allreduce(pr->comm, w, w, 2, COLL_I64, COLL_SUM, NULL),
            "allreduce(sum) of the wrong counts");
  memset(row, 0, sizeof *row);
  row->dtype = pr->o->dtype;
  row->op = pr->o->op;
  row->count = b->count;
  row->bytes = b->count * esize(pr);
  if (oop) fill_result(pr, row->bytes, t[0], w[0], &row->oop);
  fill_result(pr, row->bytes, t[1], w[1], &row->ip);
  return 0;
}

void *perf_buf_alloc(size_t bytes, int offset, int zero, void **raw) {
  size_t page = 4096, total;
  char *p;
  if (offset < 0) {
    *raw = zero ? calloc(1, bytes) : malloc(bytes);
    return *raw;
  }
  /* aligned_alloc wants a multiple of the alignment. */
  total = (bytes + (size_t)offset + page - 1) / page * page;
  *raw = p = aligned_alloc(page, total);
  if (p == NULL) return NULL;
  if (zero) memset(p, 0, total);
  return p + offset;
}

void perf_buf_free(void *raw) { free(raw); }

static int alloc_bufs(const perf_rank_t *pr, perf_bufs_t *b) {
  size_t es = esize(pr);
  /* One spare element keeps malloc(0) out of the picture. */
  b->send =
      perf_buf_alloc((b->send_n + 1) * es, pr->o->offset, 0, &b->send_raw);
  b->recv =
      perf_buf_alloc((b->recv_n + 1) * es, pr->o->offset, 0, &b->recv_raw);
  if (b->send != NULL && b->recv != NULL) return 0;
  fprintf(stderr, "coll-perf: rank %d: out of memory for %zu elements\n",
          pr->rank, b->count);
  if (pr->fail != NULL) pr->fail(pr->fail_ctx);
  return -1;
}

static int bench_size(const perf_rank_t *pr, const perf_bufs_t *sizes,
                      perf_report_t *rep, int64_t *wrong) {
  perf_bufs_t b = *sizes;
  perf_row_t row;
  int rc = alloc_bufs(pr, &b);
  if (rc == 0) rc = run_size(pr, &b, &row);
  if (rc == 0) {
    if (pr->rank == 0) perf_report_row(rep, &row);
    *wrong += (row.oop.valid && row.oop.wrong > 0 ? row.oop.wrong : 0) +
              (row.ip.wrong > 0 ? row.ip.wrong : 0);
  }
  perf_buf_free(b.send_raw);
  perf_buf_free(b.recv_raw);
  return rc;
}

/* Every size, for the dtype and op in pr->o. */
static int bench_sizes(const perf_rank_t *pr, perf_report_t *rep,
                       int64_t *wrong) {
  const perf_opts_t *o = pr->o;
  perf_bufs_t b;
  size_t bytes = o->min_bytes, last = (size_t)-1;
  int rc;
  for (;;) {
    size_counts(pr, bytes, &b);
    /* Sizes that round to the same count are measured once. */
    if (b.count != last && (rc = bench_size(pr, &b, rep, wrong)) != 0)
      return rc;
    last = b.count;
    if (o->coll == PERF_BARRIER || bytes > o->max_bytes / o->factor) return 0;
    bytes *= o->factor;
  }
}

int perf_bench(const perf_rank_t *pr) {
  const perf_opts_t *o = pr->o;
  int each_dt = o->all_dtypes && o->coll != PERF_BARRIER;
  int each_op = o->all_ops && perf_coll_reduces(o->coll);
  perf_opts_t cur = *o;
  perf_rank_t one = *pr;
  perf_report_t rep;
  int64_t wrong = 0;
  int rc = 0, dt, op;
  one.o = &cur;
  if (pr->rank == 0)
    perf_report_begin(&rep, o, pr->world, pr->mode,
                      coll_comm_backend(pr->comm));
  for (dt = 0; dt < COLL_DTYPE_COUNT && rc == 0; dt++) {
    if (!each_dt && dt != (int)o->dtype) continue;
    for (op = 0; op < COLL_OP_COUNT && rc == 0; op++) {
      if (!each_op && op != (int)o->op) continue;
      cur.dtype = (coll_dtype_t)dt;
      cur.op = (coll_op_t)op;
      rc = bench_sizes(&one, &rep, &wrong);
    }
  }
  if (pr->rank == 0) perf_report_end(&rep, rc != 0);
  return rc != 0 || wrong > 0 ? PERF_EXIT_FAILED : 0;
}
