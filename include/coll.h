/* SPDX-License-Identifier: Apache-2.0 */
/* coll.h: the public API of libcoll, collective communication for training.
 *
 * Quick reference: what a first program needs (search for the names).
 *   ranks as threads     coll_inproc_create(world, ends), then on each rank
 *                        thread coll_comm_create(ends[rank], NULL, &comm)
 *   ranks as processes   coll_comm_init_env(NULL, &comm): RANK, WORLD_SIZE,
 *                        MASTER_ADDR, MASTER_PORT from the launcher
 *   collectives          coll_allreduce, coll_broadcast, coll_allgather,
 *                        coll_reduce_scatter, coll_reduce, coll_barrier,
 *                        coll_gather, coll_scatter, coll_alltoall(v),
 *                        coll_send, coll_recv, coll_recv_any
 *   nonblocking          coll_iallreduce ... then coll_wait or coll_test
 *   errors               a coll_status_t from every call; coll_last_error()
 *                        says what failed, where and which peer
 *   a watchdog           coll_comm_abort_handle, coll_abort (any thread)
 *   the end              coll_comm_destroy
 * The manual (docs/README.md in the source tree) walks through them; this
 * header is the reference.
 *
 * How to read this header. Each function's comment says what it does, who
 * owns what afterwards, whether and how long it blocks, which statuses it
 * returns and, last, which threads may call it. Rules that hold for every
 * function are stated once, here.
 *
 * Statuses. A function returning coll_status_t returns COLL_OK or a
 * failure, and on a failure records a sentence (what, where, which peer)
 * that coll_last_error() returns on the same thread. COLL_ERR_INVALID_ARG
 * (a bad argument, config or environment variable) and
 * COLL_ERR_UNSUPPORTED (not on this backend) mean the call was refused
 * before it did anything: nothing was issued, allocated or taken over,
 * unless the function says it takes an argument also on failure. Where a
 * function allocates, creates threads or locks, COLL_ERR_NO_MEMORY and
 * COLL_ERR_SYSTEM are possible too and are not listed each time.
 *
 * Ownership. Handles (comms, requests, transports, groups, abort handles)
 * are made by libcoll, returned through an out-parameter, and freed by the
 * one function named for them; such an out-parameter is NULL after a
 * failed call. What the caller passes in (buffers, configs, names, buffer
 * lists) stays the caller's: libcoll copies what it keeps beyond the call,
 * except the data buffers of a nonblocking call, which it uses until
 * coll_wait() on that request returned, whatever it returned.
 *
 * Destroy always frees. coll_comm_destroy, coll_group_destroy,
 * coll_transport_destroy, coll_abort_handle_release and coll_wait free
 * their object whatever state it is in (failed, aborted, with work in
 * flight) and whatever they return: a status other than COLL_OK only
 * reports a failure met on the way. NULL is a no-op.
 *
 * Threads. "Any thread": at any time, also concurrently with any other
 * call. "One thread per comm": calls on one comm (its collectives,
 * point-to-point and requests) come from one thread at a time, which may
 * change from call to call; different comms may be used from different
 * threads at once. A collective, point-to-point call or shrink that starts
 * while another thread is in a call on the same comm is refused at once
 * with COLL_ERR_INVALID_ARG naming the call in progress, which goes on
 * untouched (waits on requests and destroy are not checked). Abort handles
 * are the exception that makes a stuck comm recoverable: any thread, any
 * time.
 *
 * Blocking. "Never blocks": returns without waiting for peers, the network
 * or the GPU (it may take a lock briefly). Calls that wait say for what;
 * on a comm every wait is bounded by the comm's timeout (coll_comm_config_t
 * timeout_ms, COLL_TIMEOUT_MS, default 300 s) and ended at once by
 * coll_abort() on the comm's handle.
 *
 * Sticky failures. A failure that may have left the ranks' message streams
 * out of step breaks the comm for good: COLL_ERR_ABORTED, TIMEOUT,
 * PEER_LOST, PROTOCOL, SYSTEM and INTERNAL always, BACKEND on NCCL comms,
 * and any failure in the middle of a collective's data exchange. The comm
 * then aborts itself (its peers learn at once instead of at their
 * timeout) and every later call on it returns the same status, with the
 * first failure's text. Refused arguments (INVALID_ARG, UNSUPPORTED)
 * and a COLL_ERR_LENGTH_MISMATCH found by the descriptor agreement or by a
 * receive do not stick: the comm keeps working. (On NCCL comms every error
 * NCCL itself returns is BACKEND and sticks, an argument NCCL refused
 * included: NCCL keeps it as the comm's state.) A broken comm is still
 * destroyed with coll_comm_destroy().
 *
 * Which rank failed. On CPU comms over libcoll's TCP, shared-memory and
 * in-process transports a failure names the rank where it started, on every
 * rank: a rank that fails because of another's failure tells its peers that
 * origin before it closes anything, and each rank reports the first origin it
 * hears of, never the rank it heard it from. What the ranks whose call the
 * failure ends report (rank 3 failing, rank 0 reporting):
 *  - rank 3 killed, crashed, or its link broke: COLL_ERR_PEER_LOST,
 *    "allreduce: rank 3 lost (connection reset), seen by rank 0" (or
 *    "connection closed without goodbye"), within milliseconds.
 *  - coll_abort on rank 3's comm: COLL_ERR_ABORTED on rank 3 and on every
 *    rank whose call it ends: "allreduce: rank 3 aborted, seen by rank 0".
 *    ABORTED, not PEER_LOST: every process is alive, so a retry loop may
 *    build a new comm with the same ranks; PEER_LOST means a rank is gone.
 *  - rank 3 destroyed its comm while others still call: COLL_ERR_PEER_LOST,
 *    "rank 3 left (its comm was destroyed), seen by rank 0" (a destroy
 *    with a call in flight aborts first: as coll_abort).
 *  - rank 3 stopped, swapped out or wedged (TCP, shared memory):
 *    COLL_ERR_PEER_LOST, "rank 3 unresponsive for 10.3 s, seen by rank 0",
 *    no sooner than COLL_HEARTBEAT_TIMEOUT_MS (default 10 s) of silence
 *    this rank could watch, and within it plus 8 %; resumed, rank 3 names
 *    itself. Its transport thread keeps beating (TCP: heartbeats on idle
 *    links), so a rank busy in its own code is never reported. With
 *    heartbeats off (0)
 *    the ranks waiting on it time out at the comm's timeout
 *    (COLL_ERR_TIMEOUT), and the ranks they end report COLL_ERR_TIMEOUT,
 *    "rank 1 timed out in a collective, seen by rank 0", naming the first
 *    rank whose wait ran out.
 *  - rank 3 sent bytes that break the wire protocol: COLL_ERR_PROTOCOL,
 *    "rank 3 broke the wire protocol, seen by rank 0" (the rank that read
 *    them adds what was wrong).
 *  - another failure that ends rank 3's comm: its status, "rank 3 failed
 *    (out of memory), seen by rank 0".
 *  - a timeout (COLL_ERR_TIMEOUT) says who is missing: before the rank
 *    whose wait ran out fails the comm, it asks every peer where it is
 *    (within min(1 s, half the comm's timeout)), and its text reads
 *    "allreduce #41 timed out after 10.0 s: rank 1 is still in broadcast
 *    #40; rank 3 never entered it (last finished allreduce #40); ranks 0,2
 *    are in it" (a peer that cannot answer "did not answer"). Every rank
 *    whose call the timeout ends gets the same report after the origin's
 *    text ("rank 0 timed out in a collective, seen by rank 2: allreduce
 *    #41 timed out ..."); the statuses are those above. Collectives are
 *    numbered per comm from 1. On a third party's transport only with
 *    its version 2 desync slots.
 * An idle comm reports a failure at its next call (a frozen peer within a
 * twentieth of the heartbeat timeout of the call's first wait on it). A
 * third party's transport (coll_transport.h) passes origins on only
 * with its version 2 fail and origin slots: without them a rank may name
 * the rank it heard of a failure from.
 *
 * Compatibility. While the major version is 0 the library is libcoll.so.0
 * and promises this: a program built against an older 0.x header runs with
 * a newer 0.x library. Exported functions keep their signatures and
 * meaning; enum values keep their numbers (new ones may be added); the
 * caller-filled structs (coll_comm_config_t, coll_tcp_config_t,
 * coll_transport_ops_t of coll_transport.h) grow only at the end and are
 * read no further than their `size` says; a transport table keeps the rules
 * of the COLL_TRANSPORT_OPS_VERSION it was built for. coll_buffer_t is
 * passed as an array element (coll_allreduce_batch), so its size is part
 * of the ABI and never changes: a new per-buffer attribute would come as a
 * new type with new functions. Opaque handles may change at will. Before 1.0
 * the source API may still change (a name, a macro), said in the release notes;
 * anything that would break built programs gets a new soname. */
