/* SPDX-License-Identifier: Apache-2.0 */
/* provider.h: what a transport must do to be first class: the one table
 * every provider fills (libcoll's own, and a third party's table adapted
 * into it by coll_transport_create), and the call that makes an endpoint
 * of it.
 *
 * A provider is a table of slots over its own endpoint state (`ctx`, one
 * rank's endpoint). The mandatory slots are the public ones: isend, irecv,
 * wait, abort and destroy, with exactly the rules coll_transport.h states
 * for coll_transport_ops_t (matching by (peer, tag) in order, posting never
 * waits, every wait moves every pending request, texts recorded on the
 * calling thread, abort from any thread). The optional slots below give a
 * comm what a bare table cannot: the rank where a failure started, the
 * report of who is missing when a collective times out, shrinking after a
 * failure, waits that move another endpoint's requests, and memory every
 * rank maps. A slot left NULL is a capability the endpoint lacks, and
 * libcoll says so where it matters (NOT_AVAILABLE for shrink; "rank 0
 * lost" where the origin was rank 3).
 *
 * What a provider composes rather than writes (src/transport/common/):
 * matching by (peer, tag), the waiter, the rounds over shared memory,
 * liveness (heartbeat settings, the origin and desync responders), and
 * the survivors' agreement of a shrink. A provider keeps only its memory,
 * its wire and its setup.
 *
 * Fill a table with designated initializers, once per provider:
 *   static const coll_provider_t my_provider = {
 *       .size = sizeof(coll_provider_t),
 *       .version = COLL_PROVIDER_VERSION,
 *       .name = "myfabric",
 *       .isend = ..., .irecv = ..., .wait = ..., .abort = ...,
 *       .destroy = ..., .fail = ..., .origin = ...,
 *       .hints = {.seg_bytes = 256u << 10}};
 * and make each endpoint with coll__t_create. */
#ifndef COLL_TRANSPORT_PROVIDER_H
#define COLL_TRANSPORT_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "coll_transport.h"
#include "core/origin.h"
#include "core/position.h"
#include "transport/transport.h"

/* The revision of the table below; a table of another one is refused. */
#define COLL_PROVIDER_VERSION 1

