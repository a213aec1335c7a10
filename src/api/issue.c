/* SPDX-License-Identifier: Apache-2.0 */
/* issue.c: submitting checked work, and waiting for requests. */
#include "api/api.h"

coll_status_t coll__issue(coll_comm_t *c, const coll_work_t *w,
                          coll_request_t **req) {
  coll_abort_handle_t *h = c->abort;
  coll_request_t *r = NULL;
  coll_status_t s;
  if (c->ops->prepare != NULL) {
    s = c->ops->prepare(c, w);
    if (s != COLL_OK) return s;
  }
  uv_mutex_lock(&h->guard);
  if (atomic_load(&h->aborted)) {
    uv_mutex_unlock(&h->guard);
    return coll__err(COLL_ERR_ABORTED, "%s: the comm (%s) was aborted",
                     coll__work_what(w), c->name);
  }
  s = c->ops->submit(c, w, req == NULL, &r);
  uv_mutex_unlock(&h->guard);
  if (s != COLL_OK) return s;
  if (req != NULL) {
    *req = r;
    return COLL_OK;
  }
  return r->ops->wait(r);
}

coll_status_t coll_wait(coll_request_t *req) {
  coll__err_clear();
  if (req == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "wait: request is NULL");
  return req->ops->wait(req);
}

coll_status_t coll_test(coll_request_t *req, int *done) {
  coll__err_clear();
  if (req == NULL || done == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "test: %s is NULL",
                     req == NULL ? "request" : "done");
  return req->ops->test(req, done);
}
