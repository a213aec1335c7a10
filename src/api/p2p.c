/* SPDX-License-Identifier: Apache-2.0 */
/* p2p.c: the public tagged send and receive. */
#include "api/api.h"

static coll_status_t check_p2p(const char *what, coll_comm_t *c,
                               const void *buf, size_t count, coll_dtype_t dt,
                               int peer, uint32_t tag) {
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_dtype(what, dt));
  COLL_CHECK(coll__check_count(what, count, 1, dt));
  COLL_CHECK(coll__check_rank(what, c, "peer", peer));
  if (peer == c->rank)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: peer %d is this rank; send to another rank", what,
                     peer);
  if (tag >= COLL_TAG_RESERVED)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: tag 0x%x is reserved for collectives (user tags are "
                     "below 0x%x)",
                     what, tag, COLL_TAG_RESERVED);
  return coll__check_buf(what, c, "data", buf, count * coll_dtype_size(dt));
}

static coll_status_t p2p_send(coll_comm_t *c, const void *buf, size_t count,
                              coll_dtype_t dt, int peer, uint32_t tag,
                              coll_request_t **req) {
  coll_work_t w = {.kind = COLL_WORK_SEND};
  coll__err_clear();
  COLL_CHECK(check_p2p("send", c, buf, count, dt, peer, tag));
  w.send = buf;
  w.count = count;
  w.dtype = dt;
  w.root = peer;
  w.tag = tag;
  return coll__issue(c, &w, req);
}

static coll_status_t p2p_recv(coll_comm_t *c, void *buf, size_t count,
                              coll_dtype_t dt, int peer, uint32_t tag,
                              size_t *received, coll_request_t **req) {
  coll_work_t w = {.kind = COLL_WORK_RECV};
  coll__err_clear();
  COLL_CHECK(check_p2p("recv", c, buf, count, dt, peer, tag));
  w.recv = buf;
  w.count = count;
  w.dtype = dt;
  w.root = peer;
  w.tag = tag;
  w.received = received;
  return coll__issue(c, &w, req);
}

coll_status_t coll_send(coll_comm_t *c, const void *buf, size_t count,
                        coll_dtype_t dt, int peer, uint32_t tag) {
  return p2p_send(c, buf, count, dt, peer, tag, NULL);
}

coll_status_t coll_isend(coll_comm_t *c, const void *buf, size_t count,
                         coll_dtype_t dt, int peer, uint32_t tag,
                         coll_request_t **req) {
  COLL_CHECK(coll__check_req("isend", req));
  return p2p_send(c, buf, count, dt, peer, tag, req);
}

coll_status_t coll_recv(coll_comm_t *c, void *buf, size_t count,
                        coll_dtype_t dt, int peer, uint32_t tag,
                        size_t *received) {
  return p2p_recv(c, buf, count, dt, peer, tag, received, NULL);
}

coll_status_t coll_irecv(coll_comm_t *c, void *buf, size_t count,
                         coll_dtype_t dt, int peer, uint32_t tag,
                         size_t *received, coll_request_t **req) {
  COLL_CHECK(coll__check_req("irecv", req));
  return p2p_recv(c, buf, count, dt, peer, tag, received, req);
}

/* A receive from any other rank: the checks of a receive, without a peer. */
static coll_status_t p2p_recv_any(coll_comm_t *c, void *buf, size_t count,
                                  coll_dtype_t dt, uint32_t tag, int *source,
                                  size_t *received, coll_request_t **req) {
  const char *what = "recv_any";
  coll_work_t w = {.kind = COLL_WORK_RECV};
  coll__err_clear();
  COLL_CHECK(coll__check_comm(what, c));
  COLL_CHECK(coll__check_dtype(what, dt));
  COLL_CHECK(coll__check_count(what, count, 1, dt));
  if (c->world < 2)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: the comm has no other rank to receive from", what);
  if (tag >= COLL_TAG_RESERVED)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: tag 0x%x is reserved for collectives (user tags are "
                     "below 0x%x)",
                     what, tag, COLL_TAG_RESERVED);
  COLL_CHECK(
      coll__check_buf(what, c, "data", buf, count * coll_dtype_size(dt)));
  w.recv = buf;
  w.count = count;
  w.dtype = dt;
  w.root = COLL_WORK_ANY_SOURCE;
  w.tag = tag;
  w.received = received;
  w.source = source;
  return coll__issue(c, &w, req);
}

coll_status_t coll_recv_any(coll_comm_t *c, void *buf, size_t count,
                            coll_dtype_t dt, uint32_t tag, int *source,
                            size_t *received) {
  return p2p_recv_any(c, buf, count, dt, tag, source, received, NULL);
}

coll_status_t coll_irecv_any(coll_comm_t *c, void *buf, size_t count,
                             coll_dtype_t dt, uint32_t tag, int *source,
                             size_t *received, coll_request_t **req) {
  COLL_CHECK(coll__check_req("irecv_any", req));
  return p2p_recv_any(c, buf, count, dt, tag, source, received, req);
}
