/* SPDX-License-Identifier: Apache-2.0 */
/* p2p.c: point-to-point requests, posted straight to the transport. Device
 * memory goes through a staged request (cuda/staged_p2p.h) whose send
 * reaches the transport only once its copy into pinned memory completed;
 * a later send to the same peer on the same tag waits for its turn, so the
 * messages of a pair and tag still arrive in the order they were issued.
 * A receive from any source waits unposted until the transport's probe
 * finds a message for it, and is then posted to that sender; receives on
 * its tag issued after it wait behind it, so receives on a tag match in
 * issue order. Requests are moved on by every point-to-point call of the
 * comm (submit, coll_test, coll_wait), never by a thread of their own. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "cpu/exec.h"
#include "cpu/req.h"
#include "cuda/staged_p2p.h"
#include "cuda/staging.h"
#include "transport/transport.h"

/* The longest one transport wait blocks before the abort flag is looked
 * at again (abort also ends the transport wait itself). */
#define WAIT_SLICE_MS 100

struct p2p_req {
  coll_request_t hdr;
  p2p_req_t *prev, *next; /* in cpu->p2p while outstanding */
  p2p_req_t *q_next;      /* in cpu->unposted while the send waits */
  coll_cpu_t *cpu;        /* NULL once reaped by destroy */
  coll_treq_t treq;       /* host memory, once posted */
  coll_staged_p2p_t *sp;  /* device memory: the staging */
  coll_work_t work;
  int64_t deadline_ms;
  int posted; /* the transport request was made */
  int any;    /* a receive from any source (work.root set once matched) */
  int done;
  coll_status_t status;
  char msg[COLL_ERRMSG_MAX];
};

static coll_status_t p2p_wait(coll_request_t *hdr);
static coll_status_t p2p_test(coll_request_t *hdr, int *done);
static const coll_request_ops_t p2p_ops = {p2p_wait, p2p_test};

static void unlink_req(coll_cpu_t *cpu, p2p_req_t *r) {
  uv_mutex_lock(&cpu->mu);
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    cpu->p2p = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  uv_mutex_unlock(&cpu->mu);
}

/* The unposted sends, in issue order. Only the thread that uses the comm
 * touches them (every point-to-point call is made there). */
static void queue_push(coll_cpu_t *cpu, p2p_req_t *r) {
  p2p_req_t **pp = &cpu->unposted;
  while (*pp != NULL) pp = &(*pp)->q_next;
  r->q_next = NULL;
  *pp = r;
}

static void queue_remove(coll_cpu_t *cpu, p2p_req_t *r) {
  p2p_req_t **pp =
      r->work.kind == COLL_WORK_SEND ? &cpu->unposted : &cpu->unmatched;
  while (*pp != NULL && *pp != r) pp = &(*pp)->q_next;
  if (*pp == r) *pp = r->q_next;
  r->q_next = NULL;
}

/* The unmatched receives, in issue order (same thread as above). */
static void unmatched_push(coll_cpu_t *cpu, p2p_req_t *r) {
  p2p_req_t **pp = &cpu->unmatched;
  while (*pp != NULL) pp = &(*pp)->q_next;
  r->q_next = NULL;
  *pp = r;
}

/* 1 if an earlier receive on `tag` is still unmatched (stop at r, or
 * look at them all when r is NULL). */
static int recv_behind(const coll_cpu_t *cpu, const p2p_req_t *r,
                       uint32_t tag) {
  const p2p_req_t *q;
  for (q = cpu->unmatched; q != NULL && q != r; q = q->q_next)
    if (q->work.tag == tag) return 1;
  return 0;
}

/* 1 if an earlier send to r's peer on r's tag is still unposted. */
static int behind(const coll_cpu_t *cpu, const p2p_req_t *r) {
  const p2p_req_t *q;
  for (q = cpu->unposted; q != NULL && q != r; q = q->q_next)
    if (q->work.root == r->work.root && q->work.tag == r->work.tag) return 1;
  return 0;
}

/* Hands a host-memory request to the transport. */
static coll_status_t post(p2p_req_t *r) {
  const coll_work_t *w = &r->work;
  size_t bytes = w->count * coll_dtype_size(w->dtype);
  coll_status_t s =
      w->kind == COLL_WORK_SEND
          ? coll__t_isend(r->cpu->t, w->root, w->tag, w->send, bytes, &r->treq)
          : coll__t_irecv(r->cpu->t, w->root, w->tag, w->recv, bytes, &r->treq);
  if (s == COLL_OK) r->posted = 1;
  return s;
}

