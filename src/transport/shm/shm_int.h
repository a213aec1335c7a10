/* SPDX-License-Identifier: Apache-2.0 */
/* shm_int.h: the shared-memory transport's layout and endpoint state,
 * shared by its files: shm_layout.c (the region), shm_setup.c (meeting
 * the peers), shm_ops.c (the slots), shm_progress.c (moving cells),
 * shm_wait.c (spinning, sleeping, liveness).
 *
 * Memory: every rank owns one memfd region holding its header and one
 * ring per peer, carrying that peer's messages to this rank. Every rank
 * maps every peer's region: it writes into the ring it owns in a peer's
 * region (as the sender) and reads the peer's header (to ring its
 * doorbell). A ring is a single-producer single-consumer queue of
 * fixed-size cells; a message takes one cell or more (a pipeline of
 * chunks), its first cell saying its tag and length. The producer
 * publishes `tail` with a release store, the consumer `head`; each lives on
 * a cache line of its own so the two sides never share one. */
#ifndef COLL_TRANSPORT_SHM_INT_H
#define COLL_TRANSPORT_SHM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coll.h"
#include "core/desync.h"
#include "core/origin.h"
#include "core/position.h"
#include "transport/common/liveness.h"
#include "transport/common/match.h"
#include "transport/common/silence.h"
#include "transport/transport.h"

#define SHM_CACHE_LINE 64
#define SHM_MAGIC 0x314d4853434c4f43ull /* "COLCSHM1" */
#define SHM_VERSION 6u

/* Payload of one cell. 16 KiB: a 4 KiB message (the latency case) is one
 * cell, and big messages move in copies large enough to run near memcpy
 * speed, while a ring of them (512 KiB) still fits in a last-level cache.
 * Not tuned by measurement yet (the only runs so far were on a loaded
 * 2-core machine): compare 8, 16 and 64 KiB on a quiet one. */
#define SHM_CELL_DATA (16u * 1024u)
/* Cells per ring: 32 (512 KiB of payload per ordered pair), fewer in big
 * worlds so a rank's region stays near 16 MiB; never fewer than 4. */
#define SHM_RING_CELLS_MAX 32u
#define SHM_RING_CELLS_MIN 4u
#define SHM_REGION_BUDGET (16u * 1024u * 1024u)

/* The ring's preferred pipeline segment for the CPU ring algorithms: half a
 * ring, so one segment is being copied out while the next goes in.
 *
 * Kept after measuring 64 KiB, 256 KiB and 1 MiB (2 ranks, coll-perf,
 * interleaved, medians of 3-4): the per-run mode described at
 * COLL_DEFAULT_SHM_SPIN_US (core/env.h) decides the result. Within the
 * fast mode, in one sitting, 1 MiB segments took 1 MiB in 112-118 us
 * against 110-130 us and 16 MiB in 2.56-2.64 ms against 2.59-2.91 ms: too
 * close to call. 64 KiB segments left 1 MiB at 1.88 GB/s against 1.96. */
#define SHM_SEGMENT_BYTES (256u * 1024u)

/* How a waiter spins (common/waiter.h): looks between two sched_yield
 * calls. On a crowded host, one with more than SHM_CROWDED_RANKS_PER_CORE
 * of the endpoint's ranks per core (its cpuset's), it yields at every look
 * and spins only SHM_SPIN_CROWDED_US unless COLL_SHM_SPIN_US is set: there
 * a spinning waiter holds the core the peer it waits for needs. Two ranks
 * per core still spin the default: 4 ranks on 2 cores were measured with
 * 50 us ahead of 200 (core/env.h). */
#define SHM_SPINS_PER_YIELD 64
#define SHM_CROWDED_RANKS_PER_CORE 2u
#define SHM_SPIN_CROWDED_US 5

/* Bytes of one slot of the shared-memory collectives (shm_coll.c); every
 * rank's region holds four: a slot and a result area for each of two
 * buffers. A round of a collective moves at most this much per rank, so
 * one round's inputs stay within the second-level cache while they are
 * reduced. See algo/allreduce_shm.c for how it was chosen. */
