/* SPDX-License-Identifier: Apache-2.0 */
/* transport.h: the calls the algorithms and the CPU backend make on an
 * endpoint (coll_transport_t, opaque here: endpoint.h). They see only
 * these; never a socket, never a provider's state. */
#ifndef COLL_TRANSPORT_TRANSPORT_H
#define COLL_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "core/desync.h"
#include "core/origin.h"
#include "core/position.h"
#include "transport/common/rounds.h"

/* Longest provider name kept (longer ones are cut). */
#define COLL_TRANSPORT_NAME_MAX 32

/* What a provider tells the CPU backend to tune from (provider.h). Zero:
 * not said. */
typedef struct coll_t_hints {
  size_t seg_bytes;   /* the pipeline segment it moves best; 0: the
                         default (COLL_T_SEGMENT_DEFAULT) */
  size_t seg_crowded; /* the same where this host's ranks outnumber its
                         cores; 0: seg_bytes */
  size_t seg_large;   /* what long blocks' segments may grow to, where the
                         host is not crowded; 0: seg_bytes */
  size_t seg_local;   /* the segment between ranks of this host, where
                         another endpoint carries them (route/); 0: none */
  size_t copy_from;   /* the collectives designed for shared memory read
                         buffers of at least this many bytes straight from
                         their owners (the provider's peer_read); 0: never */
} coll_t_hints_t;

/* The rounds over the transport's shared memory (common/rounds.h), for
 * the collectives designed for it, or NULL where it has none. Any thread;
 * the rounds themselves are one thread's per endpoint. */
coll_rounds_t *coll__t_rounds(const coll_transport_t *t);
/* The provider's hints (provider.h). Any thread. */
const coll_t_hints_t *coll__t_hints(const coll_transport_t *t);
/* Single copy (provider.h, peer_read): the size from which the
 * collectives designed for shared memory read peers' buffers directly, or
 * 0 where the endpoint cannot. Any thread. */
size_t coll__t_copy_from(const coll_transport_t *t);
/* Copies len bytes at `from` in comm rank peer's memory into dst (see
 * provider.h); on a failure, a text naming the peer. Only where
 * coll__t_copy_from is not 0. One thread. */
coll_status_t coll__t_peer_read(coll_transport_t *t, int peer, void *dst,
                                const void *from, size_t len);
/* The provider's name ("tcp", "shm", ...). Any thread. */
const char *coll__t_name(const coll_transport_t *t);
/* 1 once the endpoint was aborted or failed. Any thread. */
int coll__t_aborted(const coll_transport_t *t);
/* Which host each rank is on (route/route.h; world entries), or NULL:
 * every rank on one host. Any thread. */
const int *coll__t_hosts(const coll_transport_t *t);
/* What a transport with shared memory says of the sizes its rounds suit
 * (coll_rounds_t's allreduce_below, others_below, reduce_scatter_below);
 * 0 without shared memory. The CPU backend's tuning reads these, never the
 * fields. Any thread. */
static inline size_t coll__t_shm_allreduce_below(const coll_transport_t *t) {
  const coll_rounds_t *R = coll__t_rounds(t);
  return R != NULL ? R->allreduce_below : 0;
}
static inline size_t coll__t_shm_others_below(const coll_transport_t *t) {
  const coll_rounds_t *R = coll__t_rounds(t);
  return R != NULL ? R->others_below : 0;
}
static inline size_t coll__t_shm_reduce_scatter_below(
    const coll_transport_t *t) {
  const coll_rounds_t *R = coll__t_rounds(t);
  return R != NULL ? R->reduce_scatter_below : 0;
}

/* 1 if a receive from any source can be made on t (its provider, and a
 * route's two, can probe). Any thread. */
int coll__t_can_probe(const coll_transport_t *t);
/* The provider's probe (provider.h): 1 if a message from peer on tag
 * waits to be received, else 0 (also where t cannot probe). Never waits.
 * The thread that posts t's receives. */
int coll__t_probe(coll_transport_t *t, int peer, uint32_t tag);

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
/* The provider's wait on req: at most timeout_ms (< 0: no bound,
 * 0: a look). COLL_ERR_TIMEOUT leaves the request pending; anything else
 * reaped it. One thread per request. */
