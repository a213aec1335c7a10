/* SPDX-License-Identifier: Apache-2.0 */
/* transport.h: the endpoint object behind coll_transport_t and the calls the
 * algorithms use. Algorithms see only these; never a socket. */
#ifndef COLL_TRANSPORT_TRANSPORT_H
#define COLL_TRANSPORT_TRANSPORT_H

#include <stdatomic.h>

#include "coll.h"
#include "core/origin.h"

/* Longest provider name kept (longer ones are cut). */
#define COLL_TRANSPORT_NAME_MAX 32

struct coll_transport {
  coll_transport_ops_t ops; /* copied; slots past the provider's size NULL;
                               ops.name points at name[] below */
  char name[COLL_TRANSPORT_NAME_MAX];
  void *ctx;
  int rank;
  int world;
  atomic_int aborted;
  size_t seg_bytes; /* the pipeline segment it moves best; 0: not said */
  /* host_of[r]: the number of rank r's host (hosts numbered by their
   * lowest rank), as learnt at rendezvous; NULL: every rank on one host (a
   * third party's transport, the in-process one). Owned. */
  int *host_of;
  /* libcoll's own transports only (NULL for a third party's): `fail` ends
   * the endpoint like abort, for a failure that started at o, and tells
   * the peers o before it closes anything (an origin it already holds
   * wins); `origin` reports the origin the endpoint failed for, if any. */
  void (*fail)(void *ctx, const coll_origin_t *o);
  int (*origin)(void *ctx, coll_origin_t *o);
};

/* The pipeline segment for a transport that states no preference (a third
 * party's): 1 MiB, what suits sockets. */
#define COLL_T_SEGMENT_DEFAULT (1u << 20)

/* A transport request as the algorithms hold it. */
typedef void *coll_treq_t;

/* Post a send / a receive. On failure nothing is pending. One thread. */
coll_status_t coll__t_isend(coll_transport_t *t, int peer, uint32_t tag,
                            const void *buf, size_t len, coll_treq_t *req);
coll_status_t coll__t_irecv(coll_transport_t *t, int peer, uint32_t tag,
                            void *buf, size_t cap, coll_treq_t *req);
/* Completes a request before the absolute deadline (coll__now_ms based; < 0
 * none). On COLL_ERR_TIMEOUT the request is still pending: the caller must
 * abort the transport and then wait again (it fails at once). len may be
 * NULL. One thread. */
coll_status_t coll__t_wait(coll_transport_t *t, coll_treq_t req,
                           int64_t deadline_ms, size_t *len);
/* Waits for a receive that must deliver exactly `len` bytes. */
coll_status_t coll__t_wait_exact(coll_transport_t *t, coll_treq_t req,
                                 int64_t deadline_ms, size_t len);
/* Blocking send / receive of exactly len bytes. */
coll_status_t coll__t_send(coll_transport_t *t, int peer, uint32_t tag,
                           const void *buf, size_t len, int64_t deadline_ms);
coll_status_t coll__t_recv(coll_transport_t *t, int peer, uint32_t tag,
                           void *buf, size_t len, int64_t deadline_ms);
/* The provider's barrier, or a dissemination barrier on send/recv. */
coll_status_t coll__t_barrier(coll_transport_t *t, uint32_t tag,
                              int64_t deadline_ms);
/* Records the segment size (bytes) the transport moves best, for the CPU
 * ring's pipeline. libcoll's own transports call it right after
 * coll_transport_create. One thread, before the endpoint is used. */
void coll__t_set_segment_bytes(coll_transport_t *t, size_t bytes);
/* The transport's preferred pipeline segment, else COLL_T_SEGMENT_DEFAULT.
 * Any thread. */
size_t coll__t_segment_bytes(const coll_transport_t *t);

/* Records which host each rank is on (world entries, copied; NULL forgets
 * it). COLL_ERR_NO_MEMORY when the copy cannot be made. One thread, before
 * the endpoint is used. */
coll_status_t coll__t_set_hosts(coll_transport_t *t, const int *host_of);

/* Test hook: when set, called with every send posted through
 * coll__t_isend (the peer is a comm rank). Not exported from libcoll.so. */
extern void (*coll__t_send_test_hook)(const coll_transport_t *t, int peer,
                                      size_t len);

/* Records the failure hooks of one of libcoll's own transports. One
 * thread, right after coll_transport_create. */
void coll__t_set_fail_hooks(coll_transport_t *t,
                            void (*fail)(void *ctx, const coll_origin_t *o),
                            int (*origin)(void *ctx, coll_origin_t *o));

/* Aborts the endpoint (idempotent, any thread): the owner's abort. */
void coll__t_abort(coll_transport_t *t);
/* Ends the endpoint because of a failure seen here with status s: like
 * abort, but the peers learn where the failure started (the origin this
 * endpoint already received, else this rank with s). Any thread. */
void coll__t_fail(coll_transport_t *t, coll_status_t s);
/* 1 and *o if the endpoint knows where its failure started. Any thread. */
int coll__t_origin(coll_transport_t *t, coll_origin_t *o);
/* Ends a request that can no longer complete normally (it timed out, or a
 * failure elsewhere leaves it pending): aborts the endpoint, so the request
 * fails at once and peers waiting on this rank learn of it, and reaps it.
 * Keeps this thread's error text and returns `first`, so the caller reports
 * the failure that came first rather than the abort it caused. One
 * thread. */
coll_status_t coll__t_abort_reap(coll_transport_t *t, coll_treq_t req,
                                 coll_status_t first);

#endif
