/* SPDX-License-Identifier: Apache-2.0 */
/* coll.h: the public API of libcoll, collective communication for training. */
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
 * Compare with COLL_VERSION to detect a header/library skew. Any thread. */
COLL_API int coll_version(void);

/* The environment variables libcoll reads, for tools that list them:
 * i in [0, coll_env_count()); static strings, NULL for i out of range.
 * Any thread. */
COLL_API int coll_env_count(void);
COLL_API const char *coll_env_name(int i);
COLL_API const char *coll_env_meaning(int i);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/* One list generates the enum, coll_status_name() and coll_strerror(). */
#define COLL_STATUS_MAP(X)                                                    \
  X(OK, 0, "success")                                                         \
  X(ERR_INVALID_ARG, 1, "invalid argument")                                   \
  X(ERR_NO_MEMORY, 2, "out of memory")                                        \
  X(ERR_UNSUPPORTED, 3, "operation not supported")                            \
  X(ERR_NOT_AVAILABLE, 4, "backend not available")                            \
  X(ERR_ABORTED, 5, "communicator aborted")                                   \
  X(ERR_TIMEOUT, 6, "timed out")                                              \
  X(ERR_PEER_LOST, 7, "peer lost")                                            \
  X(ERR_PROTOCOL, 8, "protocol error")                                        \
  X(ERR_LENGTH_MISMATCH, 9, "ranks disagree on length, dtype or operation")   \
  X(ERR_BACKEND, 10, "backend (NCCL/CUDA) error")                             \
  X(ERR_SYSTEM, 11, "system error")                                           \
  X(ERR_INTERNAL, 12, "internal error")

typedef enum coll_status {
#define COLL_STATUS_ENUM_(name, value, text) COLL_##name = value,
  COLL_STATUS_MAP(COLL_STATUS_ENUM_)
#undef COLL_STATUS_ENUM_
} coll_status_t;

/* A static sentence for a status ("peer lost"); never NULL. Any thread. */
COLL_API const char *coll_strerror(coll_status_t s);
/* The enum name without prefix ("ERR_PEER_LOST"); never NULL. Any thread. */
COLL_API const char *coll_status_name(coll_status_t s);
/* This thread's detailed text for its last failed call, e.g.
 * "allreduce: rank 3 lost: connection reset by peer". Empty if none. The
 * pointer stays valid until this thread's next libcoll call. Any thread. */
COLL_API const char *coll_last_error(void);

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

/* A buffer of `count` elements of `dtype` at `data` (host or device). */
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

/* Caller-filled; start from COLL_COMM_CONFIG_INIT. New fields only at the end.
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
  {sizeof(coll_comm_config_t), 0, NULL, NULL, COLL_COMM_CONFIG_MAGIC}

/* ------------------------------------------------------------------------ */
/* Transports                                                               */
/* ------------------------------------------------------------------------ */

/* Tags at or above COLL_TAG_RESERVED belong to libcoll's collectives; user
 * point-to-point tags must be below it. */
#define COLL_TAG_RESERVED 0x80000000u

