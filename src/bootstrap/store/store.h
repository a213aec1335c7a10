/* SPDX-License-Identifier: Apache-2.0 */
/* store.h: the rendezvous key/value store (server on rank 0, a client per
 * rank), like torch's TCPStore: set, get (waits for the key), wait for keys,
 * atomic add. Keys are short strings, values are bytes (capped). */
#ifndef COLL_BOOTSTRAP_STORE_H
#define COLL_BOOTSTRAP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef struct coll_store_server coll_store_server_t;
typedef struct coll_store coll_store_t;

#define COLL_STORE_KEY_MAX 256
#define COLL_STORE_VALUE_MAX (64 * 1024)

/* What the server holds for a job, whoever writes to it (a token keeps
 * strangers out; the caps keep a client that got in, or a store without a
 * token, from filling rank 0's memory). A rendezvous of `world` ranks
 * uses about ten keys and a few KiB per rank; the caps leave room for
 * many times that. */
typedef struct coll_store_caps {
  size_t keys;  /* entries: keys with a value, or waited for */
  size_t bytes; /* keys, values and a charge per entry (store_map.h) */
  int clients;  /* connections past their HELLO at once */
} coll_store_caps_t;

#define COLL_STORE_KEYS_BASE 64
#define COLL_STORE_KEYS_PER_RANK 32
#define COLL_STORE_BYTES_BASE ((size_t)1 << 20)
#define COLL_STORE_BYTES_PER_RANK ((size_t)COLL_STORE_VALUE_MAX)
#define COLL_STORE_CLIENTS_BASE 32
#define COLL_STORE_CLIENTS_PER_RANK 2
/* The world coll__store_server_start assumes (tests, and callers that do
 * not know theirs). */
#define COLL_STORE_WORLD_DEFAULT 256

/* The caps for a job of `world` ranks (at least 1). Any thread. */
void coll__store_caps_for(int world, coll_store_caps_t *out);

/* Serves the store on bind_ip:port (port 0: ephemeral, read it back with
 * coll__store_server_port), with the caps of a job of `world` ranks. A
 * request past a cap is refused with a text that names it, and the
 * client's connection is closed. The job's ranks say which rank they are
 * (coll__store_dial): a client that names no rank of the job, or one too
 * many, is logged with its address. token NULL/"" = no token. One
 * thread. */
coll_status_t coll__store_server_start_for(const char *bind_ip, int port,
                                           const char *token, int world,
                                           coll_store_server_t **out);
/* The same with the caps of a job of COLL_STORE_WORLD_DEFAULT ranks, for
 * clients that need not say which rank they are (tests, a caller's own
 * use). */
coll_status_t coll__store_server_start(const char *bind_ip, int port,
                                       const char *token,
                                       coll_store_server_t **out);
int coll__store_server_port(const coll_store_server_t *s);
void coll__store_server_stop(coll_store_server_t *s);

/* Connects a client (retrying until timeout_ms: the server may start late). */
coll_status_t coll__store_connect(const char *host, int port, const char *token,
                                  int64_t timeout_ms, coll_store_t **out);
coll_status_t coll__store_set(coll_store_t *st, const char *key,
                              const void *val, size_t len);
/* Waits until key exists (or timeout_ms passes: COLL_ERR_TIMEOUT naming the
 * key), then copies its value (COLL_ERR_LENGTH_MISMATCH if longer than cap). */
coll_status_t coll__store_get(coll_store_t *st, const char *key, void *buf,
                              size_t cap, size_t *len, int64_t timeout_ms);
coll_status_t coll__store_wait(coll_store_t *st, const char *const *keys,
                               int nkeys, int64_t timeout_ms);
coll_status_t coll__store_add(coll_store_t *st, const char *key, int64_t delta,
                              int64_t *result);
void coll__store_close(coll_store_t *st);
/* st as a coll_store_ops_t (set and get; a value longer than cap is
 * COLL_ERR_LENGTH_MISMATCH rather than a prefix). out does not own st. */
void coll__store_client_ops(coll_store_t *st, coll_store_ops_t *out);

#endif
