/* SPDX-License-Identifier: Apache-2.0 */
/* trace.h: the flight recorder. Each comm keeps its last N collectives
 * (sequence number, op, dtype, count, root, start and end, status, the peer
 * a failed one waited on) in a ring, and writes them as JSON when a
 * collective times out, when the comm is aborted, and on SIGUSR1. Only when
 * COLL_TRACE_FILE is set; N is COLL_TRACE_ENTRIES. See
 * docs/flight-recorder.md.
 *
 * Locks: each recorder has its own mutex (a leaf: nothing else is taken
 * under it), held for a few stores per collective, so a dump from another
 * thread (abort, SIGUSR1) reads whole entries. With tracing off a comm has
 * no recorder and the issue path tests one pointer. */
#ifndef COLL_CORE_TRACE_H
#define COLL_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "core/work.h"

typedef struct coll_trace coll_trace_t;

/* A recorder for a comm, registered for SIGUSR1 (whose handler is installed
 * on first use), or NULL when COLL_TRACE_FILE is unset or
 * COLL_TRACE_ENTRIES is 0 (or memory ran out: tracing is best effort, a
 * WARN says so). Holds a reference; one thread. */
coll_trace_t *coll__trace_new(int rank, int world, const char *backend,
                              const char *name);
/* Takes a reference (a pending request keeps its recorder). Any thread. */
void coll__trace_ref(coll_trace_t *t);
/* Drops one; the last unregisters and frees it. Any thread. NULL is fine. */
void coll__trace_release(coll_trace_t *t);

/* Records the start of w; returns its sequence number (from 1). The
 * comm's issuing thread. */
uint64_t coll__trace_begin(coll_trace_t *t, const coll_work_t *w);
/* Records the end of collective seq with status s and, for a failure, the
 * peer it waited on (-1: not known). Only the first end of an entry counts
 * (the executor and the waiter may both report it), and only while the
 * entry is still in the ring. A timeout writes the file. Any thread. */
void coll__trace_end(coll_trace_t *t, uint64_t seq, coll_status_t s, int peer);

/* The longest desync report a recorder keeps (bytes, with the NUL). */
#define COLL_TRACE_DESYNC_MAX 384
/* Keeps the desync report of a timeout (the first one; later ones are
 * dropped), written as "desync" in every dump after it. Any thread. */
void coll__trace_set_desync(coll_trace_t *t, const char *report);

/* Writes the JSON file (COLL_TRACE_FILE as it was when the comm was made,
 * with %r, %p, %c, %% expanded),
 * naming `reason`. Returns 0, or -1 after a WARN naming the path. Any
 * thread; takes the recorder's mutex only to copy the ring. */
int coll__trace_dump(coll_trace_t *t, const char *reason);
/* Dumps every live recorder of the process (what SIGUSR1 does). Returns
 * how many files were written. Any thread. */
int coll__trace_dump_all(const char *reason);

/* ---- the peer a failed wait was on (trace_peer.c) ---------------------- */
/* The transport layer notes which peer each request it posts talks to, and
 * which request a failed wait was on; the CPU backend reads the peer when
 * a collective fails. Thread-local, no locks. */
void coll__trace_note_req(const void *req, int peer);
void coll__trace_note_failed(const void *req);
/* A failed wait on `peer` that had no request (a shared-memory round's
 * flags): counts as the failed wait's peer, as above. */
void coll__trace_note_failed_peer(int peer);
/* The peer of the last failed wait on this thread since the last clear, or
 * -1; clears it. */
int coll__trace_take_peer(void);

/* ---- internals shared by the trace files ------------------------------- */

/* SIGUSR1 (trace_signal.c): registers t (installing the handler and its
 * thread on first use) / unregisters it. */
void coll__trace_register(coll_trace_t *t);
void coll__trace_unregister(coll_trace_t *t);

#endif
