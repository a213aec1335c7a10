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

/* Serves the store on bind_ip:port (port 0: ephemeral, read it back with
 * coll__store_server_port). token NULL/"" = no token. One thread. */
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
