/* SPDX-License-Identifier: Apache-2.0 */
/* store_cli.h: the store client's internals, shared by store_client.c
 * (connect, handshake, one request/reply exchange) and store_calls.c (set,
 * get, wait, add). */
#ifndef COLL_BOOTSTRAP_STORE_CLI_H
#define COLL_BOOTSTRAP_STORE_CLI_H

#include <sys/uio.h>
#include <uv.h>

#include "bootstrap/store/store_ext.h"
#include "bootstrap/store/store_proto.h"

/* A reply may take this much longer than the timeout the request gave the
 * server, before the client stops waiting for it. */
#define COLL_STORE_REPLY_GRACE_MS 5000

/* A GET or WAIT asks the server to give up this long before the client's
 * end (coll__store_set_end), so that the server's TIMEOUT reply arrives
 * before the client stops listening for it. */
#define COLL_STORE_END_MARGIN_MS 250

struct coll_store {
  uv_mutex_t mu; /* one exchange at a time on the socket */
  int fd;
  coll_status_t broken;  /* an exchange failed halfway (its status): the
                            stream is out of step, so every later call
                            fails; COLL_OK while usable */
  int64_t io_timeout_ms; /* bound for SET/ADD replies (< 0: none) */
  int64_t end_ms;        /* no call waits past this (absolute, < 0: none) */
  char broke[256];       /* why it broke: the failed exchange's text */
  char peer[300];        /* "host:port", for messages */
};

/* The absolute deadline of an exchange that would wait until deadline_ms,
 * cut at the client's end. Lock held. */
int64_t coll__store_io_deadline(const coll_store_t *st, int64_t deadline_ms);
/* How long the server should wait for a GET/WAIT that asked timeout_ms
 * (0: only check, < 0: no bound): at most until the client's end less
 * the margin, and only check once that is near. Lock held. */
int64_t coll__store_wait_ms(const coll_store_t *st, int64_t timeout_ms);

/* Sends a request (header + iov) and reads the reply header. A reply whose
 * code is BAD or AUTH is turned into COLL_ERR_PROTOCOL with the server's
 * text. On any failure the client is marked broken. Lock held. */
coll_status_t coll__store_exchange(coll_store_t *st, uint8_t op, uint16_t nkeys,
                                   int64_t arg, struct iovec *iov, int niov,
                                   int64_t deadline_ms, coll_store_hdr_t *rep);
/* Marks the client broken after a failed exchange with status s (which
 * later calls repeat) and returns s. Lock held. */
coll_status_t coll__store_break(coll_store_t *st, coll_status_t s);
/* Reads `len` reply body bytes into buf (NULL: discards them). Lock held. */
coll_status_t coll__store_read_body(coll_store_t *st, void *buf, size_t len,
                                    int64_t deadline_ms);
/* Checks a key from the caller: non-NULL, 1..COLL_STORE_KEY_MAX bytes. */
coll_status_t coll__store_check_key(const char *what, const char *key,
                                    size_t *len);

#endif
