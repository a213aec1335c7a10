/* SPDX-License-Identifier: Apache-2.0 */
/* store_io.h: blocking socket I/O bounded by an absolute deadline, for the
 * store client (nonblocking sockets driven by poll(2)). */
#ifndef COLL_BOOTSTRAP_STORE_IO_H
#define COLL_BOOTSTRAP_STORE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "coll.h"

/* Connects a nonblocking TCP socket to addr before deadline_ms (coll__now_ms
 * based, < 0: none). Returns the socket, or -1 with *err = errno (ETIMEDOUT
 * when the deadline passed). */
int coll__io_connect(const struct sockaddr *addr, socklen_t addrlen,
                     int64_t deadline_ms, int *err);

/* Sends all of iov[0..n) (modified as it goes). `peer` names the other
 * end in error texts. COLL_ERR_TIMEOUT, COLL_ERR_PEER_LOST, COLL_ERR_SYSTEM. */
coll_status_t coll__io_sendv(int fd, struct iovec *iov, int n,
                             int64_t deadline_ms, const char *peer);
/* Receives exactly len bytes. COLL_ERR_PEER_LOST when the peer closes. */
coll_status_t coll__io_recv(int fd, void *buf, size_t len, int64_t deadline_ms,
                            const char *peer);

#endif
