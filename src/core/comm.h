/* SPDX-License-Identifier: Apache-2.0 */
/* comm.h: the communicator, the backend vtable, requests and abort handles,
 * shared by the API layer and every backend. Work descriptors are in
 * core/work.h, which needs no libuv. */
#ifndef COLL_CORE_COMM_H
#define COLL_CORE_COMM_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "coll.h"
#include "core/error.h"
#include "core/trace.h"
#include "core/work.h"

/* A request: each backend embeds this header first in its own struct. */
typedef struct coll_request_ops {
  coll_status_t (*wait)(coll_request_t *r); /* completes and frees */
  coll_status_t (*test)(coll_request_t *r, int *done);
} coll_request_ops_t;

struct coll_request {
  const coll_request_ops_t *ops;
  /* Set by the issue path for a nonblocking call: coll_wait records the
   * end in the comm's flight recorder (a reference; NULL when off). */
  coll_trace_t *trace;
  uint64_t trace_seq;
};

/* A backend: the API layer never asks which one it talks to. */
typedef struct coll_backend_ops {
  const char *name;
  /* Turns checked work into a request. Called under the abort handle's issue
   * guard, so it must only enqueue (never wait). `blocking` says the caller
   * waits right away, so the backend may run it on the caller's thread. */
  coll_status_t (*submit)(coll_comm_t *c, const coll_work_t *w, int blocking,
                          coll_request_t **req);
  /* Wakes every waiter with COLL_ERR_ABORTED and refuses new work; called
   * at most once, under the guard, by whoever claimed the teardown. Must
   * not block on peers. */
  void (*abort)(coll_comm_t *c);
  /* Fails queued work, stops threads, frees the backend state. Called once,
   * after the comm was unlinked from its abort handle. `aborted` says
   * whether abort ran (the backend's communicator is already torn down). */
  coll_status_t (*destroy)(coll_comm_t *c, int aborted);
  /* Optional: checks that a buffer is usable by this backend (host vs
   * device memory); NULL accepts everything. */
  coll_status_t (*check_buffer)(coll_comm_t *c, const void *p, size_t bytes,
                                const char *what);
  /* Optional: runs on the caller's thread before the issue guard is taken,
   * for what may wait (for the backend's earlier work to be accepted, for a
   * descriptor agreement). It may take the guard itself, only around an
   * enqueue, and must return promptly once the comm is aborted. */
  coll_status_t (*prepare)(coll_comm_t *c, const coll_work_t *w);
  /* Optional: runs on the caller's thread after submit returned a request
   * for a nonblocking call and the guard was released, for what must hold
   * when the call returns (NCCL: the work is on the caller's stream). It
   * may wait, bounded by the comm's timeout, and must return promptly once
   * the comm is aborted. On failure the API layer waits the request (which
   * frees it) and returns the failure. */
  coll_status_t (*settle)(coll_comm_t *c, coll_request_t *r);
  /* Optional (NULL: COLL_ERR_NOT_AVAILABLE naming the backend): after a
   * failure, or on a healthy comm, agrees with the other ranks that call
   * it on who survives and makes *out, their comm, renumbered, on the same
   * transport (coll_comm_shrink; the API layer checked the arguments and
   * that c is not aborted). cfg as for the constructors. c stays the
   * caller's. One thread per comm. */
  coll_status_t (*shrink)(coll_comm_t *c, const coll_comm_config_t *cfg,
                          coll_comm_t **out);
  /* Optional: the same without the ranks of `exclude` (n of them, checked:
   * in range, distinct, sorted, this rank not among them), for backends
   * whose ranks cannot agree on who is gone (coll_comm_shrink_exclude). */
  coll_status_t (*shrink_exclude)(coll_comm_t *c, const int *exclude, int n,
                                  const coll_comm_config_t *cfg,
                                  coll_comm_t **out);
} coll_backend_ops_t;

struct coll_abort_handle {
  atomic_int refs;
  atomic_int aborted;
  /* The issue guard: held around submit and around unlinking the comm,
   * never across a wait. Abort takes it too, so a collective is never
   * submitted into a comm that abort is tearing down. */
  uv_mutex_t guard;
  coll_comm_t *comm;  /* NULL once destroy unlinked it (guarded) */
  atomic_int claimed; /* teardown claim: 1 once abort or destroy took it */
  atomic_int bound;   /* 1 once a comm, a group or an init claimed it */
  atomic_int adopted; /* 1 once a comm made it its own */
  /* 1 once its comm was destroyed (set under the guard): coll_abort is
   * then a no-op and coll_is_aborted keeps what it was. A handle that
   * never had a comm is not retired, so a watchdog can still mark it. */
  atomic_int retired;
  /* A group's handle aborts the handles of its comms too (guarded; each
   * holds a reference, released with the handle). */
  coll_abort_handle_t **children;
  int nchildren;
};

struct coll_comm {
  const coll_backend_ops_t *ops;
  void *be; /* backend state */
  int rank;
  int world;
  int64_t timeout_ms; /* < 0: none */
  char name[64];
  coll_abort_handle_t *abort; /* the comm's own reference */
  coll_trace_t *trace;        /* flight recorder (a reference); NULL: off */
  /* The call in progress on this comm ("allreduce", a string literal),
   * NULL between calls: the one-thread-per-comm rule, checked on entry
   * (api/owner.c). */
  _Atomic(const char *) in_call;
};

/* Builds a comm shell (abort handle included) for a backend; the caller
 * fills be. Resolves cfg (NULL = defaults, timeout from COLL_TIMEOUT_MS). */
coll_status_t coll__comm_new(const coll_backend_ops_t *ops, int rank, int world,
                             const coll_comm_config_t *cfg, coll_comm_t **out);
/* Checks a caller's config before anything reads it: NULL is fine; else
 * it must come from COLL_COMM_CONFIG_INIT of this header (its magic) or of
 * an older one (its size is exactly that of an older layout). Refuses with
 * COLL_ERR_INVALID_ARG, "what: ...", naming the macro. */
coll_status_t coll__config_check(const coll_comm_config_t *cfg,
                                 const char *what);
/* cfg's timeout when the config is large enough to carry one and it is not
 * 0, else coll__default_timeout_ms() (core/env.h). */
int64_t coll__config_timeout_ms(const coll_comm_config_t *cfg);
/* cfg's abort handle if the config is large enough to carry one, else NULL. */
coll_abort_handle_t *coll__config_abort_handle(const coll_comm_config_t *cfg);
/* Frees a shell whose backend state is already gone (or was never made). */
void coll__comm_free_shell(coll_comm_t *c);

/* Abort handle internals. */
coll_status_t coll__abort_handle_new(coll_abort_handle_t **out);
void coll__abort_handle_ref(coll_abort_handle_t *h);
/* Marks h as adopted (by a comm or a group): COLL_OK once, then
 * COLL_ERR_INVALID_ARG naming `what`. */
coll_status_t coll__abort_handle_bind(coll_abort_handle_t *h, const char *what);
/* Makes coll_abort(parent) abort child too (takes a reference on child). */
coll_status_t coll__abort_handle_link(coll_abort_handle_t *parent,
                                      coll_abort_handle_t *child);
/* coll_abort for a caller that already holds h->guard (a backend that found
 * a fatal error while enqueueing). Children are not visited. */
void coll__abort_locked(coll_abort_handle_t *h);

#endif
