/* SPDX-License-Identifier: Apache-2.0 */
/* mailbox.c: the test transport: matching by (source, tag) in posting
 * order under one lock, one condition variable per endpoint. */
#include "mailbox.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct mreq mreq_t;
struct mreq {
  mreq_t *next;          /* in the receiver's posted or unexpected list */
  mreq_t *lprev, *lnext; /* in the owner's list of requests not yet waited */
  uint64_t hash;         /* a send's data when posted */
  int owner;             /* the endpoint that waits for it; -1: an eager copy */
  int is_send;
  int src, dst; /* the message's sender and receiver */
  uint32_t tag;
  const void *sbuf;
  void *rbuf;
  size_t len; /* send: bytes; receive: capacity */
  size_t got;
  void *copy; /* an eager message's data */
  int queued, done;
  coll_status_t status;
};

typedef struct mlist {
  mreq_t *head, *tail;
} mlist_t;

typedef struct mep {
  mbox_world_t *w;
  int rank;
  int aborted;
  size_t live;
  mreq_t *live_head; /* posted, not yet waited: their buffers are ours */
  uv_cond_t cv;
  mlist_t posted;     /* receives waiting here */
  mlist_t unexpected; /* sends to here with no receive yet */
} mep_t;

struct mbox_world {
  uv_mutex_t mu;
  int n, eager, refs;
  size_t messages;
  mep_t *eps;
  size_t nlog; /* sends logged */
  int log_src[MBOX_LOG];
  size_t log_len[MBOX_LOG];
};

static void list_push(mlist_t *l, mreq_t *r) {
  r->next = NULL;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
  r->queued = 1;
}

/* Unlinks and returns the first request in l that `pred` accepts. */
static mreq_t *list_take(mlist_t *l, int (*pred)(const mreq_t *, const void *),
                         const void *arg) {
  mreq_t *r, *prev = NULL;
  for (r = l->head; r != NULL; prev = r, r = r->next) {
    if (!pred(r, arg)) continue;
    if (prev)
      prev->next = r->next;
    else
      l->head = r->next;
    if (l->tail == r) l->tail = prev;
    r->next = NULL;
    r->queued = 0;
    return r;
  }
  return NULL;
}