#define SHM_COLL_SLOT (256u * 1024u)

typedef struct shm_cell_hdr {
  uint32_t tag;
  uint32_t chunk; /* payload bytes in this cell, <= SHM_CELL_DATA */
  uint64_t msg_len;
  uint32_t first; /* 1 on a message's first cell */
  uint8_t pad_[SHM_CACHE_LINE - 20];
} shm_cell_hdr_t;

typedef struct shm_ring_ctl {
  _Alignas(SHM_CACHE_LINE) _Atomic uint64_t tail; /* written by the sender */
  _Alignas(SHM_CACHE_LINE) _Atomic uint64_t head; /* written by the owner */
} shm_ring_ctl_t;

/* The region's first bytes. `sleeping` counts this rank's threads that
 * announced they are about to sleep: a peer that moves anything this rank
 * may wait on rings the doorbell only then, so the fast path makes no
 * system call. */
typedef struct shm_hdr {
  uint64_t magic;
  uint32_t version, world, rank, cells;
  /* Stored (release) once the fields above are written; a peer reads it
   * (acquire) before them. The memfd reached the peer over a socket, which
   * already orders them, but a thread sanitizer watching ranks that are
   * threads of one process sees only this. */
  atomic_int ready;
  _Alignas(SHM_CACHE_LINE) atomic_int sleeping;
  /* 1 once this rank aborted, failed or left. Before it, the origin of
   * that failure (core/origin.h: where it started) is written and
   * `origin_set` stored, so peers name the rank where it began. A rank
   * that dies leaves neither: its peers see its sockets hang up. */
  _Alignas(SHM_CACHE_LINE) atomic_int gone;
  atomic_int origin_set;
  int32_t origin_rank, origin_cause;
  uint32_t origin_detail;
  /* Where this rank's comm is (core/position.h), read by a peer whose
   * collective timed out; and the desync report this rank wrote when its
   * own timed out (published with report_ready), read by its peers. */
  _Alignas(SHM_CACHE_LINE) coll_pos_t pos;
  coll_report_cell_t report;
  /* Counted up by this rank's liveness thread (shm_heartbeat.c) every
   * tick of the heartbeat timeout (common/silence.h): a peer that sees it
   * stand still for the whole timeout while it waits on this rank names it
   * unresponsive. */
  _Alignas(SHM_CACHE_LINE) _Atomic uint64_t beat;
  /* This rank's control of the rounds (common/rounds.h, shm_coll.c): its
   * progress flags and notes, written by this rank alone. */
  _Alignas(SHM_CACHE_LINE) coll_round_ctl_t round_ctl;
  /* "Are you there?": a peer asking where this rank is counts `ask` up
   * and wakes the liveness thread (a futex on it), which copies it to
   * `answer`; a stopped process does not, and is named as one that did
   * not answer rather than by the position its memory still holds. */
  _Alignas(SHM_CACHE_LINE) _Atomic uint32_t ask;
  _Atomic uint32_t answer;
} shm_hdr_t;

/* Sizes of a region for `world` ranks: every rank computes the same. */
typedef struct shm_layout {
  uint32_t cells;
  size_t cell_bytes; /* header + payload */
  size_t ring_bytes; /* control + cells */
  size_t coll_off;   /* where the collectives' slots begin */
  size_t region_bytes;
} shm_layout_t;

void coll__shm_layout(int world, shm_layout_t *l);
/* The ring carrying messages from rank `from` to the owner of `region`. */
shm_ring_ctl_t *coll__shm_ring(void *region, const shm_layout_t *l, int from);
shm_cell_hdr_t *coll__shm_cell(shm_ring_ctl_t *ring, const shm_layout_t *l,
                               uint64_t index);

enum { SHM_SEND = 1, SHM_RECV = 2 };

typedef struct shm_req shm_req_t;
typedef struct shm_unx shm_unx_t;

