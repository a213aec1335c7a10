/* SPDX-License-Identifier: Apache-2.0 */
/* coll_transport.h: the table a third party implements to carry libcoll
 * over its own fabric, and the calls that plug it in.
 *
 * A program that only uses libcoll's own transports (in-process, TCP,
 * shared memory) needs coll.h alone. A transport provider includes this
 * header, which includes coll.h: the rules of coll.h (statuses, ownership,
 * threads, compatibility) hold here too. The table grows only at the end
 * and is read no further than its `size` says. */
#ifndef COLL_TRANSPORT_H
#define COLL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a comm's failure started, as a version 2 transport carries it
 * between ranks (the fail and origin slots below). The values are stable:
 * never renumbered, only added to. */
typedef enum coll_fail_cause {
  COLL_FAIL_LOST = 1,         /* the process is gone (its link reset, or
                                 closed without goodbye); detail: the errno
                                 the transport saw, 0 for a plain close */
  COLL_FAIL_ABORTED = 2,      /* its owner called coll_abort */
  COLL_FAIL_DESTROYED = 3,    /* its owner destroyed the endpoint */
  COLL_FAIL_PROTOCOL = 4,     /* it sent bytes that break the wire */
  COLL_FAIL_TIMEOUT = 5,      /* its collective ran past the comm's timeout */
  COLL_FAIL_FAILED = 6,       /* another failure; detail: its coll_status_t */
  COLL_FAIL_UNRESPONSIVE = 7, /* silent too long while a call waited on it;
                                 detail: how long, in ms */
} coll_fail_cause_t;

/* Where a failure started: the rank (of the transport's world), the cause
 * (coll_fail_cause_t) and the cause's detail. Plain data: a transport
 * carries it as it likes; libcoll checks what it gets back. */
typedef struct coll_fail_origin {
  int rank;
  int cause;
  uint32_t detail;
} coll_fail_origin_t;

/* The bytes of one rank's answer to "where are you?" (the desync slots
 * below): written by coll_transport_where, carried unchanged, read by
 * libcoll on the rank that asked. */
#define COLL_TRANSPORT_WHERE_BYTES 48

