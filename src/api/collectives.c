/* SPDX-License-Identifier: Apache-2.0 */
/* collectives.c: the public collectives: check arguments, build the work,
 * issue it. Each blocking call and its i-form share one body: the
 * blocking call passes no request, which coll__issue takes as issue and
 * wait; the i-form checks its request pointer first. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"

static coll_status_t allreduce(coll_comm_t *c, const void *send, void *recv,
                               size_t count, coll_dtype_t dt, coll_op_t op,
                               void *stream, coll_request_t **req) {
  const char *what = "allreduce";
  coll_work_t w;
  size_t bytes;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 1, op, count, 1));
  bytes = count * coll_dtype_size(dt);
  COLL_CHECK(coll__check_buf(what, c, "send", send, bytes));
  COLL_CHECK(coll__check_buf(what, c, "recv", recv, bytes));
  COLL_CHECK(coll__check_overlap(what, send, bytes, recv, bytes));
  w = (coll_work_t){.kind = COLL_WORK_ALLREDUCE,
                    .send = send,
                    .recv = recv,
                    .count = count,
                    .dtype = dt,
                    .op = op,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_allreduce(coll_comm_t *c, const void *send, void *recv,
                             size_t count, coll_dtype_t dt, coll_op_t op,
                             void *stream) {
  return allreduce(c, send, recv, count, dt, op, stream, NULL);
}

coll_status_t coll_iallreduce(coll_comm_t *c, const void *send, void *recv,
                              size_t count, coll_dtype_t dt, coll_op_t op,
                              void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("iallreduce", req));
  return allreduce(c, send, recv, count, dt, op, stream, req);
}

static coll_status_t batch(coll_comm_t *c, const coll_buffer_t *bufs,
                           size_t nbufs, coll_op_t op, void *stream,
                           coll_request_t **req) {
  const char *what = "allreduce_batch";
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(coll__check_batch(what, c, bufs, nbufs));
  COLL_CHECK(coll__check_op(what, op));
  w = (coll_work_t){.kind = COLL_WORK_ALLREDUCE,
                    .op = op,
                    .nbufs = nbufs,
                    .bufs = (coll_buffer_t *)bufs,
                    .stream = stream,
                    .batch = 1};
  return coll__issue(c, &w, req);
}

coll_status_t coll_allreduce_batch(coll_comm_t *c, const coll_buffer_t *bufs,
                                   size_t nbufs, coll_op_t op, void *stream) {
  return batch(c, bufs, nbufs, op, stream, NULL);
}

coll_status_t coll_iallreduce_batch(coll_comm_t *c, const coll_buffer_t *bufs,
                                    size_t nbufs, coll_op_t op, void *stream,
                                    coll_request_t **req) {
  COLL_CHECK(coll__check_req("iallreduce_batch", req));
  return batch(c, bufs, nbufs, op, stream, req);
}

static coll_status_t premul(coll_comm_t *c, const coll_buffer_t *bufs,
                            size_t nbufs, float factor, void *stream,
                            coll_request_t **req) {
  const char *what = "allreduce_premul_sum";
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(coll__check_batch(what, c, bufs, nbufs));
  if (!isfinite(factor))
    return coll__err(COLL_ERR_INVALID_ARG, "%s: factor %g is not finite", what,
                     (double)factor);
  w = (coll_work_t){.kind = COLL_WORK_PREMUL_SUM,
                    .op = COLL_SUM,
                    .factor = factor,
                    .nbufs = nbufs,
                    .bufs = (coll_buffer_t *)bufs,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_allreduce_premul_sum(coll_comm_t *c,
                                        const coll_buffer_t *bufs, size_t nbufs,
                                        float factor, void *stream) {
  return premul(c, bufs, nbufs, factor, stream, NULL);
}

coll_status_t coll_iallreduce_premul_sum(coll_comm_t *c,
                                         const coll_buffer_t *bufs,
                                         size_t nbufs, float factor,
                                         void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("iallreduce_premul_sum", req));
  return premul(c, bufs, nbufs, factor, stream, req);
}

static coll_status_t broadcast(coll_comm_t *c, void *buf, size_t count,
                               coll_dtype_t dt, int root, void *stream,
                               coll_request_t **req) {
  const char *what = "broadcast";
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 0, COLL_SUM, count, 1));
  COLL_CHECK(coll__check_rank(what, c, "root", root));
  COLL_CHECK(
      coll__check_buf(what, c, "data", buf, count * coll_dtype_size(dt)));
  w = (coll_work_t){.kind = COLL_WORK_BROADCAST,
                    .recv = buf,
                    .count = count,
                    .dtype = dt,
                    .root = root,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_broadcast(coll_comm_t *c, void *buf, size_t count,
                             coll_dtype_t dt, int root, void *stream) {
  return broadcast(c, buf, count, dt, root, stream, NULL);
}

coll_status_t coll_ibroadcast(coll_comm_t *c, void *buf, size_t count,
                              coll_dtype_t dt, int root, void *stream,
                              coll_request_t **req) {
  COLL_CHECK(coll__check_req("ibroadcast", req));
  return broadcast(c, buf, count, dt, root, stream, req);
}

/* Allgather's in-place form (NCCL's): send == recv + rank * block. */
static coll_status_t allgather(coll_comm_t *c, const void *send, void *recv,
                               size_t count, coll_dtype_t dt, void *stream,
                               coll_request_t **req) {
  const char *what = "allgather";
  coll_work_t w;
  size_t block;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 0, COLL_SUM, count, 0));
  block = count * coll_dtype_size(dt);
  COLL_CHECK(coll__check_buf(what, c, "send", send, block));
  COLL_CHECK(coll__check_buf(what, c, "recv", recv, block * (size_t)c->world));
  if (send != (char *)recv + (size_t)c->rank * block)
    COLL_CHECK(
        coll__check_overlap(what, send, block, recv, block * (size_t)c->world));
  w = (coll_work_t){.kind = COLL_WORK_ALLGATHER,
                    .send = send,
                    .recv = recv,
                    .count = count,
                    .dtype = dt,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_allgather(coll_comm_t *c, const void *send, void *recv,
                             size_t count, coll_dtype_t dt, void *stream) {
  return allgather(c, send, recv, count, dt, stream, NULL);
}

coll_status_t coll_iallgather(coll_comm_t *c, const void *send, void *recv,
                              size_t count, coll_dtype_t dt, void *stream,
                              coll_request_t **req) {
  COLL_CHECK(coll__check_req("iallgather", req));
  return allgather(c, send, recv, count, dt, stream, req);
}

/* Reduce-scatter's in-place form (NCCL's): recv == send + rank * block. */
static coll_status_t reduce_scatter(coll_comm_t *c, const void *send,
                                    void *recv, size_t count, coll_dtype_t dt,
                                    coll_op_t op, void *stream,
                                    coll_request_t **req) {
  const char *what = "reduce_scatter";
  coll_work_t w;
  size_t block;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 1, op, count, 0));
  block = count * coll_dtype_size(dt);
  COLL_CHECK(coll__check_buf(what, c, "send", send, block * (size_t)c->world));
  COLL_CHECK(coll__check_buf(what, c, "recv", recv, block));
  if (recv != (const char *)send + (size_t)c->rank * block)
    COLL_CHECK(
        coll__check_overlap(what, send, block * (size_t)c->world, recv, block));
  w = (coll_work_t){.kind = COLL_WORK_REDUCE_SCATTER,
                    .send = send,
                    .recv = recv,
                    .count = count,
                    .dtype = dt,
                    .op = op,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_reduce_scatter(coll_comm_t *c, const void *send, void *recv,
                                  size_t count, coll_dtype_t dt, coll_op_t op,
                                  void *stream) {
  return reduce_scatter(c, send, recv, count, dt, op, stream, NULL);
}

coll_status_t coll_ireduce_scatter(coll_comm_t *c, const void *send, void *recv,
                                   size_t count, coll_dtype_t dt, coll_op_t op,
                                   void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("ireduce_scatter", req));
  return reduce_scatter(c, send, recv, count, dt, op, stream, req);
}