/* Turns a finished transfer (status s, len bytes) into the request's
 * outcome: *received, the text, and the comm's sticky failure. */
static coll_status_t conclude(p2p_req_t *r, coll_status_t s, size_t len) {
  const coll_work_t *w = &r->work;
  size_t es = coll_dtype_size(w->dtype);
  if (w->kind == COLL_WORK_RECV && w->source != NULL &&
      (s == COLL_OK || s == COLL_ERR_LENGTH_MISMATCH))
    *w->source = w->root;
  if (s == COLL_OK && w->kind == COLL_WORK_RECV) {
    if (len % es != 0)
      s = coll__err(COLL_ERR_LENGTH_MISMATCH,
                    "%zu bytes arrived, not a whole number of %s elements", len,
                    coll_dtype_name(w->dtype));
    else if (w->received != NULL)
      *w->received = len / es;
  }
  if (s == COLL_ERR_LENGTH_MISMATCH && w->kind == COLL_WORK_RECV &&
      len > w->count * es)
    s = coll__err(COLL_ERR_LENGTH_MISMATCH,
                  "rank %d sent %zu bytes on tag %u, more than the %zu-element "
                  "buffer holds",
                  w->root, len, w->tag, w->count);
  if (s != COLL_OK) {
    coll__err_prefix(w->kind == COLL_WORK_SEND ? "send" : "recv");
    coll__cpu_note_report(r->cpu, s);
    /* Anything but a length mismatch leaves the pair's message order
     * unknown: the comm cannot be used safely any more. */
    if (s != COLL_ERR_LENGTH_MISMATCH) coll__cpu_set_broken(r->cpu, s);
  }
  return s;
}

/* Records r's outcome (and this thread's text) for coll_wait, and lets go
 * of everything r held on the comm. */
static void settle(p2p_req_t *r, coll_status_t s) {
  r->status = s;
  if (s != COLL_OK) coll__err_save(r->msg);
  if (r->sp != NULL) {
    coll__staged_p2p_end(r->sp);
    r->sp = NULL;
  }
  queue_remove(r->cpu, r);
  unlink_req(r->cpu, r);
  r->done = 1;
}

/* The rank a message on `tag` waits from, probing from the one after the
 * rank matched last; -1 if none. Never waits. */
static int find_source(coll_cpu_t *cpu, uint32_t tag) {
  int n = cpu->comm->world, k;
  for (k = 0; k < n; k++) {
    int p = (cpu->any_next + k) % n;
    if (p == cpu->comm->rank || !coll__t_probe(cpu->t, p, tag)) continue;
    cpu->any_next = (p + 1) % n;
    return p;
  }
  return -1;
}

/* Hands every unmatched receive whose turn came to the transport: none
 * before it on its tag is still unmatched, and a receive from any source
 * has found its sender. Never blocks. */
static void drive_recvs(coll_cpu_t *cpu) {
  p2p_req_t *r, *next;
  for (r = cpu->unmatched; r != NULL; r = next) {
    coll_status_t s;
    next = r->q_next;
    if (recv_behind(cpu, r, r->work.tag)) continue;
    if (r->any) {
      int from = find_source(cpu, r->work.tag);
      if (from < 0) continue;
      r->work.root = from;
    }
    s = post(r);
    if (s != COLL_OK)
      settle(r, conclude(r, s, 0));
    else
      queue_remove(cpu, r);
  }
}

/* Hands every unposted send whose turn came to the transport: its copy
 * completed (device memory) and no earlier send to the same peer and tag
 * is still waiting; then the unmatched receives. Never blocks. */
static void drive(coll_cpu_t *cpu) {
  p2p_req_t *r, *next;
  if (cpu->unmatched != NULL) drive_recvs(cpu);
  for (r = cpu->unposted; r != NULL; r = next) {
    coll_status_t s;
    size_t len = 0;
    int done = 0;
    next = r->q_next;
    if (behind(cpu, r)) continue;
    if (r->sp != NULL) {
      s = coll__staged_p2p_progress(r->sp, 1, 0, &done, &len);
      r->posted = coll__staged_p2p_posted(r->sp);
    } else {
      s = post(r);
      done = s != COLL_OK;
    }
    if (done)
      settle(r, conclude(r, s, len));
    else if (r->posted)
      queue_remove(cpu, r);
  }
}

/* One step of r's own transfer, blocking at most wait_ms in the transport;
 * *done once it finished, with its status and length. */
