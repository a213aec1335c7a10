/* SPDX-License-Identifier: Apache-2.0 */
/* check.c: argument checks with messages a user can act on. */
#include <stdint.h>

#include "api/api.h"

coll_status_t coll__check_comm(const char *what, const coll_comm_t *c) {
  if (c == NULL) return coll__err(COLL_ERR_INVALID_ARG, "%s: comm is NULL", what);
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
  return coll__check_count(what, count, blocks ? blocks : (size_t)c->world,
                           dt);
}
