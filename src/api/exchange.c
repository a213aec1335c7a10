/* SPDX-License-Identifier: Apache-2.0 */
/* exchange.c: the public gather, scatter and all-to-all: check arguments,
 * build the work, issue it. Each blocking call and its i-form share one
 * body: the blocking call passes no request, which coll__issue takes as
 * issue and wait; the i-form checks its request pointer first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"

/* Gather and scatter: `mine` is this rank's block (count elements), `all`
 * the root's world blocks; in place when mine is the root's own block of
 * all. */
static coll_status_t check_rooted(const char *what, coll_comm_t *c,
                                  const void *mine, const void *all,
                                  size_t count, coll_dtype_t dt, int root) {
  size_t block;
  COLL_CHECK(coll__check_typed(what, c, dt, 0, COLL_SUM, count, 0));
  COLL_CHECK(coll__check_rank(what, c, "root", root));
  block = count * coll_dtype_size(dt);
  COLL_CHECK(
      coll__check_buf(what, c, what[0] == 'g' ? "send" : "recv", mine, block));
  if (c->rank != root) return COLL_OK;
  COLL_CHECK(coll__check_buf(what, c, what[0] == 'g' ? "recv" : "send", all,
                             block * (size_t)c->world));
  if (mine == (const char *)all + (size_t)root * block) return COLL_OK;
  return coll__check_overlap(what, mine, block, all, block * (size_t)c->world);
}

static coll_status_t gather(coll_comm_t *c, const void *send, void *recv,
                            size_t count, coll_dtype_t dt, int root,
                            void *stream, coll_request_t **req) {
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(check_rooted("gather", c, send, recv, count, dt, root));
  w = (coll_work_t){.kind = COLL_WORK_GATHER,
                    .send = send,
                    .recv = c->rank == root ? recv : NULL,
                    .count = count,
                    .dtype = dt,
                    .root = root,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_gather(coll_comm_t *c, const void *send, void *recv,
                          size_t count, coll_dtype_t dt, int root,
                          void *stream) {
  return gather(c, send, recv, count, dt, root, stream, NULL);
}

coll_status_t coll_igather(coll_comm_t *c, const void *send, void *recv,
                           size_t count, coll_dtype_t dt, int root,
                           void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("igather", req));
  return gather(c, send, recv, count, dt, root, stream, req);
}

static coll_status_t scatter(coll_comm_t *c, const void *send, void *recv,
                             size_t count, coll_dtype_t dt, int root,
                             void *stream, coll_request_t **req) {
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(check_rooted("scatter", c, recv, send, count, dt, root));
  w = (coll_work_t){.kind = COLL_WORK_SCATTER,
                    .send = c->rank == root ? send : NULL,
                    .recv = recv,
                    .count = count,
                    .dtype = dt,
                    .root = root,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_scatter(coll_comm_t *c, const void *send, void *recv,
                           size_t count, coll_dtype_t dt, int root,
                           void *stream) {
  return scatter(c, send, recv, count, dt, root, stream, NULL);
}

coll_status_t coll_iscatter(coll_comm_t *c, const void *send, void *recv,
                            size_t count, coll_dtype_t dt, int root,
                            void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("iscatter", req));
  return scatter(c, send, recv, count, dt, root, stream, req);
}

static coll_status_t alltoall(coll_comm_t *c, const void *send, void *recv,
                              size_t count, coll_dtype_t dt, void *stream,
                              coll_request_t **req) {
  const char *what = "alltoall";
  coll_work_t w;
  size_t bytes;
  uintptr_t s, r;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 0, COLL_SUM, count, 0));
  bytes = count * coll_dtype_size(dt) * (size_t)c->world;
  COLL_CHECK(coll__check_buf(what, c, "send", send, bytes));
  COLL_CHECK(coll__check_buf(what, c, "recv", recv, bytes));
  s = (uintptr_t)send;
  r = (uintptr_t)recv;
  if (bytes > 0 && s < r + bytes && r < s + bytes)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: send and recv buffers overlap; all-to-all has no "
                     "in-place form",
                     what);
  w = (coll_work_t){.kind = COLL_WORK_ALLTOALL,
                    .send = send,
                    .recv = recv,
                    .count = count,
                    .dtype = dt,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_alltoall(coll_comm_t *c, const void *send, void *recv,
                            size_t count, coll_dtype_t dt, void *stream) {
  return alltoall(c, send, recv, count, dt, stream, NULL);
}

coll_status_t coll_ialltoall(coll_comm_t *c, const void *send, void *recv,
                             size_t count, coll_dtype_t dt, void *stream,
                             coll_request_t **req) {
  COLL_CHECK(coll__check_req("ialltoall", req));
  return alltoall(c, send, recv, count, dt, stream, req);
}

/* Fills b[0..world) with the blocks of one side of an alltoallv, checking
 * each: a count and displacement that stay within memory, a pointer where
 * there are bytes, memory the backend takes. */
static coll_status_t side_blocks(coll_comm_t *c, const char *side,
                                 const void *base, const size_t *counts,
                                 const size_t *displs, coll_dtype_t dt,
                                 coll_buffer_t *b) {
  const char *what = "alltoallv";
  size_t es = coll_dtype_size(dt), limit = (SIZE_MAX >> 1) / es;
  int r;
  if (counts == NULL || displs == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: %s_%s is NULL", what, side,
                     counts == NULL ? "counts" : "displs");
  for (r = 0; r < c->world; r++) {
    char name[48];
    if (counts[r] > limit || displs[r] > limit - counts[r])
      return coll__err(COLL_ERR_INVALID_ARG,
                       "%s: the %s block of rank %d (%zu elements at %zu) "
                       "lies beyond the address space",
                       what, side, r, counts[r], displs[r]);
    if (counts[r] > 0 && base == NULL)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "%s: %s buffer is NULL (%zu elements for rank %d)", what,
                       side, counts[r], r);
    b[r].data = counts[r] > 0 ? (char *)base + displs[r] * es : NULL;
    b[r].count = counts[r];
    b[r].dtype = dt;
    snprintf(name, sizeof name, "%s block of rank %d", side, r);
    COLL_CHECK(coll__check_buf(what, c, name, b[r].data, counts[r] * es));
  }
  return COLL_OK;
}