struct shm_req {
  shm_req_t *next;     /* send: in its peer's send queue */
  coll_match_item_t m; /* receive: in its peer's posted receives */
  int kind;
  int peer;
  uint32_t tag;
  const uint8_t *sbuf; /* send */
  uint8_t *rbuf;       /* receive */
  size_t len;          /* send: its length; receive: its capacity */
  size_t off;          /* send: bytes in the ring */
  size_t got;          /* receive: the matched message's length */
  int done;            /* under the endpoint lock */
  int closed_here;     /* ended by this endpoint's own close */
  coll_status_t status;
};

/* A message that arrived before its receive was posted (or is arriving:
 * `off` < `len`). `recv` is a receive that matched it while it was still
 * arriving. */
struct shm_unx {
  coll_match_item_t m; /* in its peer's early messages, keyed by its tag */
  size_t len, off;
  uint8_t *data;
  shm_req_t *recv;
};

/* What arrives from one peer: the message being received (into a
 * receive or an unexpected buffer), unmatched messages in order, receives
 * posted and not yet matched. */
typedef struct shm_rx {
  int active;
  uint32_t tag;
  size_t len, off;
  shm_req_t *recv;       /* the target, or */
  shm_unx_t *unx;        /* this one */
  coll_match_q_t early;  /* shm_unx_t, oldest first */
  coll_match_q_t posted; /* shm_req_t, in posting order */
} shm_rx_t;

static inline shm_unx_t *coll__shm_unx_of(const coll_match_item_t *it) {
  return COLL_MATCH_OWNER(it, shm_unx_t, m);
}
static inline shm_req_t *coll__shm_req_of(const coll_match_item_t *it) {
  return COLL_MATCH_OWNER(it, shm_req_t, m);
}

typedef struct shm_peer {
  void *region;       /* the peer's region, mapped */
  int sock;           /* connected Unix socket: its hangup is the peer's end */
  int bell;           /* the peer's doorbell (eventfd) */
  shm_ring_ctl_t *tx; /* my ring in the peer's region */
  shm_ring_ctl_t *rx; /* its ring in mine */
  uint64_t tx_head;   /* last head seen on tx (cached) */
  shm_req_t *sq_head, *sq_tail; /* sends in order; the head is streaming */
  shm_rx_t in;
  pid_t pid; /* its process (SO_PEERCRED), for single copies */
  int lost;  /* 1: hung up (what is in its ring is still read), 2: failed */
  coll_status_t lost_status;
  coll_origin_t lost_origin; /* where the failure that lost it started */
  char why[200];
} shm_peer_t;

typedef struct shm_ep {
  int rank, world; /* member index and count: what the layout counts */
  /* A host endpoint's members as comm ranks (shm.h), a copy; NULL: member
   * i is rank i. name_world is the comm's size (world when names is NULL).
   * Everything the endpoint shows (its rank, peers, texts, origins) is a
   * name; everything inside it (rings, peers[], requests) an index. */
  int *names;
  int name_world;
  shm_layout_t lay;
  void *region; /* mine */
  shm_hdr_t *hdr;
  int bell;           /* my doorbell (eventfd) */
  shm_peer_t *peers;  /* world entries; mine unused */
  pthread_mutex_t mu; /* the peers' queues and rings, leader */
  /* One waiting thread at a time sleeps in the kernel (the leader, on the
   * doorbell and the peers' sockets); the others wait on `cv`, which is
   * broadcast whenever a pass moved anything and when the leader leaves,
   * so no thread misses a completion another one found. */
  pthread_cond_t cv;
  int leader;
  /* The first failure origin heard of from a peer, and the one this
   * endpoint published when it closed (abort, a failure, destroy; kept
   * before `closed` is set, under mu). A peer that only left (destroyed
   * its comm) is no failure: it is kept apart in `left`, so that a failure
   * heard after it, or this rank's own goodbye, is what the peers hear. */
  coll_origins_t origins;
  coll_origin_cell_t left;
  int closed;
  coll_status_t close_status; /* what the close failed requests with */
  atomic_int aborted;
  /* How a waiter spins before it sleeps (common/waiter.h): this long,
   * yielding the core every per_yield looks (shm_setup.c: crowded). */
  int64_t spin_ns;
  unsigned per_yield;
  /* Liveness (shm_heartbeat.c): the heartbeat timeout (0: none), the
   * thread that answers peers' questions and, with heartbeats, beats and
   * watches, its watch (common/silence.h) and what it last saw of each
   * peer (its thread only). A wait on the rounds' flags (rounds.waiters)
   * is watched like a pending request. */
  int64_t hb_ms;
  pthread_t hb_thread;
  int hb_running;
  atomic_int hb_stop;
  coll_silence_t hb_watch;
  uint64_t *hb_seen;
  int64_t *hb_at;
  /* The rounds of the collectives designed for shared memory (shm_coll.c)
   * over every rank's control and areas, as mapped here (NULL: a host
   * endpoint inside a larger comm, which has none). */
  coll_rounds_t rounds;
  coll_round_ctl_t **round_ctl;
  char **round_mem;
  /* Single copy (shm_cma.c): the word of private memory peers read back
   * at setup, whether this rank could read every peer's (cma_mine; why
   * not in cma_why), and whether every rank could (cma): only then is the
   * provider's peer_read set. */
  volatile uint64_t probe;
  int cma_mine, cma;
  uint64_t copy_from; /* this rank's threshold; once agreed, every rank's */
  char cma_why[160];
} shm_ep_t;