/* The vtable a third party implements to carry libcoll over its own fabric.
 * `size` is sizeof(coll_transport_ops_t) as the provider compiled it, so a
 * provider built against an older header keeps working: a slot is used only
 * if `size` says it is there. Mandatory slots: isend, irecv, wait, abort,
 * destroy. Optional: barrier (libcoll builds one on send/recv otherwise).
 *
 * Semantics libcoll relies on:
 *  - Messages between one (source, tag) pair and one receiver arrive in the
 *    order they were sent (FIFO per pair and tag), and match receives posted
 *    for that (source, tag) in posting order.
 *  - isend/irecv never block for long; they return a request that `wait`
 *    completes. The buffer belongs to the transport until then. A send may
 *    complete before or only after the receive is posted.
 *  - wait(req, timeout_ms, &len): timeout_ms < 0 waits forever. COLL_OK
 *    completes and frees the request; for a receive *len is the length that
 *    arrived. A message longer than the receive buffer is never written past
 *    it: wait returns COLL_ERR_LENGTH_MISMATCH with *len = the length sent.
 *    COLL_ERR_TIMEOUT leaves the request pending (wait may be called again);
 *    any other status completes and frees it.
 *  - abort: any thread, idempotent. Every pending and later request fails with
 *    COLL_ERR_ABORTED; after abort returns, the transport never touches a
 *    caller's buffer again. It must not block on peers.
 *  - destroy: frees everything; called once, after every request was waited.
 * Failures should record a sentence with coll_set_last_error(). isend,
 * irecv and wait may be called from two threads of one endpoint at once (the
 * comm's collective thread and a user's point-to-point calls), on different
 * requests; abort from any thread; destroy from one thread, last. */
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
} coll_transport_ops_t;
#define COLL_TRANSPORT_OPS_VERSION 1

/* Wraps a third party's vtable into a transport endpoint for `rank` of
 * `world`. The ops table and its name are copied. `ctx` becomes the
 * transport's only when this returns COLL_OK (ops->destroy(ctx) runs when
 * the transport is destroyed); on any failure no slot is called and ctx
 * stays the caller's. Refuses (COLL_ERR_INVALID_ARG) a NULL table, a size
 * too small for the mandatory slots, a version outside
 * 1..COLL_TRANSPORT_OPS_VERSION, a missing mandatory slot, a NULL out, a
 * rank outside [0, world). Never blocks. Any thread. */
COLL_API coll_status_t coll_transport_create(const coll_transport_ops_t *ops,
                                             void *ctx, int rank, int world,
                                             coll_transport_t **out);
/* Destroys a transport that was not handed to a comm. Any thread. */
COLL_API void coll_transport_destroy(coll_transport_t *t);
COLL_API int coll_transport_rank(const coll_transport_t *t);
COLL_API int coll_transport_size(const coll_transport_t *t);

/* For transport providers: records `fmt` as this thread's coll_last_error()
 * text and returns `s`, so a provider can write `return coll_set_last_error(
 * COLL_ERR_PEER_LOST, "rank %d lost: %s", peer, why);`. Any thread. */