/* The vtable a third party implements to carry libcoll over its own fabric
 * (the in-process and TCP transports are built on it too). Fill it with
 * designated initializers, one table per provider:
 *   static const coll_transport_ops_t my_ops = {
 *       .size = sizeof(coll_transport_ops_t),
 *       .version = COLL_TRANSPORT_OPS_VERSION,
 *       .name = "myfabric",
 *       .isend = my_isend, .irecv = my_irecv, .wait = my_wait,
 *       .abort = my_abort, .destroy = my_destroy};
 * `size` is sizeof(coll_transport_ops_t) as the provider compiled it, so a
 * provider built against an older header keeps working: a slot is used only
 * if `size` says it is there. `version` is the revision of the rules below
 * that the provider follows; coll_transport_create refuses 0 (never set)
 * and revisions newer than the library, and a later libcoll that changes a
 * rule keeps the old one for tables of an older version. `name` shows in
 * logs and errors; it is copied. Mandatory slots: isend, irecv, wait,
 * abort, destroy. Optional: barrier (libcoll builds one on send/recv
 * otherwise), and from version 2 the groups for failure origins, the
 * desync report and shrink. `ctx` is one rank's endpoint state, passed to
 * every slot.
 *
 * The rules (version 1).
 *
 * Matching.
 *  - isend(ctx, peer, tag, buf, len, &req) sends len bytes to rank peer;
 *    irecv(ctx, peer, tag, buf, cap, &req) receives from rank peer into at
 *    most cap bytes. A message matches the oldest receive posted for its
 *    (source, tag); messages from one source on one tag arrive in the
 *    order they were sent.
 *  - Tags are independent: there is no order across tags, and a message
 *    not yet received on one tag must never hold back messages on another
 *    (buffer it, or read past it). libcoll runs point-to-point and
 *    collectives between the same two ranks at once, on different tags.
 *  - A zero-length message (len 0; buf may then be NULL) is a message like
 *    any other: it matches, completes and keeps its place in order.
 *  - libcoll never sends to or receives from its own rank; a transport may
 *    refuse peer == its rank with COLL_ERR_INVALID_ARG (the built-in ones
 *    accept it).
 *  - A send may complete before its receive is posted (buffered) or only
 *    once it is; libcoll relies on neither.
 *  - A message longer than the receive's cap completes the receive with
 *    COLL_ERR_LENGTH_MISMATCH and *len = the length sent. The message is
 *    consumed (the next one on the tag is unaffected) and the send
 *    completes with COLL_OK. Nothing is written past cap, but a prefix of
 *    up to cap bytes may be (a streaming transport learns the length
 *    late): the buffer's contents are unspecified.
 *
 * Posting and waiting.
 *  - isend and irecv never wait for a peer: they post, set *req to a handle
 *    of the transport's choosing and return COLL_OK; `wait` completes it.
 *    On failure nothing is posted and *req is not used. The buffer is the
 *    transport's until the request completed.
 *  - wait(ctx, req, timeout_ms, len): timeout_ms > 0 bounds the wait, 0
 *    polls (checks, may move data, never sleeps), < 0 waits without bound.
 *    COLL_ERR_TIMEOUT leaves the request pending and *len untouched; any
 *    other status completes and frees it. On COLL_OK *len is the bytes that
 *    arrived (receive) or the bytes sent, its len (send); on another
 *    failure it is unspecified. libcoll always passes a valid len (the
 *    built-in transports also accept NULL).
 *  - Progress: a transport need not have a thread of its own; it may move
 *    data only inside its slots. But while any wait of an endpoint runs,
 *    every pending request of that endpoint must move, not only the one
 *    waited for: libcoll waits for a receive while its own send to that
 *    peer is still pending, and two ranks doing so wait for each other's
 *    sends. A request nobody waits for may stall until some wait runs.
 *  - Order of waits: libcoll waits requests in any order, not the order it
 *    posted them, and waits each until it completed (one wait that returns
 *    a status other than COLL_ERR_TIMEOUT) before destroy. After a
 *    COLL_ERR_TIMEOUT it either waits again or calls abort and then waits
 *    again, which must return at once.
 *
 * Failures.
 *  - Every slot that fails records a sentence with coll_set_last_error() on
 *    the thread that called the slot, before it returns the status:
 *    libcoll reads coll_last_error() on that thread as soon as the slot
 *    returns. The text is thread-local, so text recorded on a transport's
 *    own threads is never seen: a failure found in the background is kept
 *    with its request and recorded by the wait that reports it.
 *  - Statuses: isend/irecv return INVALID_ARG, NO_MEMORY, ABORTED,
 *    PEER_LOST, PROTOCOL or SYSTEM; wait returns those, TIMEOUT, and
 *    LENGTH_MISMATCH. TIMEOUT only means "not yet" (at the comm's deadline
 *    libcoll aborts the transport); a user's receive that gets
 *    LENGTH_MISMATCH leaves the comm working; any other failure ends the
 *    comm, and libcoll aborts the transport.
 *  - A lost peer (its process died, its link broke, it destroyed its
 *    endpoint) is COLL_ERR_PEER_LOST with a text naming the rank, from
 *    every pending and later request that involves it, promptly rather
 *    than at the timeout. Failing other peers' requests too is allowed.
 *    COLL_ERR_PROTOCOL is a peer that sent something malformed.
 *  - abort(ctx) must not block on peers and may run more than once. Every
 *    pending request then completes at once with COLL_ERR_ABORTED, and
 *    later isend/irecv fail at once with COLL_ERR_ABORTED, posting nothing.
 *    Once abort returns, the transport never touches a caller's buffer
 *    again. Peers should see this rank as lost. (libcoll's own transports
 *    tell them instead where the failure started; see "Which rank
 *    failed" in coll.h.)
 *  - destroy(ctx) frees everything. It may come without abort; it should
 *    tell the peers this rank left (they report COLL_ERR_PEER_LOST) but
 *    must not wait long for them.
 *
 * Threads.
 *  - isend, irecv and wait may be called from two threads of one endpoint
 *    at once, on different requests (a comm's worker running a collective
 *    while the user's thread runs point-to-point).
 *  - A request may be waited on another thread than the one that posted
 *    it, but never by two threads at once.
 *  - abort: any thread, at any time before destroy, also while other
 *    threads are inside isend, irecv or wait. destroy: once, from one
 *    thread, after every request was waited, never concurrently with
 *    another slot.
 *  - barrier(ctx, timeout_ms), if present: returns once every rank of the
 *    transport called it, with wait's meaning of timeout_ms and statuses;
 *    one thread at a time per endpoint, possibly while the other thread
 *    has point-to-point requests pending.
 *
 * Version 2. The rules above hold; a table of version 2 may also fill
 * three groups of optional slots, each all set or all NULL (a group half
 * set is refused). With them a third party's transport gets what
 * libcoll's own transports have: failures named by the rank where they
 * started, the desync report, and coll_comm_shrink. A group left NULL is a
 * capability the transport lacks, as in version 1.
 *
 * Failure origins (fail, origin). "Which rank failed" (coll.h) then holds
 * on this transport.
 *  - fail(ctx, o): libcoll calls it instead of abort when the endpoint
 *    must end for a failure that started at o (o->rank may be this rank:
 *    its own timeout, its owner's coll_abort; or a peer, as origin said).
 *    It does everything abort does and, before it closes anything, tells
 *    every peer o, except that an origin the endpoint already heard of
 *    from a peer wins over o (forward the first origin, never "me"). A
 *    peer that hears of an origin ends its own pending and later requests
 *    as abort would, with the status that origin means (LOST, DESTROYED,
 *    UNRESPONSIVE: PEER_LOST; ABORTED and TIMEOUT: ABORTED; PROTOCOL:
 *    PROTOCOL; FAILED: detail) and a text; libcoll writes the user's
 *    sentence from origin, not from that text. Same threads and blocking
 *    as abort: any thread, never waits on peers, may run more than once
 *    (the first origin sticks).
 *  - origin(ctx, &o): returns 1 and fills o with the origin this endpoint
 *    failed for, else with the first one it heard of from a peer; a peer
 *    it found lost itself (its link reset or closed without goodbye) is
 *    {peer, COLL_FAIL_LOST, errno or 0}, a peer that destroyed its
 *    endpoint {peer, COLL_FAIL_DESTROYED, 0}. Returns 0 when it knows of
 *    none. Any thread, never blocks, never fails. libcoll checks o: an
 *    origin with a rank outside the world or an unknown cause is ignored.
 *
 * The desync report (bind, ask, tell, heard). "A timeout says who is
 * missing" (coll.h) then holds on this transport.
 *  - bind(ctx, t): libcoll hands the endpoint its own handle, once, on the
 *    thread that made it, before coll_transport_create (or a shrink) hands
 *    the handle on; the endpoint keeps it to answer peers. Never fails.
 *  - A peer's question "where are you?" is answered from the transport's
 *    own progress (a thread of its own, typically), whatever the comm's
 *    threads are doing (in user code, blocked in another call): with the
 *    COLL_TRANSPORT_WHERE_BYTES that coll_transport_where(t) writes, sent
 *    back unchanged.
 *  - ask(ctx, budget_ms, where, answered): asks every peer where it is and
 *    waits at most budget_ms (> 0) for the answers; for each peer r that
 *    answered in time it copies the answer's bytes to where[r] and sets
 *    answered[r] = 1 (both arrays have world entries, zeroed; leave this
 *    rank's own). Returns when every peer answered or at budget_ms,
 *    whichever comes first; a lost peer is one that did not answer. Called
 *    by the thread whose wait timed out, before libcoll fails the
 *    endpoint; the endpoint is still open.
 *  - tell(ctx, report): hands this rank's report (a NUL-terminated line of
 *    printable text, shorter than 384 bytes) to every peer, to arrive no
 *    later than the fail that follows it; never waits on peers.
 *  - heard(ctx, buf, n): copies the first report a peer told this endpoint
 *    into buf (at most n bytes, NUL-terminated) and returns 1, else 0. Any
 *    thread, never blocks. libcoll checks the text.
 *
 * Shrink (link_send, link_recv, shrink, leave). coll_comm_shrink then works
 * on this transport: libcoll runs the survivors' agreement over the links
 * and the transport makes the survivors' endpoints.
 *  - link_send(ctx, peer, msg, len, timeout_ms) and link_recv(ctx, peer,
 *    buf, cap, &len, timeout_ms): reliable, ordered links for short
 *    messages (at most a few hundred bytes per rank of the world) to every
 *    other rank, that keep working after fail or abort ended the
 *    endpoint's requests. link_recv returns COLL_ERR_PEER_LOST once the
 *    peer is gone (its process died, it destroyed its endpoint, or its
 *    owner aborted: see leave), after every message it sent before that
 *    was received, never for a peer that is only slow; COLL_ERR_TIMEOUT
 *    after timeout_ms (< 0: no bound); a message longer than cap is
 *    COLL_ERR_PROTOCOL. link_send may complete before the peer receives.
 *    Both on the one thread that runs the shrink; other statuses also
 *    count the peer as gone. Text as for every slot.
 *  - shrink(ctx, members, n, new_rank, timeout_ms, &new_ctx): after the
 *    agreement, on every survivor: members[0..n) are the survivors' old
 *    ranks in order, this rank is members[new_rank]. It makes this rank's
 *    endpoint of the survivors' world (n ranks, numbered by position in
 *    members) and stores its state in *new_ctx, which libcoll then drives
 *    with this same table, as a new endpoint; it may wait for the other
 *    survivors, at most timeout_ms. On failure it records a text and
 *    *new_ctx is not used. The old endpoint was already failed (fail, or
 *    abort) and is destroyed later by its owner, possibly before the other
 *    survivors' new endpoints are made: the new world must not depend on
 *    the old endpoint staying alive.
 *  - leave(ctx): this rank's owner aborted its comm: the others' links
 *    must report it gone (PEER_LOST) so that their agreement does not wait
 *    for it. Any thread, may run more than once, never waits on peers.
 *
 * libcoll judges what comes back from a peer through these slots (an
 * origin, a where, a report) as it judges bytes off a wire: what is not
 * sane is ignored, never trusted. */