/* The comm rank of member p: what texts, origins and callers see. */
static inline int coll__shm_name(const shm_ep_t *ep, int p) {
  return ep->names != NULL ? ep->names[p] : p;
}

/* The member whose comm rank is r, or -1 when r is no member (names
 * ascend: a binary search). */
static inline int coll__shm_member(const shm_ep_t *ep, int r) {
  int lo = 0, hi = ep->world - 1;
  if (ep->names == NULL) return r >= 0 && r < ep->world ? r : -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (ep->names[mid] == r) return mid;
    if (ep->names[mid] < r)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* shm_progress.c (all under ep->mu) --------------------------------------- */

/* Moves every send and receive as far as the rings allow, fails what a
 * lost peer leaves pending; returns 1 if anything moved or completed. */
int coll__shm_progress(shm_ep_t *ep);
/* Peer p is gone (hangup or its header says so): records where its
 * failure started, drains its ring, fails its requests and, unless it
 * left on its own (destroyed its comm), closes the endpoint with that
 * origin, as TCP's fails: every wait of this rank on any peer ends, and
 * its peers hear of it. */
void coll__shm_peer_lost(shm_ep_t *ep, int p);
/* Records o as the first failure origin this endpoint heard of (a peer
 * that only left is replaced by a failure heard after it). */
void coll__shm_note_origin(shm_ep_t *ep, const coll_origin_t *o);
/* Where this endpoint's failure started, once it closed. */
static inline const coll_origin_t *coll__shm_closed_origin(const shm_ep_t *ep) {
  return &ep->origins.own.o;
}
/* Completes r with status s (under the lock). */
void coll__shm_complete(shm_req_t *r, coll_status_t s);
/* Fails every pending request with s (this endpoint's close). */
void coll__shm_fail_all(shm_ep_t *ep, coll_status_t s);
/* Closes the endpoint for a failure that started at o (this rank's abort,
 * destroy, or a failure seen here): publishes the origin it heard of first,
 * else o, to its peers, fails every pending request with ABORTED (this
 * endpoint's own close ended them) and hangs up. Idempotent. Takes
 * ep->mu. */
void coll__shm_close(shm_ep_t *ep, const coll_origin_t *o);
/* The same under ep->mu, the requests failing with s: a peer's loss
 * closes it with the status its origin calls for, as a request on that
 * peer fails (shm_ops.c). */
void coll__shm_close_locked(shm_ep_t *ep, const coll_origin_t *o,
                            coll_status_t s);
/* Why this endpoint's own requests ended, after its close. Under ep->mu. */
void coll__shm_closed_text(const shm_ep_t *ep, char *buf, size_t n);
/* Rings peer p's doorbell if one of its threads sleeps. */
void coll__shm_ring_bell(shm_ep_t *ep, int p);
/* Matches a posted receive against the messages already arrived from its
 * peer, or queues it. */
void coll__shm_post_recv(shm_ep_t *ep, shm_req_t *r);

/* The probe hook (transport.h), shm_probe.c. */
int coll__shm_probe(void *ctx, int peer, uint32_t tag);

/* One progress pass without waiting: the host endpoint's kick
 * (transport.h). shm_wait.c. */
void coll__shm_kick(void *ctx);

/* The failure hooks of libcoll's own transports (transport.h). */
void coll__shm_fail(void *ctx, const coll_origin_t *o);
int coll__shm_origin(void *ctx, coll_origin_t *o);

/* The desync hooks (transport.h): positions and reports read from the
 * peers' regions (shm_desync.c). */
void coll__shm_ask(void *ctx, int64_t budget_ms, coll_pos_snap_t *out,
                   unsigned char *answered);
void coll__shm_tell(void *ctx, const char *report);
int coll__shm_heard(void *ctx, char *buf, size_t n);

/* shm_wait.c --------------------------------------------------------------- */

/* Sleeps in the kernel until a doorbell, a peer's hangup (that peer is
 * then lost) or at most ms (< 0: no bound). Announces the sleep first
 * (coll__shm_ring_bell rings only for sleepers), then asks still(ep, arg)
 * under ep->mu whether to sleep at all, so no ring is missed. `leader`:
 * the caller is the requests' leader (shm_wait.c), who reads the
 * doorbell; other sleepers leave it to a leader if there is one. */
void coll__shm_kernel_sleep(shm_ep_t *ep, int (*still)(shm_ep_t *, void *),
                            void *arg, int leader, int64_t ms);

/* The `wait` slot. */
coll_status_t coll__shm_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len);

