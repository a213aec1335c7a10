/* SPDX-License-Identifier: Apache-2.0 */
/* check.c: argument checks with messages a user can act on. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"

coll_status_t coll__check_comm(const char *what, const coll_comm_t *c) {
  if (c == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: comm is NULL", what);
  return COLL_OK;
}

coll_status_t coll__check_req(const char *what, coll_request_t **req) {
  if (req == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: req is NULL", what);
  *req = NULL;
  return COLL_OK;
}

coll_status_t coll__check_dtype(const char *what, coll_dtype_t dt) {
  if ((unsigned)dt >= COLL_DTYPE_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid dtype %d", what,
                     (int)dt);
  return COLL_OK;
}

coll_status_t coll__check_op(const char *what, coll_op_t op) {
  if ((unsigned)op >= COLL_OP_COUNT)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: invalid op %d", what, (int)op);
  return COLL_OK;
}

coll_status_t coll__check_count(const char *what, size_t count, size_t blocks,
                                coll_dtype_t dt) {
  size_t es = coll_dtype_size(dt);
  if (blocks == 0) blocks = 1;
  if (count > SIZE_MAX / es / blocks || count * es * blocks > (SIZE_MAX >> 1))
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: count %zu of %s overflows the address space", what,
                     count, coll_dtype_name(dt));
  return COLL_OK;
}

coll_status_t coll__check_buf(const char *what, const coll_comm_t *c,
                              const char *name, const void *p, size_t bytes) {
  if (bytes == 0) return COLL_OK;
  if (p == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: %s buffer is NULL (%zu bytes)",
                     what, name, bytes);
  if (c->ops->check_buffer != NULL)
    return c->ops->check_buffer((coll_comm_t *)c, p, bytes, what);
  return COLL_OK;
}

coll_status_t coll__check_rank(const char *what, const coll_comm_t *c,
                               const char *name, int r) {
  if (r < 0 || r >= c->world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: %s %d out of range for a comm of %d ranks", what,
                     name, r, c->world);
  return COLL_OK;
}

coll_status_t coll__check_overlap(const char *what, const void *send,
                                  size_t send_bytes, const void *recv,
                                  size_t recv_bytes) {
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (send == NULL || recv == NULL || send == recv) return COLL_OK;
  if (send_bytes == 0 || recv_bytes == 0) return COLL_OK;
  if (s < r + recv_bytes && r < s + send_bytes)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: send and recv buffers overlap without being the "
                     "same (in place means send == recv)",
                     what);
  return COLL_OK;
}

coll_status_t coll__check_typed(const char *what, const coll_comm_t *c,
                                coll_dtype_t dt, int with_op, coll_op_t op,
                                size_t count, size_t blocks) {
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_dtype(what, dt));
  if (with_op) COLL_CHECK(coll__check_op(what, op));
  return coll__check_count(what, count, blocks ? blocks : (size_t)c->world, dt);
}

/* A batch buffer's extent, for the overlap check. */
typedef struct extent {
  uintptr_t lo, hi; /* [lo, hi) */
  size_t i;         /* its index in bufs */
} extent_t;

static int extent_cmp(const void *a, const void *b) {
  const extent_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

/* Up to this many buffers are compared pairwise, with no allocation. */
#define OVERLAP_PAIRWISE 16

static coll_status_t overlap_err(const char *what, size_t i, size_t j) {
  if (i > j) {
    size_t k = i;
    i = j;
    j = k;
  }
  return coll__err(COLL_ERR_INVALID_ARG,
                   "%s: bufs[%zu] and bufs[%zu] overlap; each buffer of a "
                   "batch is reduced in place and must not share memory with "
                   "another",
                   what, i, j);
}

/* Every buffer of a batch is reduced in place, once: two that share bytes
 * would give a wrong sum in both. Empty buffers take no memory. */
static coll_status_t check_disjoint(const char *what, const coll_buffer_t *bufs,
                                    size_t nbufs) {
  extent_t *e;
  size_t i, j, n = 0;
  if (nbufs <= OVERLAP_PAIRWISE) {
    for (i = 0; i < nbufs; i++)
      for (j = i + 1; j < nbufs; j++) {
        uintptr_t a = (uintptr_t)bufs[i].data, b = (uintptr_t)bufs[j].data;
        size_t la = bufs[i].count * coll_dtype_size(bufs[i].dtype);
        size_t lb = bufs[j].count * coll_dtype_size(bufs[j].dtype);
        if (la > 0 && lb > 0 && a < b + lb && b < a + la)
          return overlap_err(what, i, j);
      }
    return COLL_OK;
  }
  e = malloc(nbufs * sizeof *e);
  if (e == NULL)
    return coll__err(COLL_ERR_NO_MEMORY,
                     "%s: out of memory checking %zu buffers for overlaps",
                     what, nbufs);
  for (i = 0; i < nbufs; i++) {
    size_t len = bufs[i].count * coll_dtype_size(bufs[i].dtype);
    if (len == 0) continue;
    e[n].lo = (uintptr_t)bufs[i].data;
    e[n].hi = e[n].lo + len;
    e[n].i = i;
    n++;
  }
  qsort(e, n, sizeof *e, extent_cmp);
  /* Sorted by start, an overlap shows between neighbours. */
  for (i = 1; i < n; i++)
    if (e[i].lo < e[i - 1].hi) {
      coll_status_t s = overlap_err(what, e[i - 1].i, e[i].i);
      free(e);
      return s;
    }
  free(e);
  return COLL_OK;
}

coll_status_t coll__check_batch(const char *what, const coll_comm_t *c,
                                const coll_buffer_t *bufs, size_t nbufs) {
  size_t i, total = 0;
  COLL_CHECK(coll__check_comm(what, c));
  if (bufs == NULL && nbufs > 0)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: bufs is NULL (nbufs %zu)", what,
                     nbufs);
  for (i = 0; i < nbufs; i++) {
    char name[32];
    snprintf(name, sizeof name, "bufs[%zu]", i);
    if ((unsigned)bufs[i].dtype >= COLL_DTYPE_COUNT)
      return coll__err(COLL_ERR_INVALID_ARG, "%s: %s has invalid dtype %d",
                       what, name, (int)bufs[i].dtype);
    COLL_CHECK(coll__check_count(what, bufs[i].count, 1, bufs[i].dtype));
    COLL_CHECK(coll__check_buf(what, c, name, bufs[i].data,
                               bufs[i].count * coll_dtype_size(bufs[i].dtype)));
    /* Each fits; together they are packed and counted as one. */
    if (bufs[i].count * coll_dtype_size(bufs[i].dtype) >
        (SIZE_MAX >> 1) - total)
      return coll__err(COLL_ERR_INVALID_ARG,
                       "%s: bufs[0..%zu] hold more bytes in all than the "
                       "address space",
                       what, i);
    total += bufs[i].count * coll_dtype_size(bufs[i].dtype);
  }
  return check_disjoint(what, bufs, nbufs);
}