typedef struct coll_transport_ops {
  size_t size;
  uint32_t version; /* COLL_TRANSPORT_OPS_VERSION the provider was built for */
  const char *name; /* "tcp", "inproc", ...; copied by create, may be NULL */
  coll_status_t (*isend)(void *ctx, int peer, uint32_t tag, const void *buf,
                         size_t len, void **req);
  coll_status_t (*irecv)(void *ctx, int peer, uint32_t tag, void *buf,
                         size_t cap, void **req);
  coll_status_t (*wait)(void *ctx, void *req, int64_t timeout_ms, size_t *len);
  void (*abort)(void *ctx);
  void (*destroy)(void *ctx);
  /* optional (check size): a barrier across all ranks of the transport */
  coll_status_t (*barrier)(void *ctx, int64_t timeout_ms);
  /* Version 2 (read only from a table of version 2 or later; see "Version
   * 2" above). Each group is all set or all NULL. */
  /* failure origins */
  void (*fail)(void *ctx, const coll_fail_origin_t *o);
  int (*origin)(void *ctx, coll_fail_origin_t *o);
  /* the desync report */
  void (*bind)(void *ctx, coll_transport_t *t);
  void (*ask)(void *ctx, int64_t budget_ms,
              unsigned char (*where)[COLL_TRANSPORT_WHERE_BYTES],
              unsigned char *answered);
  void (*tell)(void *ctx, const char *report);
  int (*heard)(void *ctx, char *buf, size_t n);
  /* shrink */
  coll_status_t (*link_send)(void *ctx, int peer, const void *msg, size_t len,
                             int64_t timeout_ms);
  coll_status_t (*link_recv)(void *ctx, int peer, void *buf, size_t cap,
                             size_t *len, int64_t timeout_ms);
  coll_status_t (*shrink)(void *ctx, const int *members, int n, int new_rank,
                          int64_t timeout_ms, void **new_ctx);
  void (*leave)(void *ctx);
} coll_transport_ops_t;
#define COLL_TRANSPORT_OPS_VERSION 2
/* The size of a version 1 table (its slots end with barrier): a provider
 * that follows the version 1 rules may set size to this, or to the size it
 * was compiled with; either way libcoll reads none of the version 2 slots
 * of a table whose version is 1. */