typedef struct coll_provider {
  size_t size;      /* sizeof(coll_provider_t) */
  uint32_t version; /* COLL_PROVIDER_VERSION */
  const char *name; /* "tcp", "shm", ...; copied */

  /* Mandatory: the public slots, with coll_transport.h's rules. */
  coll_status_t (*isend)(void *ctx, int peer, uint32_t tag, const void *buf,
                         size_t len, void **req);
  coll_status_t (*irecv)(void *ctx, int peer, uint32_t tag, void *buf,
                         size_t cap, void **req);
  coll_status_t (*wait)(void *ctx, void *req, int64_t timeout_ms, size_t *len);
  void (*abort)(void *ctx);
  void (*destroy)(void *ctx);
  /* Optional, coll_transport.h's rules; NULL: a dissemination barrier on
   * messages. */
  coll_status_t (*barrier)(void *ctx, int64_t timeout_ms);

  /* Failure origins. fail(ctx, o) ends the endpoint as abort does, for a
   * failure that started at o, and before it closes anything tells every
   * peer where the failure started: the origin this endpoint already
   * heard of wins over o, so every rank names the rank where the failure
   * began. origin(ctx, &o) returns 1 with the origin the endpoint failed
   * for, or heard of from a peer (a peer's goodbye, its header, a closed
   * peer it met), else 0; it never blocks. A lost peer the endpoint found
   * itself is {peer, COLL_CAUSE_LOST}. A request a failure ends completes
   * with coll__origin_req_status(o) (never TIMEOUT), with a text from
   * coll__origin_text. Both any thread. NULL (both): abort serves, and a
   * rank may name the rank it heard of a failure from. */
  void (*fail)(void *ctx, const coll_origin_t *o);
  int (*origin)(void *ctx, coll_origin_t *o);

  /* The desync report (transport_desync.c). ask(ctx, budget_ms, out,
   * answered) asks every peer where its comm is and, within budget_ms,
   * fills out[r] and answered[r] = 1 for each one that said (its own
   * slot is filled by libcoll); a peer answers from its own progress,
   * whatever its comm's threads are doing, with what coll__t_position
   * says of its endpoint. tell(ctx, report) hands this rank's report to
   * the peers, to arrive no later than the failure that follows;
   * heard(ctx, buf, n) copies a report a peer carried here and returns 1,
   * else 0. Any thread. NULL (all three): no report. */
  void (*ask)(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
              unsigned char *answered);
  void (*tell)(void *ctx, const char *report);
  int (*heard)(void *ctx, char *buf, size_t n);
  /* Where the comm over this endpoint keeps its position (core/position.h),
   * when a peer must read it without this rank's threads (memory every
   * rank maps); NULL: in the endpoint. Called once, at creation. */
  coll_pos_t *(*position)(void *ctx);

  /* Shrink (coll__t_shrink). shrink(ctx, deadline_ms, &out) ends this
   * rank's part in the old world, agrees with every other rank that
   * shrinks it on who survives (common/shrink_agree.h) and returns this
   * rank's endpoint among them; leave(ctx) says the owner aborted, so the
   * others' agreements must not wait for this rank (any thread,
   * idempotent). NULL: the endpoint cannot shrink (NOT_AVAILABLE). */
  coll_status_t (*shrink)(void *ctx, int64_t deadline_ms,
                          coll_transport_t **out);
  void (*leave)(void *ctx);

  /* Keeps this endpoint's pending requests moving while the caller's
   * thread waits on another endpoint of its comm (route/): one pass
   * without waiting where the endpoint moves only inside its slots
   * (shared memory), else a hand-off to its own thread (TCP). NULL: they
   * move on their own. Any thread. */
  void (*kick)(void *ctx);

  /* Receives from any source (cpu/p2p.c): 1 if a message from `peer` on
   * `tag` arrived, in part or whole, that no posted receive took, else 0.
   * It may move data (read what the network holds) but never waits. A
   * receive posted next for (peer, tag) takes the oldest such message.
   * The thread that posts the endpoint's receives. NULL: a receive from
   * any source is UNSUPPORTED on the endpoint. */
  int (*probe)(void *ctx, int peer, uint32_t tag);

  /* The rounds over memory every rank maps, for the collectives designed
   * for it (common/rounds.h: the provider brings the memory, its sleep,
   * its wake and who is gone), or NULL where this endpoint has none.
   * Called once, at creation. NULL: none. */
  coll_rounds_t *(*rounds)(void *ctx);

  /* Single copy between the processes of one host: copies len bytes at
   * `from`, an address in `peer`'s own memory that the peer published (a
   * note of the rounds), into dst, in one copy through the kernel (cross-
   * memory attach), where the rounds' slots copy twice. The peer's memory
   * is only read, never written: a peer that returned early (an abort)
   * leaves this rank with bytes it then never uses, never a fault. Fails
   * with PEER_LOST naming the peer when its process is gone, with the
   * peer's own failure when it closed, with a text. The collectives
   * designed for shared memory use it for buffers of at least
   * hints.copy_from bytes. NULL: none (the endpoint's probe at creation
   * found that this kernel refuses it). One thread per endpoint. */
  coll_status_t (*peer_read)(void *ctx, int peer, void *dst, const void *from,
                             size_t len);

  /* What the CPU backend tunes from. Zero: not said. */
  coll_t_hints_t hints;
} coll_provider_t;

/* Makes the endpoint for `rank` of `world` over provider p (copied) and
 * ctx, which becomes the endpoint's only on COLL_OK (p->destroy(ctx) runs
 * when it is destroyed); on a failure nothing of p is called and ctx stays
 * the caller's. COLL_ERR_INTERNAL for a table of another version or
 * without a mandatory slot, INVALID_ARG for rank or world, NO_MEMORY.
 * Never blocks. Any thread. */
coll_status_t coll__t_create(const coll_provider_t *p, void *ctx, int rank,
                             int world, coll_transport_t **out);

#endif
