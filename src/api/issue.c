/* SPDX-License-Identifier: Apache-2.0 */
/* issue.c: submitting checked work, and waiting for requests. */
#include "api/api.h"

/* coll__issue, once this thread holds the comm (coll__comm_enter). */
static coll_status_t issue_owned(coll_comm_t *c, coll_work_t *w,
                                 coll_request_t **req) {
  coll_abort_handle_t *h = c->abort;
  coll_trace_t *t = c->trace;
  coll_request_t *r = NULL;
  coll_status_t s;
  w->trace_seq = t != NULL ? coll__trace_begin(t, w) : 0;
  if (c->ops->prepare != NULL) {
    s = c->ops->prepare(c, w);
    if (s != COLL_OK) goto done;
  }
  uv_mutex_lock(&h->guard);
  if (atomic_load(&h->aborted)) {
    uv_mutex_unlock(&h->guard);
    s = coll__err(COLL_ERR_ABORTED, "%s: the comm (%s) was aborted",
                  coll__work_what(w), c->name);
    goto done;
  }
  s = c->ops->submit(c, w, req == NULL, &r);
  uv_mutex_unlock(&h->guard);
  if (s != COLL_OK) goto done;
  if (req != NULL && c->ops->settle != NULL &&
      (s = c->ops->settle(c, r)) != COLL_OK) {
    char why[COLL_ERRMSG_MAX];
    coll__err_save(why);
    (void)r->ops->wait(r); /* frees it; the comm has failed or was aborted */
    coll__err_restore(why);
    goto done;
  }
  if (req != NULL) {
    /* coll_wait records the end; the request keeps the recorder alive, as
     * it may outlive the comm. */
    r->trace = t;
    r->trace_seq = w->trace_seq;
    if (t != NULL) coll__trace_ref(t);
    *req = r;
    return COLL_OK;
  }
  s = r->ops->wait(r);
done:
  /* A backend that ran it may have recorded the end already (with the
   * peer it waited on); then this one does not count. */
  if (t != NULL) coll__trace_end(t, w->trace_seq, s, -1);
  return s;
}

coll_status_t coll__issue(coll_comm_t *c, coll_work_t *w,
                          coll_request_t **req) {
  coll_status_t s = coll__comm_enter(c, coll__work_what(w));
  if (s != COLL_OK) return s;
  /* A blocking call holds the comm until its result is in; a nonblocking
   * one until it is issued (its coll_wait may come from any thread). */
  s = issue_owned(c, w, req);
  coll__comm_leave(c);
  return s;
}

coll_status_t coll_wait(coll_request_t *req) {
  coll_trace_t *t;
  uint64_t seq;
  coll_status_t s;
  coll__err_clear();
  if (req == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "wait: request is NULL");
  t = req->trace;
  seq = req->trace_seq;
  s = req->ops->wait(req); /* frees req */
  if (t != NULL) {
    coll__trace_end(t, seq, s, -1);
    coll__trace_release(t);
  }
  return s;
}

coll_status_t coll_test(coll_request_t *req, int *done) {
  coll__err_clear();
  if (req == NULL || done == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "test: %s is NULL",
                     req == NULL ? "request" : "done");
  return req->ops->test(req, done);
}