/* Eight bytes a step: the sanitizers check each load. */
static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull, x;
  size_t i;
  for (i = 0; i + 8 <= n; i += 8) {
    memcpy(&x, b + i, 8);
    h = (h ^ x) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int overlaps(const void *a, size_t alen, const void *b, size_t blen) {
  const char *x = a, *y = b;
  return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/* The transport owns the buffer of every request until its wait: a new
 * receive must not share bytes with any of them, a new send not with a
 * pending receive. An algorithm that breaks this fails here at once. */
static int conflicts(const mep_t *ep, int is_send, const void *buf,
                     size_t len) {
  const mreq_t *r;
  for (r = ep->live_head; r != NULL; r = r->lnext) {
    if (r->is_send && is_send) continue;
    if (overlaps(buf, len, r->is_send ? r->sbuf : r->rbuf, r->len)) return 1;
  }
  return 0;
}

typedef struct mkey {
  int src;
  uint32_t tag;
} mkey_t;

static int match_key(const mreq_t *r, const void *arg) {
  const mkey_t *k = arg;
  return r->src == k->src && r->tag == k->tag;
}

static void complete(mbox_world_t *w, mreq_t *r, coll_status_t s) {
  r->status = s;
  r->done = 1;
  if (r->owner >= 0) uv_cond_broadcast(&w->eps[r->owner].cv);
}

/* Copies message m into receive r and completes both. Lock held. */
static void deliver(mbox_world_t *w, mreq_t *m, mreq_t *r) {
  const void *data = m->copy ? m->copy : m->sbuf;
  int fits = m->len <= r->len;
  if (fits && m->len > 0) memcpy(r->rbuf, data, m->len);
  r->got = m->len;
  w->messages++;
  complete(w, r, fits ? COLL_OK : COLL_ERR_LENGTH_MISMATCH);
  if (m->owner >= 0) {
    complete(w, m, COLL_OK);
  } else {
    free(m->copy);
    free(m);
  }
}

static mreq_t *req_new(mep_t *ep, int is_send, int src, int dst, uint32_t tag,
                       size_t len) {
  mreq_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->owner = ep->rank;
  r->is_send = is_send;
  r->src = src;
  r->dst = dst;
  r->tag = tag;
  r->len = len;
  ep->live++;
  r->lnext = ep->live_head;
  if (ep->live_head) ep->live_head->lprev = r;
  ep->live_head = r;
  return r;
}

static void live_remove(mep_t *ep, mreq_t *r) {
  if (r->lprev)
    r->lprev->lnext = r->lnext;
  else
    ep->live_head = r->lnext;
  if (r->lnext) r->lnext->lprev = r->lprev;
  r->lprev = r->lnext = NULL;
  ep->live--;
}

static coll_status_t check_post(mep_t *ep, int peer, void **req) {
  if (req == NULL || peer < 0 || peer >= ep->w->n)
    return coll_set_last_error(COLL_ERR_INVALID_ARG,
                               "mailbox: bad peer %d or request", peer);
  if (ep->aborted)
    return coll_set_last_error(COLL_ERR_ABORTED, "mailbox: rank %d aborted",
                               ep->rank);
  if (ep->w->eps[peer].aborted)
    return coll_set_last_error(COLL_ERR_PEER_LOST, "mailbox: rank %d lost",
                               peer);
  return COLL_OK;
}

static coll_status_t mb_isend(void *ctx, int peer, uint32_t tag,
                              const void *buf, size_t len, void **req) {
  mep_t *ep = ctx;
  mbox_world_t *w = ep->w;
  mreq_t *m, *r;
  mkey_t k = {ep->rank, tag};
  coll_status_t s;
  uv_mutex_lock(&w->mu);
  s = check_post(ep, peer, req);
  if (s != COLL_OK) goto out;
  if (conflicts(ep, 1, buf, len)) {
    s = coll_set_last_error(COLL_ERR_INTERNAL,
                            "mailbox: rank %d sends from a buffer a pending "
                            "receive writes",
                            ep->rank);
    goto out;
  }
  m = req_new(ep, 1, ep->rank, peer, tag, len);
  if (m == NULL) {
    s = coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: out of memory");
    goto out;
  }
  m->sbuf = buf;
  m->hash = hash_bytes(buf, len);
  if (w->nlog < MBOX_LOG) {
    w->log_src[w->nlog] = ep->rank;
    w->log_len[w->nlog++] = len;
  }
  *req = m;
  r = list_take(&w->eps[peer].posted, match_key, &k);
  if (r != NULL) {
    deliver(w, m, r);
  } else if (w->eager) {
    /* The caller's request completes now; a copy waits at the receiver. */
    mreq_t *c = calloc(1, sizeof *c);
    void *data = malloc(len ? len : 1);
    if (c == NULL || data == NULL) {
      free(c);
      free(data);
      live_remove(ep, m);
      free(m);
      *req = NULL;
      s = coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: out of memory");
      goto out;
    }
    *c = *m;
    c->owner = -1;
    c->copy = data;
    if (len) memcpy(data, buf, len);
    list_push(&w->eps[peer].unexpected, c);
    complete(w, m, COLL_OK);
  } else {
    list_push(&w->eps[peer].unexpected, m);
  }
out:
  uv_mutex_unlock(&w->mu);
  return s;
}

static coll_status_t mb_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                              size_t cap, void **req) {
  mep_t *ep = ctx;
  mbox_world_t *w = ep->w;
  mreq_t *m, *r;
  mkey_t k = {peer, tag};
  coll_status_t s;
  uv_mutex_lock(&w->mu);
  s = check_post(ep, peer, req);
  if (s != COLL_OK && s != COLL_ERR_PEER_LOST) goto out;
  if (conflicts(ep, 0, buf, cap)) {
    s = coll_set_last_error(COLL_ERR_INTERNAL,
                            "mailbox: rank %d receives into a buffer a "
                            "pending request uses",
                            ep->rank);
    goto out;
  }
  m = list_take(&ep->unexpected, match_key, &k);
  if (m == NULL && s != COLL_OK) goto out; /* lost, and nothing left */
  s = COLL_OK;
  r = req_new(ep, 0, peer, ep->rank, tag, cap);
  if (r == NULL) {
    if (m) list_push(&ep->unexpected, m); /* order no longer matters */
    s = coll_set_last_error(COLL_ERR_NO_MEMORY, "mailbox: out of memory");
    goto out;
  }
  r->rbuf = buf;
  *req = r;
  if (m != NULL)
    deliver(w, m, r);
  else
    list_push(&ep->posted, r);
out:
  uv_mutex_unlock(&w->mu);
  return s;
}

static void req_unlink(mbox_world_t *w, mreq_t *r) {
  mlist_t *l = r->is_send ? &w->eps[r->dst].unexpected : &w->eps[r->dst].posted;
  mreq_t *x, *prev = NULL;
  for (x = l->head; x != NULL; prev = x, x = x->next) {
    if (x != r) continue;
    if (prev)
      prev->next = x->next;
    else
      l->head = x->next;
    if (l->tail == x) l->tail = prev;
    break;
  }
  r->queued = 0;
}

static coll_status_t mb_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len) {
  mep_t *ep = ctx;
  mbox_world_t *w = ep->w;
  mreq_t *r = req;
  coll_status_t s;
  uint64_t end =
      uv_hrtime() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
  uv_mutex_lock(&w->mu);
  while (!r->done) {
    uint64_t now = uv_hrtime();
    if (timeout_ms < 0) {
      uv_cond_wait(&ep->cv, &w->mu);
      continue;
    }
    if (now >= end) {
      uv_mutex_unlock(&w->mu);
      return coll_set_last_error(COLL_ERR_TIMEOUT,
                                 "mailbox: rank %d timed out waiting for "
                                 "rank %d",
                                 ep->rank, r->is_send ? r->dst : r->src);
    }
    (void)uv_cond_timedwait(&ep->cv, &w->mu, end - now);
  }
  s = r->status;
  if (len) *len = r->got;
  live_remove(ep, r);
  uv_mutex_unlock(&w->mu);
  /* A send's data must stay as it was until its wait. */
  if (s == COLL_OK && r->is_send && hash_bytes(r->sbuf, r->len) != r->hash)
    s = COLL_ERR_INTERNAL;
  free(r);
  if (s == COLL_ERR_INTERNAL)
    coll_set_last_error(s,
                        "mailbox: rank %d changed a send buffer before "
                        "waiting for the send",
                        ep->rank);
  else if (s == COLL_ERR_LENGTH_MISMATCH)
    coll_set_last_error(s, "mailbox: message longer than the receive");
  else if (s == COLL_ERR_ABORTED)
    coll_set_last_error(s, "mailbox: rank %d aborted", ep->rank);
  else if (s == COLL_ERR_PEER_LOST)
    coll_set_last_error(s, "mailbox: rank %d lost a peer", ep->rank);
  return s;
}