static coll_status_t reduce(coll_comm_t *c, const void *send, void *recv,
                            size_t count, coll_dtype_t dt, coll_op_t op,
                            int root, void *stream, coll_request_t **req) {
  const char *what = "reduce";
  coll_work_t w;
  size_t bytes;
  coll__err_clear();
  COLL_CHECK(coll__check_typed(what, c, dt, 1, op, count, 1));
  COLL_CHECK(coll__check_rank(what, c, "root", root));
  bytes = count * coll_dtype_size(dt);
  COLL_CHECK(coll__check_buf(what, c, "send", send, bytes));
  if (c->rank == root) {
    COLL_CHECK(coll__check_buf(what, c, "recv", recv, bytes));
    COLL_CHECK(coll__check_overlap(what, send, bytes, recv, bytes));
  }
  w = (coll_work_t){.kind = COLL_WORK_REDUCE,
                    .send = send,
                    .recv = c->rank == root ? recv : NULL,
                    .count = count,
                    .dtype = dt,
                    .op = op,
                    .root = root,
                    .stream = stream};
  return coll__issue(c, &w, req);
}

coll_status_t coll_reduce(coll_comm_t *c, const void *send, void *recv,
                          size_t count, coll_dtype_t dt, coll_op_t op, int root,
                          void *stream) {
  return reduce(c, send, recv, count, dt, op, root, stream, NULL);
}