typedef struct extent {
  uintptr_t lo, hi;
  int rank, is_recv;
} extent_t;

static int extent_cmp(const void *a, const void *b) {
  const extent_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

/* No receive block may share a byte with another block: sorted by start,
 * a block overlaps an earlier one iff it starts before that one's end. */
static coll_status_t check_disjoint(const coll_buffer_t *b, int world) {
  const char *what = "alltoallv";
  extent_t *e = malloc(2 * (size_t)world * sizeof *e);
  extent_t prev_recv = {0, 0, -1, 1}, prev_any = {0, 0, -1, 0};
  size_t i, n = 0;
  if (e == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory checking blocks",
                     what);
  for (i = 0; i < 2 * (size_t)world; i++) {
    size_t bytes = b[i].count * coll_dtype_size(b[i].dtype);
    if (bytes == 0) continue;
    e[n].lo = (uintptr_t)b[i].data;
    e[n].hi = e[n].lo + bytes;
    e[n].rank = (int)(i % (size_t)world);
    e[n].is_recv = i >= (size_t)world;
    n++;
  }
  qsort(e, n, sizeof *e, extent_cmp);
  for (i = 0; i < n; i++) {
    const extent_t *hit = NULL;
    if (e[i].is_recv && e[i].lo < prev_any.hi)
      hit = &prev_any;
    else if (!e[i].is_recv && e[i].lo < prev_recv.hi)
      hit = &prev_recv;
    if (hit != NULL) {
      coll_status_t s = coll__err(
          COLL_ERR_INVALID_ARG,
          "%s: the %s block of rank %d overlaps the %s block of rank %d "
          "(receive blocks share no byte with any other block)",
          what, e[i].is_recv ? "recv" : "send", e[i].rank,
          hit->is_recv ? "recv" : "send", hit->rank);
      free(e);
      return s;
    }
    if (e[i].hi > prev_any.hi) prev_any = e[i];
    if (e[i].is_recv && e[i].hi > prev_recv.hi) prev_recv = e[i];
  }
  free(e);
  return COLL_OK;
}

static coll_status_t alltoallv(coll_comm_t *c, const void *send,
                               const size_t *send_counts,
                               const size_t *send_displs, void *recv,
                               const size_t *recv_counts,
                               const size_t *recv_displs, coll_dtype_t dt,
                               void *stream, coll_request_t **req) {
  const char *what = "alltoallv";
  coll_buffer_t *b;
  coll_work_t w;
  coll_status_t s;
  coll__err_clear();
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_dtype(what, dt));
  b = malloc(2 * (size_t)c->world * sizeof *b);
  if (b == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory for %d blocks",
                     what, 2 * c->world);
  s = side_blocks(c, "send", send, send_counts, send_displs, dt, b);
  if (s == COLL_OK)
    s = side_blocks(c, "recv", recv, recv_counts, recv_displs, dt,
                    b + c->world);
  if (s == COLL_OK) s = check_disjoint(b, c->world);
  if (s == COLL_OK) {
    /* The blocks travel in the work's own copy (coll__work_dup). */
    w = (coll_work_t){.kind = COLL_WORK_ALLTOALL,
                      .dtype = dt,
                      .nbufs = 2 * (size_t)c->world,
                      .bufs = b,
                      .stream = stream};
    s = coll__issue(c, &w, req);
  }
  free(b);
  return s;
}

coll_status_t coll_alltoallv(coll_comm_t *c, const void *send,
                             const size_t *send_counts,
                             const size_t *send_displs, void *recv,
                             const size_t *recv_counts,
                             const size_t *recv_displs, coll_dtype_t dt,
                             void *stream) {
  return alltoallv(c, send, send_counts, send_displs, recv, recv_counts,
                   recv_displs, dt, stream, NULL);
}

coll_status_t coll_ialltoallv(coll_comm_t *c, const void *send,
                              const size_t *send_counts,
                              const size_t *send_displs, void *recv,
                              const size_t *recv_counts,
                              const size_t *recv_displs, coll_dtype_t dt,
                              void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("ialltoallv", req));
  return alltoallv(c, send, send_counts, send_displs, recv, recv_counts,
                   recv_displs, dt, stream, req);
}