/* Fails every pending request that involves the aborted endpoint `a`. */
static void mb_abort(void *ctx) {
  mep_t *ep = ctx;
  mbox_world_t *w = ep->w;
  int i;
  uv_mutex_lock(&w->mu);
  ep->aborted = 1;
  for (i = 0; i < w->n; i++) {
    mlist_t *ls[2] = {&w->eps[i].posted, &w->eps[i].unexpected};
    int j;
    for (j = 0; j < 2; j++) {
      mreq_t *r = ls[j]->head, *next;
      for (; r != NULL; r = next) {
        next = r->next;
        if (r->owner < 0 || (r->src != ep->rank && r->dst != ep->rank))
          continue;
        req_unlink(w, r);
        complete(w, r,
                 r->owner == ep->rank ? COLL_ERR_ABORTED : COLL_ERR_PEER_LOST);
      }
    }
  }
  uv_mutex_unlock(&w->mu);
}

static void world_unref(mbox_world_t *w) {
  int i, last;
  uv_mutex_lock(&w->mu);
  last = --w->refs == 0;
  uv_mutex_unlock(&w->mu);
  if (!last) return;
  for (i = 0; i < w->n; i++) {
    mreq_t *r, *next;
    for (r = w->eps[i].unexpected.head; r != NULL; r = next) {
      next = r->next;
      free(r->copy);
      free(r);
    }
    for (r = w->eps[i].posted.head; r != NULL; r = next) {
      next = r->next;
      free(r);
    }
    uv_cond_destroy(&w->eps[i].cv);
  }
  uv_mutex_destroy(&w->mu);
  free(w->eps);
  free(w);
}

static void mb_destroy(void *ctx) { world_unref(((mep_t *)ctx)->w); }

static const coll_transport_ops_t mb_ops = {
    /* A version 1 table without its optional barrier slot. */
    .size = offsetof(coll_transport_ops_t, barrier),
    .version = 1,
    .name = "mailbox",
    .isend = mb_isend,
    .irecv = mb_irecv,
    .wait = mb_wait,
    .abort = mb_abort,
    .destroy = mb_destroy,
};

int mbox_create(int world, int eager, coll_transport_t **out,
                mbox_world_t **wout) {
  mbox_world_t *w = calloc(1, sizeof *w);
  int i;
  if (w == NULL) return -1;
  w->eps = calloc((size_t)world, sizeof *w->eps);
  if (w->eps == NULL || uv_mutex_init(&w->mu) != 0) {
    free(w->eps);
    free(w);
    return -1;
  }
  w->n = world;
  w->eager = eager;
  w->refs = world + 1;
  for (i = 0; i < world; i++) {
    w->eps[i].w = w;
    w->eps[i].rank = i;
    uv_cond_init(&w->eps[i].cv);
  }
  for (i = 0; i < world; i++)
    if (coll_transport_create(&mb_ops, &w->eps[i], i, world, &out[i]) !=
        COLL_OK)
      return -1; /* the tests stop at the first failure */
  *wout = w;
  return 0;
}

size_t mbox_live(mbox_world_t *w, int rank) {
  size_t n;
  uv_mutex_lock(&w->mu);
  n = w->eps[rank].live;
  uv_mutex_unlock(&w->mu);
  return n;
}

size_t mbox_messages(mbox_world_t *w) {
  size_t n;
  uv_mutex_lock(&w->mu);
  n = w->messages;
  uv_mutex_unlock(&w->mu);
  return n;
}

size_t mbox_sent_lengths(mbox_world_t *w, int src, size_t *lens, size_t max) {
  size_t i, n = 0;
  uv_mutex_lock(&w->mu);
  for (i = 0; i < w->nlog; i++)
    if (w->log_src[i] == src) {
      if (n < max) lens[n] = w->log_len[i];
      n++;
    }
  uv_mutex_unlock(&w->mu);
  return n;
}

void mbox_world_release(mbox_world_t *w) { world_unref(w); }