#ifndef COLL_H
#define COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(COLL_BUILDING_LIBRARY) && defined(__GNUC__)
#define COLL_API __attribute__((visibility("default")))
#else
#define COLL_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

#define COLL_VERSION_MAJOR 0
#define COLL_VERSION_MINOR 1
#define COLL_VERSION_PATCH 0
#define COLL_VERSION \
  (COLL_VERSION_MAJOR * 10000 + COLL_VERSION_MINOR * 100 + COLL_VERSION_PATCH)

/* The version of the library that is loaded: MAJOR*10000+MINOR*100+PATCH.
 * Compare with COLL_VERSION to detect a header/library skew. Never blocks.
 * Any thread. */
COLL_API int coll_version(void);

/* The environment variables libcoll reads, for tools that list them:
 * i in [0, coll_env_count()); static strings (never freed), NULL for i out
 * of range. Never blocks. Any thread. */
COLL_API int coll_env_count(void);
COLL_API const char *coll_env_name(int i);
COLL_API const char *coll_env_meaning(int i);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/* One list generates the enum, coll_status_name() and coll_strerror(). */
#define COLL_STATUS_MAP(X)                                                  \
  X(OK, 0, "success")                                                       \
  X(ERR_INVALID_ARG, 1, "invalid argument")                                 \
  X(ERR_NO_MEMORY, 2, "out of memory")                                      \
  X(ERR_UNSUPPORTED, 3, "operation not supported")                          \
  X(ERR_NOT_AVAILABLE, 4, "backend not available")                          \
  X(ERR_ABORTED, 5, "communicator aborted")                                 \
  X(ERR_TIMEOUT, 6, "timed out")                                            \
  X(ERR_PEER_LOST, 7, "peer lost")                                          \
  X(ERR_PROTOCOL, 8, "protocol error")                                      \
  X(ERR_LENGTH_MISMATCH, 9, "ranks disagree on length, dtype or operation") \
  X(ERR_BACKEND, 10, "backend (NCCL/CUDA) error")                           \
  X(ERR_SYSTEM, 11, "system error")                                         \
  X(ERR_INTERNAL, 12, "internal error")

typedef enum coll_status {
#define COLL_STATUS_ENUM_(name, value, text) COLL_##name = value,
  COLL_STATUS_MAP(COLL_STATUS_ENUM_)
#undef COLL_STATUS_ENUM_
} coll_status_t;

/* A static sentence for a status ("peer lost"); never NULL, "unknown
 * status" for a value not in the list. Any thread. */
COLL_API const char *coll_strerror(coll_status_t s);
/* The enum name without prefix ("ERR_PEER_LOST"); never NULL. Any thread. */
COLL_API const char *coll_status_name(coll_status_t s);
/* This thread's detailed text for its last failed call, e.g.
 * "allreduce: rank 3 lost (connection reset), seen by rank 0". Read it
 * right after the call that failed; after one that succeeded it is usually
 * empty but means nothing. The text is per thread: a failure on one thread
 * never shows on another. The pointer (this thread's buffer, never NULL) stays
 * valid, and the text unchanged, until this thread's next libcoll call;
 * copy it to keep it. Any thread. */
COLL_API const char *coll_last_error(void);
/* For the slots a caller provides (a key/value store's, a transport's:
 * coll_transport.h): records `fmt` as the calling thread's
 * coll_last_error() text and returns `s`, so a slot can end with `return
 * coll_set_last_error(COLL_ERR_PEER_LOST, "rank %d lost: %s", peer, why);`.
 * Call it on the thread that runs the slot, before the slot returns. Never
 * blocks. Any thread. */