static coll_status_t step(p2p_req_t *r, int64_t wait_ms, int *done,
                          size_t *len) {
  coll_transport_t *t = r->cpu->t;
  coll_status_t s;
  *done = 0;
  *len = 0;
  if (r->sp != NULL)
    return coll__staged_p2p_progress(r->sp, 0, wait_ms, done, len);
  if (!r->posted) return COLL_OK; /* waits for its turn (drive) */
  s = coll__t_wait_for(t, r->treq, wait_ms, len);
  if (s == COLL_ERR_TIMEOUT) {
    coll__err_clear(); /* still pending: not a failure */
    return COLL_OK;
  }
  *done = 1;
  return s;
}

/* Ends a request that cannot finish: the comm is broken (which aborts the
 * transport, so r's transport request fails at once and peers learn). */
static coll_status_t give_up(p2p_req_t *r, coll_status_t s) {
  coll_cpu_t *cpu = r->cpu;
  const coll_work_t *w = &r->work;
  int send = w->kind == COLL_WORK_SEND;
  /* Asked before the text is kept: the report names who is missing. */
  if (s == COLL_ERR_TIMEOUT) coll__t_desync(cpu->t);
  if (s == COLL_ERR_ABORTED)
    coll__err(s, "%s: the comm (%s) was aborted", send ? "send" : "recv",
              cpu->comm->name);
  else if (r->any && !r->posted)
    coll__err(s,
              "recv from any rank (tag %u): no message within the comm's "
              "timeout (%lld ms)",
              w->tag, (long long)cpu->comm->timeout_ms);
  else
    coll__err(s,
              "%s rank %d (tag %u): not complete within the comm's timeout "
              "(%lld ms)",
              send ? "send to" : "recv from", w->root, w->tag,
              (long long)cpu->comm->timeout_ms);
  coll__cpu_note_report(cpu, s);
  coll__cpu_set_broken(cpu, s);
  if (r->sp == NULL && r->posted) coll__t_abort_reap(cpu->t, r->treq, s);
  return s;
}

/* Moves r on as far as it goes, blocking at most wait_ms in the transport;
 * ends it once the comm was aborted, or (in a wait) once its timeout
 * passed. 1 once r is done. Never blocks with wait_ms 0. */
static int advance(p2p_req_t *r, int64_t wait_ms, int in_wait) {
  coll_cpu_t *cpu = r->cpu;
  coll_status_t s;
  size_t len = 0;
  int fin = 0;
  drive(cpu);
  if (r->done) return 1;
  s = step(r, wait_ms, &fin, &len);
  if (fin)
    s = conclude(r, s, len);
  else if (atomic_load(&cpu->comm->abort->aborted))
    s = give_up(r, COLL_ERR_ABORTED);
  else if (in_wait && r->deadline_ms >= 0 && coll__now_ms() >= r->deadline_ms)
    s = give_up(r, COLL_ERR_TIMEOUT);
  else
    return 0;
  settle(r, s);
  return 1;
}

/* How long the next step of a wait may block in the transport: only while
 * r's transfer is all that is left and no other send needs to be driven. */
static int64_t wait_slice(const p2p_req_t *r) {
  int64_t left;
  int in_transport =
      r->sp != NULL ? coll__staged_p2p_in_transport(r->sp) : r->posted;
  if (r->cpu->unposted != NULL || r->cpu->unmatched != NULL || !in_transport)
    return 0;
  left = coll__remaining_ms(r->deadline_ms);
  return left < 0 || left > WAIT_SLICE_MS ? WAIT_SLICE_MS : left;
}

/* The common case: a posted host request and nothing to drive. */
static coll_status_t finish(p2p_req_t *r) {
  coll_cpu_t *cpu = r->cpu;
  size_t len = 0;
  coll_status_t s = coll__t_wait(cpu->t, r->treq, r->deadline_ms, &len);
  /* The peer never matched us: abort, then the request fails at once. */
  if (s == COLL_ERR_TIMEOUT) coll__t_abort_reap(cpu->t, r->treq, s);
  return conclude(r, s, len);
}