COLL_API coll_status_t coll_set_last_error(coll_status_t s, const char *fmt,
                                           ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* In-process transport: `world` endpoints of one process, one per rank
 * thread, written to out[0..world-1]. A message whose receive is posted is
 * copied once, straight from the sender's buffer into the receiver's. Each
 * endpoint is handed to a comm (or destroyed) independently. Any thread. */
COLL_API coll_status_t coll_inproc_create(int world, coll_transport_t **out);

/* TCP transport (libuv): one process per rank, ranks meet through a
 * key/value store that rank 0 serves on master_addr:master_port.
 * Start from COLL_TCP_CONFIG_INIT; NULL strings take the environment
 * (COLL_SOCKET_IFNAME, COLL_AUTH_TOKEN) or the defaults. */
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
#define COLL_TCP_CONFIG_INIT                                              \
  {sizeof(coll_tcp_config_t), -1, 0, NULL, 0, NULL, NULL, 0, NULL,       \
   COLL_TCP_CONFIG_MAGIC}

/* Connects this rank to all others (rendezvous, then a full mesh) and
 * returns its endpoint. Blocks until every rank arrived or the timeout
 * passed (the error names the missing ranks). One thread. */
COLL_API coll_status_t coll_tcp_create(const coll_tcp_config_t *cfg,
                                       coll_transport_t **out);

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */
/* ------------------------------------------------------------------------ */

/* Creates a CPU-ring comm over transport `t` (ownership of t moves to the
 * comm, also on failure). cfg may be NULL. One thread. */
COLL_API coll_status_t coll_comm_create(coll_transport_t *t,
                                        const coll_comm_config_t *cfg,
                                        coll_comm_t **out);
/* Creates a comm from the torchrun environment: RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT (and COLL_* knobs). TCP transport for host
 * buffers; with the NCCL backend built and a GPU present, an NCCL comm whose
 * unique id travels through the same rendezvous store. One thread. */
COLL_API coll_status_t coll_comm_init_env(const coll_comm_config_t *cfg,
                                          coll_comm_t **out);
/* Destroys a comm: fails its queued work with COLL_ERR_ABORTED, releases the
 * transport and its reference on the abort handle. Safe while another thread
 * aborts it. NULL is a no-op. The thread that uses the comm. */
COLL_API coll_status_t coll_comm_destroy(coll_comm_t *c);
COLL_API int coll_comm_rank(const coll_comm_t *c); /* -1 for NULL */
COLL_API int coll_comm_size(const coll_comm_t *c); /* -1 for NULL */
/* "cpu" or "nccl"; NULL for NULL. Any thread. */
COLL_API const char *coll_comm_backend(const coll_comm_t *c);

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */
/* Every call: one thread per comm at a time; collectives on one comm run in
 * the order they were issued. `stream` is a cudaStream_t (NULL = default) for
 * device buffers and is ignored for host buffers on CPU comms. send == recv
 * means in place. Buffers of nonblocking calls stay the caller's
 * responsibility until coll_wait() returns. All ranks must make the same
 * calls with the same count, dtype, op and root; on CPU comms a disagreement
 * is detected and reported as COLL_ERR_LENGTH_MISMATCH on every rank.
 *
 * NCCL comms differ (README, "What differs on NCCL comms"):
 *  - blocking: the host waits until the GPU finished the work; a
 *    nonblocking call is on `stream` once NCCL took it, and coll_wait waits
 *    for the GPU. The timeout counts from when the work can start on the
 *    stream. NULL is the legacy default stream: pass a non-blocking one.
 *  - numerics are NCCL's: f16/bf16 accumulate in the element type; AVG
 *    scales each input by 1/n in the element type before summing; 8-bit
 *    sums wrap, and 8-bit AVG is refused (COLL_ERR_UNSUPPORTED).
 *  - no descriptor agreement: ranks that disagree get NCCL's behaviour.
 *  - point-to-point: tag must be 0 (messages between two ranks match in
 *    issue order), counts must match (*received is the count passed), and
 *    isend/irecv are launched together in one NCCL group at the first wait
 *    or test, so an exchange of isend+irecv on both ranks completes.
 * Returns: COLL_OK, INVALID_ARG/UNSUPPORTED (nothing was issued),
 * ABORTED, TIMEOUT, PEER_LOST, LENGTH_MISMATCH (CPU comms), BACKEND. A
 * failure other than a refused argument is sticky: the comm is aborted and
 * every later call reports it. */

COLL_API coll_status_t coll_allreduce(coll_comm_t *c, const void *send,
                                      void *recv, size_t count,
                                      coll_dtype_t dt, coll_op_t op,
                                      void *stream);
/* Allreduce of several buffers (in place) as one collective. */
COLL_API coll_status_t coll_allreduce_batch(coll_comm_t *c,
                                            const coll_buffer_t *bufs,
                                            size_t nbufs, coll_op_t op,
                                            void *stream);
/* In-place weighted sum: every rank's buffers are multiplied by its own
 * `factor`, then summed. Floating-point dtypes (NCCL comms: f16, bf16, f32,
 * f64, the factor rounded to the element type; NCCL >= 2.11). */
COLL_API coll_status_t coll_allreduce_premul_sum(coll_comm_t *c,
                                                 const coll_buffer_t *bufs,
                                                 size_t nbufs, float factor,
                                                 void *stream);
COLL_API coll_status_t coll_broadcast(coll_comm_t *c, void *buf, size_t count,
                                      coll_dtype_t dt, int root, void *stream);
/* recv holds world*count_per_rank elements, rank r's block at r*count. */
COLL_API coll_status_t coll_allgather(coll_comm_t *c, const void *send,
                                      void *recv, size_t count_per_rank,
                                      coll_dtype_t dt, void *stream);
/* send holds world*count_per_rank elements; rank r receives the reduction of
 * block r. */
COLL_API coll_status_t coll_reduce_scatter(coll_comm_t *c, const void *send,
                                           void *recv, size_t count_per_rank,
                                           coll_dtype_t dt, coll_op_t op,
                                           void *stream);
/* The reduction lands in recv on `root` only (recv may be NULL elsewhere). */
COLL_API coll_status_t coll_reduce(coll_comm_t *c, const void *send,
                                   void *recv, size_t count, coll_dtype_t dt,
                                   coll_op_t op, int root, void *stream);
COLL_API coll_status_t coll_barrier(coll_comm_t *c);
/* Tagged point-to-point; tag < COLL_TAG_RESERVED (NCCL comms: 0 only).
 * Messages between a pair on one tag arrive in order; different tags are
 * independent. peer must be another rank: sending to or receiving from
 * oneself is COLL_ERR_INVALID_ARG on every comm (a blocking send to self
 * could never complete where a send waits for its receive). A send may
 * wait until the receive is posted. */
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
/* Mixed precision: the dtype every rank should reduce in. The shared one if
 * all agree, else F64 if any rank holds F64, else F32. */
COLL_API coll_status_t coll_negotiate_dtype(coll_comm_t *c, coll_dtype_t local,
                                            coll_dtype_t *agreed);
/* Federated averaging with a deadline: rank 0 waits up to deadline_ms for
 * the others' contributions, averages its own and those that arrived in time,
 * and broadcasts the mean into every rank's `data`. *participants (may be
 * NULL) is the number of ranks averaged, the same on every rank. A late
 * contribution is discarded; the late rank still receives the result. */
COLL_API coll_status_t coll_federated_average(coll_comm_t *c, float *data,
                                              size_t count,
                                              int64_t deadline_ms,
                                              int *participants);

/* Nonblocking forms: same arguments plus the request, freed by coll_wait. */
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
                                            void *stream,
                                            coll_request_t **req);
