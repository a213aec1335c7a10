/* SPDX-License-Identifier: Apache-2.0 */
/* abort.c: refcounted abort handles, usable from any thread at any time. */
#include <stdlib.h>

#include "core/comm.h"

coll_status_t coll__abort_handle_new(coll_abort_handle_t **out) {
  coll_abort_handle_t *h = calloc(1, sizeof *h);
  if (h == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "abort handle: out of memory");
  if (uv_mutex_init(&h->guard) != 0) {
    free(h);
    return coll__err(COLL_ERR_SYSTEM, "abort handle: cannot create a mutex");
  }
  atomic_init(&h->refs, 1);
  atomic_init(&h->aborted, 0);
  atomic_init(&h->claimed, 0);
  atomic_init(&h->bound, 0);
  atomic_init(&h->adopted, 0);
  atomic_init(&h->retired, 0);
  h->children = NULL;
  h->nchildren = 0;
  h->comm = NULL;
  *out = h;
  return COLL_OK;
}

void coll__abort_handle_ref(coll_abort_handle_t *h) {
  atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void coll_abort_handle_release(coll_abort_handle_t *h) {
  if (h == NULL) return;
  if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
    int i;
    for (i = 0; i < h->nchildren; i++)
      coll_abort_handle_release(h->children[i]);
    free(h->children);
    uv_mutex_destroy(&h->guard);
    free(h);
  }
}

coll_status_t coll_abort_handle_create(coll_abort_handle_t **out) {
  coll__err_clear();
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "abort_handle_create: out is NULL");
  *out = NULL;
  return coll__abort_handle_new(out);
}

coll_status_t coll__abort_handle_bind(coll_abort_handle_t *h,
                                      const char *what) {
  if (atomic_exchange(&h->bound, 1) != 0)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: the config's abort handle already belongs to another "
                     "comm or group; create one per comm",
                     what);
  return COLL_OK;
}

coll_status_t coll__abort_handle_link(coll_abort_handle_t *parent,
                                      coll_abort_handle_t *child) {
  coll_abort_handle_t **n;
  int aborted;
  uv_mutex_lock(&parent->guard);
  n = realloc(parent->children,
              (size_t)(parent->nchildren + 1) * sizeof *parent->children);
  if (n == NULL) {
    uv_mutex_unlock(&parent->guard);
    return coll__err(COLL_ERR_NO_MEMORY, "abort handle: out of memory");
  }
  coll__abort_handle_ref(child);
  parent->children = n;
  parent->children[parent->nchildren++] = child;
  aborted = atomic_load(&parent->aborted);
  uv_mutex_unlock(&parent->guard);
  if (aborted) coll_abort(child); /* linked after the parent's abort */
  return COLL_OK;
}

void coll__abort_locked(coll_abort_handle_t *h) {
  atomic_store(&h->aborted, 1);
  if (h->comm != NULL && atomic_exchange(&h->claimed, 1) == 0) {
    /* Before the backend fails what is in flight: the file shows what the
     * comm was doing when it was aborted. */
    if (h->comm->trace != NULL) (void)coll__trace_dump(h->comm->trace, "abort");
    h->comm->ops->abort(h->comm);
  }
}

coll_status_t coll_comm_abort_handle(coll_comm_t *c,
                                     coll_abort_handle_t **out) {
  coll__err_clear();
  if (out != NULL) *out = NULL;
  if (c == NULL || out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "comm_abort_handle: %s is NULL",
                     c == NULL ? "comm" : "out");
  coll__abort_handle_ref(c->abort);
  *out = c->abort;
  return COLL_OK;
}

coll_status_t coll_abort(coll_abort_handle_t *h) {
  coll__err_clear();
  if (h == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "abort: handle is NULL");
  /* The guard orders us against submit (a collective issued after this
   * returns sees the flag) and against destroy (which unlinks the comm under
   * it, so we never touch a freed comm). The claim makes the backend's
   * teardown run once, whoever gets there first. */
  coll_abort_handle_t **kids = NULL;
  int nkids = 0, i;
  uv_mutex_lock(&h->guard);
  if (atomic_load(&h->retired)) {
    /* Its comm is gone: nothing to abort, nothing to record. */
    uv_mutex_unlock(&h->guard);
    return COLL_OK;
  }
  coll__abort_locked(h);
  if (h->nchildren > 0 &&
      (kids = malloc((size_t)h->nchildren * sizeof *kids)) != NULL) {
    nkids = h->nchildren;
    for (i = 0; i < nkids; i++) {
      kids[i] = h->children[i];
      coll__abort_handle_ref(kids[i]);
    }
  }
  uv_mutex_unlock(&h->guard);
  /* Outside our guard: a child's guard is never taken under a parent's. */
  for (i = 0; i < nkids; i++) {
    coll_abort(kids[i]);
    coll_abort_handle_release(kids[i]);
  }
  free(kids);
  return COLL_OK;
}

int coll_is_aborted(const coll_abort_handle_t *h) {
  if (h == NULL) return 0;
  return atomic_load(&((coll_abort_handle_t *)h)->aborted);
}