coll_status_t coll__cpu_p2p_submit(coll_cpu_t *cpu, const coll_work_t *w,
                                   int blocking, coll_request_t **req) {
  p2p_req_t *r;
  coll_status_t s = COLL_OK;
  const char *what = coll__work_what(w);
  int any = w->kind == COLL_WORK_RECV && w->root == COLL_WORK_ANY_SOURCE;
  int held = w->kind == COLL_WORK_RECV && recv_behind(cpu, NULL, w->tag);
  (void)blocking;
  COLL_CHECK(coll__cpu_check_usable(cpu, what));
  if (any && !coll__t_can_probe(cpu->t))
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: the comm's transport cannot receive from any "
                     "source (libcoll's own in-process, TCP and "
                     "shared-memory transports can)",
                     what);
  if ((any || held) && coll__work_on_device(w))
    return coll__err(COLL_ERR_UNSUPPORTED,
                     "%s: %s into device memory on a CPU comm; receive into "
                     "host memory",
                     what,
                     any ? "a receive from any source"
                         : "a receive that waits behind a receive from any "
                           "source on its tag");
  r = calloc(1, sizeof *r);
  if (r == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  r->hdr.ops = &p2p_ops;
  r->cpu = cpu;
  r->work = *w;
  r->work.bufs = NULL;
  r->deadline_ms = coll__deadline(cpu->comm->timeout_ms);
  r->any = any;
  /* Everything here only posts: we are under the issue guard. */
  if (any || held) {
    /* drive() posts it once its turn came */
  } else if (coll__work_on_device(w)) {
    s = coll__staged_p2p_start(cpu->t, w, &r->sp);
    if (s == COLL_OK) r->posted = coll__staged_p2p_posted(r->sp);
  } else if (w->kind == COLL_WORK_RECV || cpu->unposted == NULL) {
    s = post(r);
  } /* else a host send behind unposted sends: drive decides */
  if (s != COLL_OK) {
    coll__err_prefix(what);
    free(r);
    return s;
  }
  uv_mutex_lock(&cpu->mu);
  r->next = cpu->p2p;
  if (r->next != NULL) r->next->prev = r;
  cpu->p2p = r;
  uv_mutex_unlock(&cpu->mu);
  if (w->kind == COLL_WORK_SEND && !r->posted) queue_push(cpu, r);
  if (any || held) unmatched_push(cpu, r);
  drive(cpu);
  *req = &r->hdr;
  return COLL_OK;
}

static coll_status_t p2p_wait(coll_request_t *hdr) {
  p2p_req_t *r = (p2p_req_t *)hdr;
  /* A request that is done may outlive its comm: only one still pending
   * says where this rank waits, for a peer whose collective times out. */
  coll_pos_t *pos = r->done ? NULL : coll__t_position(r->cpu->t);
  coll_status_t s;
  unsigned spins = 0;
  if (pos != NULL)
    coll__pos_p2p(
        pos,
        r->work.kind == COLL_WORK_SEND ? COLL_POS_P2P_SEND : COLL_POS_P2P_RECV,
        r->work.root, r->work.tag);
  if (!r->done && r->sp == NULL && r->posted && r->cpu->unposted == NULL)
    settle(r, finish(r));
  while (!r->done) {
    int64_t slice = wait_slice(r);
    if (!advance(r, slice, 1) && slice == 0) coll__poll_pause(&spins);
  }
  s = r->status;
  if (s != COLL_OK) coll__err_restore(r->msg);
  /* As for collectives (run.c): a call that broke the comm stays where
   * peers that ask later see it. */
  if (pos != NULL && (s == COLL_OK || s == COLL_ERR_LENGTH_MISMATCH))
    coll__pos_p2p(pos, COLL_POS_P2P_NONE, 0, 0);
  free(r);
  return s;
}

static coll_status_t p2p_test(coll_request_t *hdr, int *done) {
  p2p_req_t *r = (p2p_req_t *)hdr;
  /* Finished here, its outcome kept for coll_wait. The comm's timeout
   * bounds waits only, as for host requests; an abort ends it here too. */
  if (!r->done) (void)advance(r, 0, 0);
  *done = r->done;
  return COLL_OK;
}

void coll__cpu_p2p_reap_all(coll_cpu_t *cpu) {
  p2p_req_t *r;
  /* Called by destroy after the transport was aborted: every transport
   * request fails at once; the requests stay valid for the user's
   * coll_wait. A staged copy that may still run keeps its slab parked. */
  uv_mutex_lock(&cpu->mu);
  r = cpu->p2p;
  cpu->p2p = NULL;
  uv_mutex_unlock(&cpu->mu);
  cpu->unposted = NULL;
  cpu->unmatched = NULL;
  while (r != NULL) {
    p2p_req_t *next = r->next;
    if (r->sp != NULL) {
      coll__staged_p2p_end(r->sp);
      r->sp = NULL;
    } else if (r->posted) {
      coll__t_abort_reap(cpu->t, r->treq, COLL_ERR_ABORTED);
    }
    r->status = COLL_ERR_ABORTED;
    snprintf(r->msg, sizeof r->msg, "%s: the comm was destroyed first",
             coll__work_name(r->work.kind));
    r->done = 1;
    r->cpu = NULL;
    r->q_next = NULL;
    r = next;
  }
}