#define COLL_TRANSPORT_OPS_V1_SIZE           \
  (offsetof(coll_transport_ops_t, barrier) + \
   sizeof(((coll_transport_ops_t *)0)->barrier))

/* Wraps a third party's vtable into a transport endpoint for `rank` of
 * `world`. The ops table and its name are copied. `ctx` becomes the
 * transport's only when this returns COLL_OK (ops->destroy(ctx) runs when
 * the transport is destroyed); on any failure no slot is called and ctx
 * stays the caller's. A table of version 1 is read no further than its
 * barrier slot, whatever its size. Refuses (COLL_ERR_INVALID_ARG) a NULL
 * table, a version outside 1..COLL_TRANSPORT_OPS_VERSION, a size too small
 * for the mandatory slots or (version 2) for the version 2 slots, a
 * missing mandatory slot, a version 2 group half set (fail without origin,
 * ask without tell, ...), a NULL out, a rank outside [0, world). On
 * COLL_OK a version 2 table's bind slot has run. Never blocks. Any
 * thread. */
COLL_API coll_status_t coll_transport_create(const coll_transport_ops_t *ops,
                                             void *ctx, int rank, int world,
                                             coll_transport_t **out);
/* For a version 2 transport's answer to a peer's "where are you?": writes
 * into out what the comm over t is doing now (the collective it is in or
 * last finished, the point-to-point call it waits in), as bytes the asking
 * rank's libcoll reads. t is the handle the provider's bind slot got. Never
 * blocks (a few atomic loads); any thread, also while the comm's threads
 * are inside calls, until t is destroyed. */
COLL_API void coll_transport_where(
    const coll_transport_t *t, unsigned char out[COLL_TRANSPORT_WHERE_BYTES]);

#ifdef __cplusplus
}
#endif
#endif /* COLL_TRANSPORT_H */