COLL_API coll_status_t coll_ireduce(coll_comm_t *c, const void *send,
                                    void *recv, size_t count, coll_dtype_t dt,
                                    coll_op_t op, int root, void *stream,
                                    coll_request_t **req);
COLL_API coll_status_t coll_ibarrier(coll_comm_t *c, coll_request_t **req);
COLL_API coll_status_t coll_isend(coll_comm_t *c, const void *buf,
                                  size_t count, coll_dtype_t dt, int peer,
                                  uint32_t tag, coll_request_t **req);
COLL_API coll_status_t coll_irecv(coll_comm_t *c, void *buf, size_t count,
                                  coll_dtype_t dt, int peer, uint32_t tag,
                                  size_t *received, coll_request_t **req);
COLL_API coll_status_t coll_inegotiate_dtype(coll_comm_t *c,
                                             coll_dtype_t local,
                                             coll_dtype_t *agreed,
                                             coll_request_t **req);
COLL_API coll_status_t coll_ifederated_average(coll_comm_t *c, float *data,
                                               size_t count,
                                               int64_t deadline_ms,
                                               int *participants,
                                               coll_request_t **req);

/* Waits for a request, frees it and returns its status (with its error text
 * in coll_last_error()). The thread that uses the request's comm. */
COLL_API coll_status_t coll_wait(coll_request_t *req);
/* *done = 1 once the request finished (coll_wait then returns at once), 0
 * otherwise. Never blocks. The request stays valid until coll_wait. */
COLL_API coll_status_t coll_test(coll_request_t *req, int *done);