coll_status_t coll_ireduce(coll_comm_t *c, const void *send, void *recv,
                           size_t count, coll_dtype_t dt, coll_op_t op,
                           int root, void *stream, coll_request_t **req) {
  COLL_CHECK(coll__check_req("ireduce", req));
  return reduce(c, send, recv, count, dt, op, root, stream, req);
}

static coll_status_t barrier(coll_comm_t *c, coll_request_t **req) {
  coll_work_t w = {.kind = COLL_WORK_BARRIER};
  coll__err_clear();
  COLL_CHECK(coll__check_comm("barrier", c));
  return coll__issue(c, &w, req);
}

coll_status_t coll_barrier(coll_comm_t *c) { return barrier(c, NULL); }

coll_status_t coll_ibarrier(coll_comm_t *c, coll_request_t **req) {
  COLL_CHECK(coll__check_req("ibarrier", req));
  return barrier(c, req);
}

static coll_status_t negotiate(coll_comm_t *c, coll_dtype_t local,
                               coll_dtype_t *agreed, coll_request_t **req) {
  const char *what = "negotiate_dtype";
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_dtype(what, local));
  if (agreed == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: agreed is NULL", what);
  w = (coll_work_t){
      .kind = COLL_WORK_NEGOTIATE, .dtype = local, .agreed = agreed};
  return coll__issue(c, &w, req);
}

coll_status_t coll_negotiate_dtype(coll_comm_t *c, coll_dtype_t local,
                                   coll_dtype_t *agreed) {
  return negotiate(c, local, agreed, NULL);
}

coll_status_t coll_inegotiate_dtype(coll_comm_t *c, coll_dtype_t local,
                                    coll_dtype_t *agreed,
                                    coll_request_t **req) {
  COLL_CHECK(coll__check_req("inegotiate_dtype", req));
  return negotiate(c, local, agreed, req);
}

static coll_status_t fedavg(coll_comm_t *c, float *data, size_t count,
                            int64_t deadline_ms, int *participants,
                            coll_request_t **req) {
  const char *what = "federated_average";
  coll_work_t w;
  coll__err_clear();
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_count(what, count, 1, COLL_F32));
  COLL_CHECK(coll__check_buf(what, c, "data", data, count * sizeof(float)));
  if (deadline_ms < 0)
    return coll__err(COLL_ERR_INVALID_ARG, "%s: deadline_ms %lld is negative",
                     what, (long long)deadline_ms);
  w = (coll_work_t){.kind = COLL_WORK_FEDAVG,
                    .recv = data,
                    .count = count,
                    .dtype = COLL_F32,
                    .op = COLL_AVG,
                    .deadline_ms = deadline_ms,
                    .participants = participants};
  return coll__issue(c, &w, req);
}

coll_status_t coll_federated_average(coll_comm_t *c, float *data, size_t count,
                                     int64_t deadline_ms, int *participants) {
  return fedavg(c, data, count, deadline_ms, participants, NULL);
}

coll_status_t coll_ifederated_average(coll_comm_t *c, float *data, size_t count,
                                      int64_t deadline_ms, int *participants,
                                      coll_request_t **req) {
  COLL_CHECK(coll__check_req("ifederated_average", req));
  return fedavg(c, data, count, deadline_ms, participants, req);
}