/* shm_coll.c --------------------------------------------------------------- */

/* Sets up the rounds once every peer's region is mapped; none for a host
 * endpoint. COLL_ERR_NO_MEMORY. */
coll_status_t coll__shm_rounds_init(shm_ep_t *ep);
/* The rounds, or NULL. */
coll_rounds_t *coll__shm_rounds(shm_ep_t *ep);

/* shm_cma.c ---------------------------------------------------------------- */

/* Reads COLL_SHM_SINGLE_COPY (or the test seam) into ep->copy_from; 0
 * turns single copy off on this rank. */
void coll__shm_cma_config(shm_ep_t *ep);
/* Fills ep->probe with a value a peer cannot guess by chance. */
void coll__shm_probe_init(shm_ep_t *ep);
/* Reads back peer p's probe word (at addr, holding val, in its process
 * pid = ep->peers[p].pid); clears ep->cma_mine, with why, if it cannot. */
void coll__shm_probe_peer(shm_ep_t *ep, int p, uint64_t addr, uint64_t val);
/* Once every peer is met: tells every peer whether this rank could read
 * them all and hears theirs over the sockets, before the deadline; sets
 * ep->cma and the agreed ep->copy_from when all could, else logs why not
 * at INFO. */
coll_status_t coll__shm_cma_agree(shm_ep_t *ep, int64_t deadline);
/* The provider's peer_read slot (provider.h). */
coll_status_t coll__shm_peer_read(void *ctx, int peer, void *dst,
                                  const void *from, size_t len);

/* shm_heartbeat.c ---------------------------------------------------------- */

/* Starts the liveness thread (none for one rank, nor for a host endpoint
 * without heartbeats: nobody asks it, its comm's endpoint answers). */
coll_status_t coll__shm_hb_start(shm_ep_t *ep);
/* Stops and joins it; a no-op if it never ran. Not from the thread. */
void coll__shm_hb_stop(shm_ep_t *ep);
/* Waits while *word is still `seen`, at most ms (< 0: no bound), or until
 * a wake: a futex on memory every rank maps. Wakes every waiter on word. */
void coll__shm_futex_wait(_Atomic uint32_t *word, uint32_t seen, int64_t ms);
void coll__shm_futex_wake(_Atomic uint32_t *word);

/* shm_setup.c -------------------------------------------------------------- */

/* Unmaps and closes what setup made (peers not met yet hold -1/NULL). */
void coll__shm_ep_free(shm_ep_t *ep);

#endif