COLL_API coll_status_t coll_set_last_error(coll_status_t s, const char *fmt,
                                           ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ------------------------------------------------------------------------ */
/* Data types and reduction operations                                      */
/* ------------------------------------------------------------------------ */

typedef enum coll_dtype {
  COLL_F16 = 0, /* IEEE binary16 */
  COLL_BF16,    /* bfloat16 */
  COLL_F32,
  COLL_F64,
  COLL_I8,
  COLL_U8,
  COLL_I32,
  COLL_I64,
  COLL_DTYPE_COUNT
} coll_dtype_t;

typedef enum coll_op {
  COLL_SUM = 0,
  COLL_PROD,
  COLL_MAX,
  COLL_MIN,
  COLL_AVG, /* the sum, scaled once by 1/world at the end */
  COLL_OP_COUNT
} coll_op_t;

/* Bytes per element of dt, 0 for an invalid dtype. Any thread. */
COLL_API size_t coll_dtype_size(coll_dtype_t dt);
/* "f32", "bf16", ...; "invalid" for an invalid value. Any thread. */
COLL_API const char *coll_dtype_name(coll_dtype_t dt);
/* "sum", "avg", ...; "invalid" for an invalid value. Any thread. */
COLL_API const char *coll_op_name(coll_op_t op);

/* A buffer of `count` elements of `dtype` at `data` (host or device),
 * passed in arrays to the batched calls. Its layout is frozen for
 * libcoll.so.0: as an array element it can never grow. */
typedef struct coll_buffer {
  void *data;
  size_t count;
  coll_dtype_t dtype;
} coll_buffer_t;

/* ------------------------------------------------------------------------ */
/* Opaque handles                                                           */
/* ------------------------------------------------------------------------ */

typedef struct coll_comm coll_comm_t;                 /* one rank */
typedef struct coll_request coll_request_t;           /* one nonblocking op */
typedef struct coll_abort_handle coll_abort_handle_t; /* refcounted */
typedef struct coll_transport coll_transport_t;       /* one rank's endpoint */
typedef struct coll_group coll_group_t;               /* NCCL: many GPUs */

/* ------------------------------------------------------------------------ */
/* Communicator configuration                                               */
/* ------------------------------------------------------------------------ */

/* Caller-filled; always start from the macro:
 *   coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
 * It sets `size` (which fields this caller knows) and `magic`; a config
 * without them (the macro forgotten) is refused with COLL_ERR_INVALID_ARG
 * naming COLL_COMM_CONFIG_INIT. New fields only at the end, after magic.
 * libcoll reads the config during the call and keeps nothing of it but
 * copies (the name) and the abort handle's reference. The fields:
 *  timeout_ms:   bound on every wait of a collective on this comm, and on
 *                the comm's creation where it waits for peers (NCCL init);
 *                0 takes COLL_TIMEOUT_MS or the default (300000); < 0
 *                waits forever.
 *  name:         shown in logs and error texts (and NCCL's commName);
 *                copied, may be NULL.
 *  abort_handle: NULL, or a handle from coll_abort_handle_create() that the
 *                new comm adopts as its own (the comm takes a reference; the
 *                caller keeps its own). Aborting it while the comm is being
 *                created ends the creation with COLL_ERR_ABORTED; a handle
 *                serves one comm or one group, once. */
typedef struct coll_comm_config {
  size_t size;
  int64_t timeout_ms;
  const char *name;
  coll_abort_handle_t *abort_handle;
  uint64_t magic; /* COLL_COMM_CONFIG_MAGIC: proof that the INIT macro ran */
} coll_comm_config_t;
#define COLL_COMM_CONFIG_MAGIC 0x31474643434c4f43ull /* "COLCCFG1" */
#define COLL_COMM_CONFIG_INIT \
  { sizeof(coll_comm_config_t), 0, NULL, NULL, COLL_COMM_CONFIG_MAGIC }

/* ------------------------------------------------------------------------ */
/* Transports                                                               */
/* ------------------------------------------------------------------------ */

/* libcoll's own transports: in-process, TCP and shared memory. A third
 * party's transport plugs in through the table of coll_transport.h. */

/* Tags at or above COLL_TAG_RESERVED belong to libcoll's collectives; user
 * point-to-point tags must be below it. */
#define COLL_TAG_RESERVED 0x80000000u

/* Destroys a transport that was not handed to a comm: its provider's
 * destroy runs (for TCP: a goodbye to the peers, at most about a second).
 * NULL is a no-op. The transport's only user, once. */
COLL_API void coll_transport_destroy(coll_transport_t *t);
/* The endpoint's rank and world size; -1 for NULL. Any thread. */
COLL_API int coll_transport_rank(const coll_transport_t *t);
COLL_API int coll_transport_size(const coll_transport_t *t);

/* In-process transport: `world` (1..4096) endpoints of one process, one
 * per rank thread, written to out[0..world-1] (all NULL on failure when
 * world was in range; nothing is left behind). A message is copied once,
 * straight from the sender's buffer into the receiver's, so a send
 * completes only once its receive is posted. Each endpoint is handed to a
 * comm (or destroyed) independently; the shared state goes with the last
 * one. Never blocks. Any thread. */
COLL_API coll_status_t coll_inproc_create(int world, coll_transport_t **out);

/* TCP transport (libuv): one process per rank, ranks meet through a
 * key/value store that rank 0 serves on master_addr:master_port. Always
 * start from the macro (coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT): a
 * config without its size and magic is refused naming it. NULL strings
 * take the environment (COLL_SOCKET_IFNAME, COLL_AUTH_TOKEN) or the
 * defaults; the strings are read during coll_tcp_create only. */
typedef struct coll_tcp_config {
  size_t size;
  int rank;                /* 0 <= rank < world */
  int world;               /* >= 1 */
  const char *master_addr; /* host name or address of rank 0 */
  int master_port;         /* 1..65535 */
  const char *ifname;      /* interface to listen on; NULL: the one that
                              reaches master_addr */
  const char *auth_token;  /* shared secret checked in every handshake */
  int64_t timeout_ms;      /* rendezvous/connect bound; 0: COLL_TIMEOUT_MS */
  const char *job_id;      /* NULL: derived from master_addr:master_port */
  uint64_t magic;          /* COLL_TCP_CONFIG_MAGIC, set by the INIT macro */
} coll_tcp_config_t;
#define COLL_TCP_CONFIG_MAGIC 0x31474643504354ull /* "TCPCFG1" */
#define COLL_TCP_CONFIG_INIT                                        \
  {                                                                 \
    sizeof(coll_tcp_config_t), -1, 0, NULL, 0, NULL, NULL, 0, NULL, \
        COLL_TCP_CONFIG_MAGIC                                       \
  }

/* Connects this rank to all others (rendezvous, then a full mesh) and
 * returns its endpoint in *out (NULL on failure, with every socket and
 * thread it made gone). With COLL_TRANSPORT unset or auto and every rank
 * on this host, or with shm, the endpoint is the shared-memory transport
 * instead ("shm"; tcp: TCP; shm across hosts is INVALID_ARG naming them).
 * Blocks until every rank arrived and connected, or cfg->timeout_ms (0:
 * COLL_TIMEOUT_MS, default 300 s) passed. Returns INVALID_ARG (config,
 * COLL_TIMEOUT_MS, an interface or host that does not exist), TIMEOUT (naming
 * the ranks that never came), PEER_LOST (a rank left during setup), PROTOCOL (a
 * handshake failed: another job, a wrong token), SYSTEM (the port is in use, a
 * socket call failed). One thread per call; each rank process calls it once. */
COLL_API coll_status_t coll_tcp_create(const coll_tcp_config_t *cfg,
                                       coll_transport_t **out);

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */
/* ------------------------------------------------------------------------ */

/* Creates a CPU-ring comm over transport `t`: this rank of t's world.
 * Ownership of t moves to the comm, also on failure (t is then destroyed;
 * a NULL t is only refused). cfg may be NULL (defaults). *out is the comm,
 * NULL on failure. Never blocks: it waits for no peer (the first
 * collective does). Returns INVALID_ARG (NULL t or out, a config without
 * COLL_COMM_CONFIG_INIT, an abort handle already used, a bad COLL_TIMEOUT_MS
 * or COLL_ALGO). Any thread; each transport goes to one comm. */
COLL_API coll_status_t coll_comm_create(coll_transport_t *t,
                                        const coll_comm_config_t *cfg,
                                        coll_comm_t **out);
/* Creates a comm from the launcher's environment: RANK and WORLD_SIZE as
 * torchrun sets them, else (when neither is set) Open MPI's mpirun's
 * OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/SIZE, else Slurm's
 * SLURM_PROCID/NTASKS: the first launcher that sets either of its pair is
 * used and the others are ignored; half a pair is an error. MASTER_ADDR
 * and MASTER_PORT (rank 0's host and a free port there) are required under
 * every launcher; COLL_* knobs apply. The transport of coll_tcp_create
 * for host buffers (TCP, or shared memory: see COLL_TRANSPORT); with the NCCL
 * backend built and a GPU present, an NCCL comm whose unique id travels through
 * the same rendezvous store (COLL_BACKEND chooses). cfg may be NULL. *out is
 * the comm, NULL on failure, with nothing left behind (sockets, threads, the
 * store). Blocks until every rank arrived and connected (and, for NCCL, NCCL's
 * init finished), bounded by cfg's timeout (else COLL_TIMEOUT_MS); an NCCL init
 * is also ended by cfg's abort handle. Returns INVALID_ARG (a variable missing
 * or malformed, naming it, or no launcher's rank at all, naming those looked
 * for; the config), NOT_AVAILABLE (COLL_BACKEND=nccl without a usable NCCL),
 * TIMEOUT (naming the ranks that never came), PEER_LOST, PROTOCOL (a handshake
 * refused), SYSTEM (the port in use, a socket call), BACKEND (NCCL's init
 * failed), ABORTED. One thread per call; one comm per process and job. */
COLL_API coll_status_t coll_comm_init_env(const coll_comm_config_t *cfg,
                                          coll_comm_t **out);

/* A key/value store the caller brings (torch's c10d::Store, a scheduler's
 * KV service): libcoll calls these from the thread that creates the comm,
 * during creation only.
 *  size: sizeof(coll_store_ops_t) as the caller compiled it; a table too
 *        small to hold set and get is refused. Fields added to a later
 *        header come at the end and are read only when size covers them.
 *  ctx:  passed to every slot; stays the caller's (libcoll never frees it
 *        and keeps neither ctx nor the table after creation returns).
 *  set:  mandatory; see below.
 *  get:  mandatory; see below.
 * Keys are short NUL-terminated text; values are bytes (an address text,
 * the 128 bytes of an NCCL unique id), not NUL-terminated. Every key
 * libcoll writes begins with "coll/" ("coll/compat/<rank>",
 * "coll/addr/<rank>", "coll/nccl/unique_id", "coll/outcome/<rank>"), and
 * libcoll never deletes one (the table has no delete). So each comm made
 * through one store needs keys of its own, at the same time and one after
 * another alike: give every comm a distinct prefix (torch's PrefixStore,
 * which init_process_group gives each process group; in C, slots that
 * prepend "<group>/" to the key). Two comms on the same keys would read
 * each other's addresses.
 * Slots run on the thread that called coll_comm_init_store, one call at a
 * time, never after it returned; they need no locking of their own unless
 * the store is shared with other threads. A failing slot may record why
 * with coll_set_last_error() on that thread: libcoll carries the text in
 * its own error ("... the store's set of 'coll/addr/1' failed: <text>"). */
typedef struct coll_store_ops {
  size_t size; /* sizeof(coll_store_ops_t) */
  void *ctx;   /* passed to every slot */
  /* Makes value (len bytes) visible under key to every rank. COLL_OK or a
   * failure status (the slot may call coll_set_last_error to explain). */
  coll_status_t (*set)(void *ctx, const char *key, const void *value,
                       size_t len);
  /* Waits until key exists, at most timeout_ms (COLL_ERR_TIMEOUT after it),
   * then copies at most cap bytes of its value to value and sets *len to the
   * value's full length. timeout_ms > 0 bounds the wait; 0 asks without
   * waiting (COLL_ERR_TIMEOUT at once when the key is missing: libcoll asks
   * so after a timeout, to name the ranks that never came); < 0 waits
   * without bound (a comm whose timeout is negative). */
  coll_status_t (*get)(void *ctx, const char *key, void *value, size_t cap,
                       size_t *len, int64_t timeout_ms);
} coll_store_ops_t;

/* Creates rank `rank` of a `world`-rank comm whose ranks meet through the
 * caller's store instead of a store libcoll serves: the same comm
 * coll_comm_init_env makes (CPU ring over TCP, or NCCL when COLL_BACKEND
 * selects it and it is usable, its unique id carried by the store), with
 * the same setup guarantees (docs/wire-and-security.md, "Setup: all or
 * nothing, compatible, not stallable").
 *
 * Every rank calls it once with the same world and a rank of its own.
 * First each rank sets "coll/compat/<rank>" (its library version, wire
 * version and wire options) and gets every rank's: ranks that differ all
 * fail at once with PROTOCOL naming who runs what, and a rank whose record
 * never comes is named (TIMEOUT) at the timeout.
 * TCP: each rank listens on an ephemeral port and sets its address under
 * "coll/addr/<rank>", then gets the addresses of the lower ranks and
 * connects the mesh. It listens on the first address of interface
 * COLL_SOCKET_IFNAME when that is set (IPv4 before IPv6); else on the
 * address the routing table uses toward MASTER_ADDR when that is set; else
 * on the first non-loopback address this host's name resolves to, else the
 * address of the default route, else 127.0.0.1 (one host only).
 * COLL_AUTH_TOKEN is checked in the handshakes as for coll_tcp_create.
 * NCCL: rank 0 creates the unique id and sets it under
 * "coll/nccl/unique_id"; the others get it; every rank then joins on the
 * device LOCAL_RANK picks (else its current device).
 * Last, each rank sets "coll/outcome/<rank>" ("ok", or its status and
 * text) and gets every rank's: either every rank returns COLL_OK, or every
 * rank returns the same status (the lowest failing rank's) and the same
 * text naming every failing rank and why; a rank that never reports is
 * named once the timeout and 2 s more have passed.
 *
 * store and its slots are used only during the call (see coll_store_ops_t);
 * cfg may be NULL. *out is the comm, NULL on failure, with no socket or
 * thread left behind (keys already set stay in the store). Blocks until
 * every rank arrived and connected (and, for NCCL, NCCL's init finished),
 * bounded by cfg's timeout (else COLL_TIMEOUT_MS, default 300 s): each get
 * is passed what is left of it. An NCCL init is also ended by cfg's abort
 * handle: that rank reports it and returns ABORTED at once, without
 * waiting for the others' outcomes (they fail naming it). Returns
 * INVALID_ARG (a NULL store or out, a table too small or
 * with a NULL slot, world < 1 or rank outside 0..world-1, the config,
 * COLL_TIMEOUT_MS, COLL_SOCKET_IFNAME or MASTER_ADDR that do not resolve),
 * TIMEOUT (a get that timed out, naming the key and the ranks whose keys
 * are still missing), PROTOCOL (ranks built or configured incompatibly,
 * a value of the wrong length, or a get that did not set *len), the status
 * of a failing slot with its text,
 * NOT_AVAILABLE (COLL_BACKEND=nccl without a usable NCCL), PEER_LOST,
 * SYSTEM, BACKEND (NCCL's init failed), ABORTED. One thread per call. */
COLL_API coll_status_t coll_comm_init_store(const coll_store_ops_t *store,
                                            int rank, int world,
                                            const coll_comm_config_t *cfg,
                                            coll_comm_t **out);
/* Destroys a comm and frees it, always (see "Destroy always frees"). Work
 * still queued or in flight ends with COLL_ERR_ABORTED; its requests stay
 * valid until the caller's coll_wait, which frees them. The transport and
 * the comm's reference on its abort handle go with it; other references
 * to the handle stay valid, and coll_abort on them is a no-op from now
 * on. Blocks briefly: a CPU comm aborts what is in flight and joins its
 * worker, and over TCP says goodbye to its peers (at most about a
 * second); an NCCL comm waits for its work on the GPU to end, or aborts
 * NCCL's comm if it failed, was aborted or still has work that may never
 * end; NCCL's abort waits until the stream reached the comm's last
 * (stopped) kernel. Returns COLL_OK, or BACKEND (PEER_LOST for a lost
 * peer) when NCCL reported an error for the comm that no call had seen, or
 * while tearing down. Safe
 * while another thread aborts the comm. NULL is a no-op. One thread per
 * comm, as its last call. */
COLL_API coll_status_t coll_comm_destroy(coll_comm_t *c);
/* Shrink and continue: after a failure (a rank died, left or was aborted,
 * and the comm's calls now fail), every surviving rank calls this on its
 * comm; they agree on who is alive and each gets *newcomm, a comm of the
 * survivors on the same transport, renumbered in the order of their old
 * ranks. On a healthy comm every rank that calls it survives: the same
 * world, the same numbering. The agreement holds whatever dies during it:
 * every rank that gets a comm gets the same member list, and a rank that
 * the others left out (one that joined after half of the timeout may be)
 * gets an error, never a comm. A rank that is lost (its process died, it
 * destroyed its comm, or its owner called coll_abort) is left out at once; one
 * that is alive but never calls shrink holds the others until the timeout.
 * Over TCP, when a member dies before the survivors' mesh is up, the mesh
 * fails within half of the time left and the survivors agree again. CPU
 * comms over TCP with COLL_ELASTIC=1 on every rank, and over the in-process
 * transport, and over a third party's transport with the version 2 shrink
 * slots, can shrink; the shared-memory transport and a third party's without
 * them cannot (NOT_AVAILABLE). cfg as for coll_comm_create (NULL: defaults; its
 * abort handle, if any, becomes the new comm's; its timeout, else comm's,
 * bounds the whole shrink). comm stays the caller's: after shrink its
 * collectives fail (the call ended this rank's part in it), and it may only be
 * queried and destroyed, after newcomm or before. NCCL comms: ncclCommSplit
 * when nobody is excluded (NCCL 2.18+), ncclCommShrink for a list (2.27.3+),
 * looked up at run time (an NCCL without it is NOT_AVAILABLE naming its
 * version). An NCCL comm has no host-side channel of its own
 * that survives a peer's death, so its ranks cannot agree on who is gone:
 * coll_comm_shrink on an NCCL comm excludes no rank and serves a healthy
 * comm only (every rank calls it; UNSUPPORTED on a failed one); after a
 * failure the caller decides who is gone (from its launcher, its store, a
 * CPU comm's shrink) and every survivor passes that list to
 * coll_comm_shrink_exclude. Returns INVALID_ARG (NULL comm or
 * newcomm, a bad config, an abort handle in use, requests on comm not yet
 * waited for, a comm shrunk before), NOT_AVAILABLE (naming the backend or
 * transport), ABORTED (this rank's comm was aborted: it left), PEER_LOST (the
 * survivors left this rank out), TIMEOUT (a rank that is neither lost nor
 * shrinking), UNSUPPORTED and BACKEND (NCCL comms), and the statuses of
 * coll_comm_create. Blocks until the survivors' new comm is connected. One
 * thread per comm, on every survivor. */
COLL_API coll_status_t coll_comm_shrink(coll_comm_t *comm,
                                        const coll_comm_config_t *cfg,
                                        coll_comm_t **newcomm);
/* This comm's rank and the number of ranks; -1 for NULL. Any thread. */
COLL_API int coll_comm_rank(const coll_comm_t *c);
COLL_API int coll_comm_size(const coll_comm_t *c);
/* "cpu" or "nccl" (a static string); NULL for NULL. Any thread. */
COLL_API const char *coll_comm_backend(const coll_comm_t *c);

/* coll_comm_shrink without the `nexclude` ranks listed in `exclude` (ranks
 * of comm, in any order; the caller's array, read during the call). Every
 * surviving rank passes the same ranks; an excluded rank must not call it.
 * NCCL comms only: on a healthy comm NCCL's default shrink (libcoll first
 * waits for what NCCL was taking); nobody excluded is ncclCommSplit. On a
 * comm that failed or was aborted: with NCCL 2.28+ the failure revoked
 * NCCL's comm, and the shrink waits until that ended (the stream passed the
 * stopped work, bounded by cfg's timeout) before it shrinks; with NCCL 2.27
 * NCCL_SHRINK_ABORT, which needs the old NCCL comm kept after its failure
 * (COLL_NCCL_SHRINKABLE=1 before the comm is created; otherwise the shrink
 * of a failed comm is COLL_ERR_UNSUPPORTED saying so). A shrink that does
 * not finish tears the old comm down (every later call on it fails). Ranks
 * that pass different lists get NCCL's error (BACKEND) or its hang (ended
 * by the timeout). Returns what coll_comm_shrink returns, and INVALID_ARG
 * for a
 * NULL list with nexclude > 0, a negative count, a rank out of range or
 * listed twice, or this rank in the list; NOT_AVAILABLE on CPU comms
 * (they agree by themselves: coll_comm_shrink). One thread per comm. */
COLL_API coll_status_t coll_comm_shrink_exclude(coll_comm_t *comm,
                                                const int *exclude,
                                                int nexclude,
                                                const coll_comm_config_t *cfg,
                                                coll_comm_t **newcomm);

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */
/* Every call: one thread per comm; collectives on one comm run in the
 * order they were issued, on every rank. `stream` is a cudaStream_t (NULL =
 * default) for device buffers and is ignored for host buffers on CPU
 * comms. send == recv means in place; send and recv must otherwise not
 * overlap (INVALID_ARG). All ranks must make the same calls with the same
 * count, dtype, op and root; on CPU comms a disagreement is detected and
 * reported as COLL_ERR_LENGTH_MISMATCH on every rank, and the comm keeps
 * working.
 *
 * Ownership: the buffers stay the caller's. A blocking call uses them only
 * until it returns. A nonblocking call (the i-forms below) uses them until
 * coll_wait() on its request returned, whatever it returned; arrays of
 * buffer descriptors (coll_buffer_t) are copied at the call.
 *
 * Blocking: a blocking call returns when the result is in place (NCCL
 * comms: when the GPU finished), bounded by the comm's timeout and ended
 * by coll_abort(). A nonblocking call never waits for peers (NCCL comms:
 * see below for first-use connects).
 *
 * NCCL comms differ (docs/nccl.md, "What differs on NCCL comms"):
 *  - stream order: when a call returns COLL_OK (an i-form too) its work is
 *    on `stream`, before anything the caller queues on that stream
 *    afterwards; a blocking call also waits until the GPU finished it, and
 *    coll_wait waits for the GPU. The first use of an algorithm may wait
 *    for the peers to connect, bounded by the timeout, ended by
 *    coll_abort(). The timeout counts from when the work can start on the
 *    stream; work that cannot start (behind a stuck request of the comm,
 *    or another comm's kernel) times out at the latest twice the timeout
 *    after the call. NULL is the legacy default stream: pass a non-blocking
 *    one; cudaStreamPerThread is refused (INVALID_ARG: NCCL launches from a
 *    thread of its own).
 *  - numerics are NCCL's: f16/bf16 accumulate in the element type; AVG
 *    scales each input by 1/n in the element type before summing; 8-bit
 *    sums wrap, and 8-bit AVG is refused (COLL_ERR_UNSUPPORTED).
 *  - descriptor agreement only when COLL_CHECK_MISMATCH=1 is set
 *    explicitly (it costs an NCCL allgather per call); otherwise ranks that
 *    disagree get NCCL's behaviour.
 *  - point-to-point: tag must be 0 (messages between two ranks match in
 *    issue order), counts must match (*received is the count passed), and
 *    isend/irecv are launched together in one NCCL group at the first wait,
 *    test or collective, on the legacy default stream, so an exchange of
 *    isend+irecv on both ranks completes.
 * Returns: COLL_OK, INVALID_ARG/UNSUPPORTED (nothing was issued), ABORTED
 * (the comm's handle was aborted, or the comm destroyed under the
 * request), TIMEOUT (the comm's timeout passed; the text names the peer
 * waited for), PEER_LOST (naming the rank), PROTOCOL, LENGTH_MISMATCH (the
 * ranks disagree; NCCL comms: only with COLL_CHECK_MISMATCH=1), BACKEND
 * (NCCL or CUDA said so), NOT_AVAILABLE (device memory where CUDA is not
 * usable). Which of them stick is under "Sticky failures" at the top. */

/* recv = the reduction with op of every rank's send (count elements of
 * dt), on every rank. */
COLL_API coll_status_t coll_allreduce(coll_comm_t *c, const void *send,
                                      void *recv, size_t count, coll_dtype_t dt,
                                      coll_op_t op, void *stream);
/* Allreduce in place of bufs[0..nbufs) (dtypes may differ) as one
 * collective: small buffers travel packed together. Every rank passes the
 * same list (number, dtypes and counts, in order) and op; a rank that
 * differs makes it COLL_ERR_LENGTH_MISMATCH on every rank, naming the
 * buffers. No two buffers may share a byte, and their total size must fit
 * in memory (INVALID_ARG). nbufs may be 0. */
COLL_API coll_status_t coll_allreduce_batch(coll_comm_t *c,
                                            const coll_buffer_t *bufs,
                                            size_t nbufs, coll_op_t op,
                                            void *stream);
/* In-place weighted sum: every rank's buffers are multiplied by its own
 * `factor` (finite, else INVALID_ARG), then summed, as one collective with
 * the rules of coll_allreduce_batch. Floating-point dtypes, others are
 * UNSUPPORTED (NCCL comms: f16, bf16, f32, f64, the factor rounded to the
 * element type; NCCL >= 2.11). */
COLL_API coll_status_t coll_allreduce_premul_sum(coll_comm_t *c,
                                                 const coll_buffer_t *bufs,
                                                 size_t nbufs, float factor,
                                                 void *stream);
/* root's buf (count elements) into every rank's buf; 0 <= root < world. */
COLL_API coll_status_t coll_broadcast(coll_comm_t *c, void *buf, size_t count,
                                      coll_dtype_t dt, int root, void *stream);
/* recv holds world*count_per_rank elements, rank r's block at r*count. In
 * place (as NCCL): send == recv + rank * count_per_rank. */
COLL_API coll_status_t coll_allgather(coll_comm_t *c, const void *send,
                                      void *recv, size_t count_per_rank,
                                      coll_dtype_t dt, void *stream);
/* send holds world*count_per_rank elements; rank r receives the reduction of
 * block r. In place (as NCCL): recv == send + rank * count_per_rank. */
COLL_API coll_status_t coll_reduce_scatter(coll_comm_t *c, const void *send,
                                           void *recv, size_t count_per_rank,
                                           coll_dtype_t dt, coll_op_t op,
                                           void *stream);
/* The reduction lands in recv on `root` only (recv may be NULL elsewhere
 * and is never written there); 0 <= root < world. */
COLL_API coll_status_t coll_reduce(coll_comm_t *c, const void *send, void *recv,
                                   size_t count, coll_dtype_t dt, coll_op_t op,
                                   int root, void *stream);
/* Returns once every rank called it. */
COLL_API coll_status_t coll_barrier(coll_comm_t *c);
/* Tagged point-to-point; tag < COLL_TAG_RESERVED (NCCL comms: 0 only).
 * Messages between a pair on one tag arrive in order; different tags are
 * independent. peer must be another rank: sending to or receiving from
 * oneself is COLL_ERR_INVALID_ARG on every comm (a blocking send to self
 * could never complete where a send waits for its receive). A send may
 * wait until the receive is posted. Device memory on a CPU comm is copied
 * through pinned memory, ordered after the default stream; such a send
 * reaches the peer once the comm's next point-to-point call (coll_test and
 * coll_wait included) sees its copy complete. */
COLL_API coll_status_t coll_send(coll_comm_t *c, const void *buf, size_t count,
                                 coll_dtype_t dt, int peer, uint32_t tag);
/* *received (may be NULL) is the element count that arrived, written only
 * when the call returns COLL_OK; after any failure it is left as it was. A
 * message longer than count is COLL_ERR_LENGTH_MISMATCH: it is consumed,
 * never written past count (a prefix may be), and the comm stays usable;
 * a message that is not a whole number of elements of dt is a mismatch
 * too. NCCL comms: the counts must match, and *received is count. */
COLL_API coll_status_t coll_recv(coll_comm_t *c, void *buf, size_t count,
                                 coll_dtype_t dt, int peer, uint32_t tag,
                                 size_t *received);
/* A receive from any other rank: the first message on `tag` that arrives
 * from any of them, received as coll_recv from that rank would (the same
 * rules for *received and for a message longer than count). *source (may
 * be NULL) is the rank it came from, written when the call returns COLL_OK
 * or COLL_ERR_LENGTH_MISMATCH. Receives on one tag take messages in the
 * order they were issued: a receive on the same tag issued after this one,
 * from one rank or any, waits until this one was matched. When messages of
 * several ranks wait, the rank after the one matched last on this comm goes
 * first, so no sender is starved. Host memory; CPU comms over libcoll's own
 * transports (in-process, TCP, shared memory). A third party's transport,
 * device memory and NCCL comms are COLL_ERR_UNSUPPORTED; a comm of one rank
 * is INVALID_ARG (no other rank can send). */
COLL_API coll_status_t coll_recv_any(coll_comm_t *c, void *buf, size_t count,
                                     coll_dtype_t dt, uint32_t tag, int *source,
                                     size_t *received);
/* Mixed precision: *agreed is the dtype every rank should reduce in (the
 * same on every rank): the shared one if all agree, else F64 if any rank
 * holds F64, else F32. CPU comms; NCCL comms: UNSUPPORTED. */
COLL_API coll_status_t coll_negotiate_dtype(coll_comm_t *c, coll_dtype_t local,
                                            coll_dtype_t *agreed);
/* Federated averaging with a deadline: rank 0 waits up to deadline_ms for
 * the others' contributions, averages its own and those that arrived in time,
 * and broadcasts the mean into every rank's `data`. *participants (may be
 * NULL) is the number of ranks averaged, the same on every rank. A late
 * contribution is discarded; the late rank still receives the result. A
 * rank other than 0 blocks until rank 0's result arrives (bounded by the
 * comm's timeout). CPU comms; NCCL comms: UNSUPPORTED. */
COLL_API coll_status_t coll_federated_average(coll_comm_t *c, float *data,
                                              size_t count, int64_t deadline_ms,
                                              int *participants);

/* Data movement between ranks (gather, scatter, all-to-all): the bytes are
 * moved as they are, so any dtype serves; count is in elements of dt.
 * Counts, dtype and root are agreed as for the collectives above. Device
 * memory: NCCL comms only (sends and receives in one NCCL group); a CPU
 * comm refuses it for these calls (COLL_ERR_UNSUPPORTED). */

/* recv on `root` gets world blocks of count elements, rank r's send at
 * r * count; recv may be NULL elsewhere and is never written there. In
 * place on the root: send == recv + root * count. 0 <= root < world. */
COLL_API coll_status_t coll_gather(coll_comm_t *c, const void *send, void *recv,
                                   size_t count, coll_dtype_t dt, int root,
                                   void *stream);
/* `root`'s send holds world blocks of count elements; rank r gets block r
 * in recv. send may be NULL off the root and is never read there. In
 * place on the root: recv == send + root * count. 0 <= root < world. */
COLL_API coll_status_t coll_scatter(coll_comm_t *c, const void *send,
                                    void *recv, size_t count, coll_dtype_t dt,
                                    int root, void *stream);
/* send holds world blocks of count elements, block r for rank r; recv gets
 * world blocks, block r from rank r. There is no in-place form (as with
 * NCCL): send and recv must not overlap (INVALID_ARG). */
COLL_API coll_status_t coll_alltoall(coll_comm_t *c, const void *send,
                                     void *recv, size_t count, coll_dtype_t dt,
                                     void *stream);
/* All-to-all with a count and a displacement per rank, in elements of dt:
 * send_counts[r] elements at send + send_displs[r] go to rank r, and
 * recv_counts[r] elements from rank r land at recv + recv_displs[r]. The
 * four arrays hold world entries each and are read during the call only.
 * Rank i's send_counts[j] must equal rank j's recv_counts[i]: on CPU comms
 * a pair that differs is COLL_ERR_LENGTH_MISMATCH on every rank, naming
 * the pair to the rank that received it (nothing is written past a
 * block's count; the comm keeps working); NCCL comms get NCCL's behaviour.
 * Send blocks may overlap each other (one block sent to several ranks);
 * receive blocks may not overlap each other or any send block, and every
 * block must lie within memory (INVALID_ARG). allgatherv is this call
 * with every send_displs[r] the same. */
COLL_API coll_status_t coll_alltoallv(coll_comm_t *c, const void *send,
                                      const size_t *send_counts,
                                      const size_t *send_displs, void *recv,
                                      const size_t *recv_counts,
                                      const size_t *recv_displs,
                                      coll_dtype_t dt, void *stream);

/* Nonblocking forms: the same arguments and rules, plus *req, the request
 * (NULL on failure, when nothing was issued), freed by coll_wait(). Each
 * is issued in order with the comm's other calls and returns without
 * waiting for peers. One thread per comm. */
COLL_API coll_status_t coll_iallreduce(coll_comm_t *c, const void *send,
                                       void *recv, size_t count,
                                       coll_dtype_t dt, coll_op_t op,
                                       void *stream, coll_request_t **req);
COLL_API coll_status_t coll_iallreduce_batch(coll_comm_t *c,
                                             const coll_buffer_t *bufs,
                                             size_t nbufs, coll_op_t op,
                                             void *stream,
                                             coll_request_t **req);
COLL_API coll_status_t coll_iallreduce_premul_sum(coll_comm_t *c,
                                                  const coll_buffer_t *bufs,
                                                  size_t nbufs, float factor,
                                                  void *stream,
                                                  coll_request_t **req);
COLL_API coll_status_t coll_ibroadcast(coll_comm_t *c, void *buf, size_t count,
                                       coll_dtype_t dt, int root, void *stream,
                                       coll_request_t **req);
COLL_API coll_status_t coll_iallgather(coll_comm_t *c, const void *send,
                                       void *recv, size_t count_per_rank,
                                       coll_dtype_t dt, void *stream,
                                       coll_request_t **req);
COLL_API coll_status_t coll_ireduce_scatter(coll_comm_t *c, const void *send,
                                            void *recv, size_t count_per_rank,
                                            coll_dtype_t dt, coll_op_t op,
                                            void *stream, coll_request_t **req);
COLL_API coll_status_t coll_ireduce(coll_comm_t *c, const void *send,
                                    void *recv, size_t count, coll_dtype_t dt,
                                    coll_op_t op, int root, void *stream,
                                    coll_request_t **req);
COLL_API coll_status_t coll_ibarrier(coll_comm_t *c, coll_request_t **req);
COLL_API coll_status_t coll_isend(coll_comm_t *c, const void *buf, size_t count,
                                  coll_dtype_t dt, int peer, uint32_t tag,
                                  coll_request_t **req);
COLL_API coll_status_t coll_irecv(coll_comm_t *c, void *buf, size_t count,
                                  coll_dtype_t dt, int peer, uint32_t tag,
                                  size_t *received, coll_request_t **req);
COLL_API coll_status_t coll_irecv_any(coll_comm_t *c, void *buf, size_t count,
                                      coll_dtype_t dt, uint32_t tag,
                                      int *source, size_t *received,
                                      coll_request_t **req);
COLL_API coll_status_t coll_inegotiate_dtype(coll_comm_t *c, coll_dtype_t local,
                                             coll_dtype_t *agreed,
                                             coll_request_t **req);
COLL_API coll_status_t coll_ifederated_average(coll_comm_t *c, float *data,
                                               size_t count,
                                               int64_t deadline_ms,
                                               int *participants,
                                               coll_request_t **req);
COLL_API coll_status_t coll_igather(coll_comm_t *c, const void *send,
                                    void *recv, size_t count, coll_dtype_t dt,
                                    int root, void *stream,
                                    coll_request_t **req);
COLL_API coll_status_t coll_iscatter(coll_comm_t *c, const void *send,
                                     void *recv, size_t count, coll_dtype_t dt,
                                     int root, void *stream,
                                     coll_request_t **req);
COLL_API coll_status_t coll_ialltoall(coll_comm_t *c, const void *send,
                                      void *recv, size_t count, coll_dtype_t dt,
                                      void *stream, coll_request_t **req);
COLL_API coll_status_t coll_ialltoallv(coll_comm_t *c, const void *send,
                                       const size_t *send_counts,
                                       const size_t *send_displs, void *recv,
                                       const size_t *recv_counts,
                                       const size_t *recv_displs,
                                       coll_dtype_t dt, void *stream,
                                       coll_request_t **req);

/* Waits for a request, frees it (always, whatever it returns) and returns
 * its status, with its error text in coll_last_error(). Blocks until the
 * operation ended, bounded by the comm's timeout. A request outlives its
 * comm: after coll_comm_destroy it returns COLL_ERR_ABORTED at once, and
 * must still be waited to be freed. Each request is waited exactly once;
 * NULL is INVALID_ARG. One thread per comm (the request's). */
COLL_API coll_status_t coll_wait(coll_request_t *req);
/* *done = 1 once the request finished (coll_wait then returns at once), 0
 * otherwise; the request's own outcome comes from coll_wait. Never blocks
 * (NCCL comms: it may hand held point-to-point work to NCCL). Returns
 * COLL_OK or INVALID_ARG. The request stays valid until coll_wait. One
 * thread per comm. */
COLL_API coll_status_t coll_test(coll_request_t *req, int *done);

/* ------------------------------------------------------------------------ */
/* Abort handles                                                            */
/* ------------------------------------------------------------------------ */
/* Refcounted: each reference is released once, and the handle is freed
 * with the last one, whether or not its comm still exists. Every function
 * below may be called from any thread at any time, also while the comm is
 * being created, used or destroyed, or after it was destroyed; none waits
 * for a peer. */

/* A handle bound to no comm yet, for coll_comm_config_t.abort_handle, so a
 * watchdog can end a comm's creation (an NCCL init waiting for a rank that
 * never comes) as well as its collectives. *out is the caller's reference
 * (NULL on failure). Aborting it before its comm exists marks it: the
 * creation that adopts it then ends with COLL_ERR_ABORTED, or gives a comm
 * on which every call fails with it. Never blocks. Any thread. */
COLL_API coll_status_t coll_abort_handle_create(coll_abort_handle_t **out);
/* *out is a new reference to the comm's abort handle (NULL on failure);
 * release it when done, before or after the comm is destroyed. Never
 * blocks. Any thread. */
COLL_API coll_status_t coll_comm_abort_handle(coll_comm_t *c,
                                              coll_abort_handle_t **out);
/* Aborts the comm: every call in flight on it returns COLL_ERR_ABORTED
 * promptly (a CPU comm within milliseconds; an NCCL comm's init, connect
 * or collective within 100 ms whatever the streams hold, and coll_abort
 * itself returns within 100 ms: NCCL 2.28's ncclCommRevoke, or
 * ncclCommAbort on a thread of libcoll's for an older NCCL; measured on
 * the stand-in: under 1 ms), every later one fails at once with it,
 * and the comm stays so until destroyed (sticky). On CPU comms the peers'
 * calls it ends return COLL_ERR_ABORTED too, with a text naming this rank
 * ("rank 3 aborted"). Idempotent. A no-op once the comm was destroyed:
 * the handle keeps the state it had. Returns COLL_OK, or INVALID_ARG for
 * NULL. It does not wait for peers or the GPU. Any thread. */
COLL_API coll_status_t coll_abort(coll_abort_handle_t *h);
/* 1 once coll_abort was called on this handle while it could act (before
 * its comm was destroyed), else 0 (0 for NULL). Any thread. */
COLL_API int coll_is_aborted(const coll_abort_handle_t *h);
/* Releases one reference; the last one frees the handle. NULL is a no-op.
 * Any thread. */
COLL_API void coll_abort_handle_release(coll_abort_handle_t *h);

/* ------------------------------------------------------------------------ */
/* NCCL: unique ids, per-rank comms, groups                                 */
/* ------------------------------------------------------------------------ */
/* Without the NCCL backend built, or on a machine without a CUDA driver or
 * without libnccl, these return COLL_ERR_NOT_AVAILABLE saying what is
 * missing. NCCL and CUDA errors are COLL_ERR_BACKEND with NCCL's or CUDA's
 * own text. */

#define COLL_UNIQUE_ID_BYTES 128
typedef struct coll_unique_id {
  char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id_t;

/* A new id for one job, written to *out (the caller's memory); ship its
 * bytes to every rank. Never blocks. Any thread. */
COLL_API coll_status_t coll_unique_id_create(coll_unique_id_t *out);
/* Per-rank NCCL comm on the current CUDA device. Waits until every rank
 * called it with the same id, bounded by cfg's timeout (COLL_ERR_TIMEOUT
 * naming the rank) and ended by cfg's abort handle (COLL_ERR_ABORTED); the
 * half-made comm is aborted, *out stays NULL. id is read during the call
 * only. Also returns INVALID_ARG (rank, world, the config, COLL_TIMEOUT_MS;
 * a handle already used; NCCL_COMM_BLOCKING=1, which would make NCCL's comm
 * blocking), NOT_AVAILABLE, BACKEND (two ranks on one GPU: NCCL's
 * "Duplicate GPU detected"). One thread per call;
 * each rank calls it once per id. */
COLL_API coll_status_t coll_comm_init_rank(int rank, int world,
                                           const coll_unique_id_t *id,
                                           const coll_comm_config_t *cfg,
                                           coll_comm_t **out);

/* A group of comms over several devices of this process (one unique id,
 * one nonblocking ncclCommInitRankConfig per device inside one NCCL group,
 * as ncclCommInitAll does). The caller's current CUDA device is unchanged
 * by every group call. devices[0..ndev) is copied. Blocks until every
 * device's init finished. *out is the group, NULL on failure (with every
 * half-made comm aborted). coll_group_create() is
 * coll_group_create_config() with a NULL config. Group calls: one thread
 * per group at a time, like a comm's. */
COLL_API coll_status_t coll_group_create(const int *devices, int ndev,
                                         coll_group_t **out);
/* cfg (may be NULL): timeout_ms bounds the init (COLL_ERR_TIMEOUT naming
 * the devices still initialising), name prefixes the comms' names, and
 * abort_handle becomes the group's handle: aborting it ends the init, and
 * later aborts every comm of the group, also after coll_group_split(). */
COLL_API coll_status_t coll_group_create_config(const int *devices, int ndev,
                                                const coll_comm_config_t *cfg,
                                                coll_group_t **out);
/* A new reference to the group's abort handle (there is one from creation,
 * whether or not the config gave one). Release it when done, before or
 * after the group is destroyed. Never blocks. Any thread. */
COLL_API coll_status_t coll_group_abort_handle(coll_group_t *g,
                                               coll_abort_handle_t **out);
/* bufs[i] and streams[i] belong to device i of the group: nbufs must equal
 * the group size, nstreams must be 0 (default streams) or the group size.
 * The work is enqueued on every device in one NCCL group; the call blocks
 * until every device finished it, bounded by the comms' timeout. A split
 * group refuses (INVALID_ARG). Statuses as for the collectives above. */
COLL_API coll_status_t coll_group_allreduce(coll_group_t *g, void *const *bufs,
                                            int nbufs, size_t count,
                                            coll_dtype_t dt, coll_op_t op,
                                            void *const *streams, int nstreams);
COLL_API coll_status_t coll_group_broadcast(coll_group_t *g, void *const *bufs,
                                            int nbufs, size_t count,
                                            coll_dtype_t dt, int root,
                                            void *const *streams, int nstreams);
/* The number of devices, and the group's copy of their list (valid until
 * the group is split or destroyed); 0 and NULL for NULL or a split group.
 * Any thread. */
COLL_API int coll_group_size(const coll_group_t *g);
COLL_API const int *coll_group_devices(const coll_group_t *g);
/* Moves the group's per-device comms into comms[0..size-1] (one per rank, for
 * worker threads; each is then destroyed with coll_comm_destroy by its
 * user); the group is left empty, and its abort handle still aborts them.
 * Never blocks. INVALID_ARG for a group already split. */
COLL_API coll_status_t coll_group_split(coll_group_t *g, coll_comm_t **comms);
/* Destroys the comms still in the group (none after a split) and frees
 * it, always; blocks as coll_comm_destroy does for each. Returns the first
 * comm's failure, if any. NULL is a no-op. */
COLL_API coll_status_t coll_group_destroy(coll_group_t *g);

#ifdef __cplusplus
}
#endif
#endif /* COLL_H */