/* ------------------------------------------------------------------------ */
/* Abort handles                                                            */
/* ------------------------------------------------------------------------ */
/* Refcounted; every function below may be called from any thread at any
 * time, also while the comm is being destroyed or after it was. */

/* A handle bound to no comm yet, for coll_comm_config_t.abort_handle, so a
 * watchdog can end a comm's creation (an NCCL init waiting for a rank that
 * never comes) as well as its collectives. */
COLL_API coll_status_t coll_abort_handle_create(coll_abort_handle_t **out);
/* A new reference to the comm's abort handle; release it when done. */
COLL_API coll_status_t coll_comm_abort_handle(coll_comm_t *c,
                                              coll_abort_handle_t **out);
/* Aborts the comm: every collective in flight returns COLL_ERR_ABORTED
 * promptly, every later one fails at once with it. Idempotent; a no-op once
 * the comm was destroyed. */
COLL_API coll_status_t coll_abort(coll_abort_handle_t *h);
/* 1 once coll_abort was called on this handle, else 0 (0 for NULL). */
COLL_API int coll_is_aborted(const coll_abort_handle_t *h);
COLL_API void coll_abort_handle_release(coll_abort_handle_t *h);

/* ------------------------------------------------------------------------ */
/* NCCL: unique ids, per-rank comms, groups                                 */
/* ------------------------------------------------------------------------ */
/* Without the NCCL backend built, or on a machine without a CUDA driver or
 * without libnccl, these return COLL_ERR_NOT_AVAILABLE saying what is
 * missing. */

#define COLL_UNIQUE_ID_BYTES 128
typedef struct coll_unique_id {
  char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id_t;

/* A new id for one job; ship its bytes to every rank. Any thread. */
COLL_API coll_status_t coll_unique_id_create(coll_unique_id_t *out);
/* Per-rank NCCL comm on the current CUDA device. Waits until every rank
 * called it with the same id, bounded by cfg's timeout (COLL_ERR_TIMEOUT
 * naming the rank) and ended by cfg's abort handle (COLL_ERR_ABORTED); the
 * half-made comm is aborted, *out stays NULL. One thread. */
COLL_API coll_status_t coll_comm_init_rank(int rank, int world,
                                           const coll_unique_id_t *id,
                                           const coll_comm_config_t *cfg,
                                           coll_comm_t **out);

/* A group of comms over several devices of this process (one unique id,
 * one nonblocking ncclCommInitRankConfig per device inside one NCCL group,
 * as ncclCommInitAll does). The caller's current CUDA device is unchanged
 * by every group call. coll_group_create() is coll_group_create_config()
 * with a NULL config. One thread. */
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
 * whether or not the config gave one). Release it when done. Any thread. */
COLL_API coll_status_t coll_group_abort_handle(coll_group_t *g,
                                               coll_abort_handle_t **out);
/* bufs[i] and streams[i] belong to device i of the group: nbufs must equal
 * the group size, nstreams must be 0 (default streams) or the group size. */
COLL_API coll_status_t coll_group_allreduce(coll_group_t *g, void *const *bufs,
                                            int nbufs, size_t count,
                                            coll_dtype_t dt, coll_op_t op,
                                            void *const *streams,
                                            int nstreams);
COLL_API coll_status_t coll_group_broadcast(coll_group_t *g, void *const *bufs,
                                            int nbufs, size_t count,
                                            coll_dtype_t dt, int root,
                                            void *const *streams,
                                            int nstreams);
COLL_API int coll_group_size(const coll_group_t *g);
COLL_API const int *coll_group_devices(const coll_group_t *g);
/* Moves the group's per-device comms into comms[0..size-1] (one per rank, for
 * worker threads); the group is left empty. */
COLL_API coll_status_t coll_group_split(coll_group_t *g, coll_comm_t **comms);
COLL_API coll_status_t coll_group_destroy(coll_group_t *g);

#ifdef __cplusplus
}
#endif
#endif /* COLL_H */