coll_status_t coll__t_wait_for(coll_transport_t *t, coll_treq_t req,
                               int64_t timeout_ms, size_t *len);
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
/* The transport's preferred pipeline segment (coll_t_hints_t), else
 * COLL_T_SEGMENT_DEFAULT; its crowded one where this host's ranks
 * outnumber `cores` (coll__host_cores): each message then costs a switch
 * between ranks, and fewer, larger ones pay. Any thread. */
size_t coll__t_segment_bytes(const coll_transport_t *t);
size_t coll__t_segment_bytes_for(const coll_transport_t *t, unsigned cores);
/* What segments may grow to on this rank: the large segment, or the
 * crowded one where the host is crowded; never less than
 * coll__t_segment_bytes_for. Any thread. */
size_t coll__t_segment_bytes_max_for(const coll_transport_t *t, unsigned cores);
/* Whether coll__t_segment_bytes_for can answer differently on the ranks of
 * one comm (their hosts, or the cores each host gives, differ): a comm then
 * agrees on one segment at creation. Any thread. */
int coll__t_segment_varies(const coll_transport_t *t);

/* Test hook: when set, called with every send posted through
 * coll__t_isend (the peer is a comm rank), with the endpoint that carries
 * it (a composite's part: route/). Not exported from libcoll.so. */
extern void (*coll__t_send_test_hook)(const coll_transport_t *t, int peer,
                                      size_t len);

/* The owner aborted the comm: this rank leaves the group for good (the
 * survivors' agreement does not wait for it). Any thread; idempotent. */
void coll__t_leave(coll_transport_t *t);
/* Ends this endpoint's part in the old world (pending work fails), agrees
 * with every other rank that shrinks it on who survives (common/
 * shrink_agree.h), and returns this rank's endpoint among the survivors,
 * renumbered in the order of their old ranks, before the absolute
 * deadline. COLL_ERR_NOT_AVAILABLE naming the transport when it cannot
 * shrink; PEER_LOST when the survivors left this rank out; TIMEOUT. The
 * old endpoint stays the caller's to destroy. One thread. */
coll_status_t coll__t_shrink(coll_transport_t *t, int64_t deadline_ms,
                             coll_transport_t **out);
/* Once per endpoint, for a timeout seen here (not one a peer's failure
 * brought): asks the peers where they
 * are, writes this rank's report and hands it to the peers (`tell`). Does
 * nothing for a transport without `ask`. transport_desync.c. Any thread. */
void coll__t_desync(coll_transport_t *t);
/* The comm's position on this endpoint. Any thread. */
coll_pos_t *coll__t_position(coll_transport_t *t);
/* A comm adopts t: its timeout (< 0: none) bounds the desync report's
 * questions and is named in the report. One thread, at the comm's
 * creation, before the endpoint is used. */
void coll__t_adopt(coll_transport_t *t, int64_t timeout_ms);
/* The desync report this endpoint holds: for a failure that started on
 * another rank the one a peer carried here, else its own (it timed out);
 * 1 and the text in buf (n bytes), or 0. Any thread. */
int coll__t_report(coll_transport_t *t, char *buf, size_t n);
/* The sentence of a failure that started at o, as seen here: the origin's
 * text, and for a timeout the desync report after it ("rank 1 timed out in
 * a collective, seen by rank 2: allreduce #4 timed out after 1.0 s: rank 3
 * never entered it ..."). Any thread. */
void coll__t_origin_text(coll_transport_t *t, const coll_origin_t *o, char *buf,
                         size_t n);

/* Aborts the endpoint (idempotent, any thread): the owner's abort. */
void coll__t_abort(coll_transport_t *t);
/* Ends the endpoint because of a failure seen here with status s: like
 * abort, but the peers learn where the failure started (the origin this
 * endpoint already received, else this rank with s). For a timeout, it
 * first asks every peer where it is (within min(1 s, half the comm's
 * timeout)) and leaves the report as this thread's error text; the peers
 * get the report with the failure. A composite (route/) ends both its
 * endpoints, with the same origin. Any thread. */
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
