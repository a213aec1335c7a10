/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_sock.h: address text and socket setup shared by the mesh and tests.
 * Any thread. */
#ifndef COLL_TRANSPORT_TCP_SOCK_H
#define COLL_TRANSPORT_TCP_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include "coll.h"

/* Longest address text: "[" IPv6 with scope "]:" port. */
#define COLL_TCP_ADDR_MAX 96

/* Parses "1.2.3.4:5678", "[::1]:5678" or "[fe80::1%eth0]:5678" (numeric
 * hosts only). COLL_ERR_INVALID_ARG with a sentence if malformed. */
coll_status_t coll__tcp_addr_parse(const char *text,
                                   struct sockaddr_storage *ss, socklen_t *len);
/* Parses a numeric IPv4/IPv6 address (no port) and sets `port`. */
coll_status_t coll__tcp_ip_parse(const char *ip, int port,
                                 struct sockaddr_storage *ss, socklen_t *len);
/* Writes the text form of a socket address (the inverse of addr_parse). */
void coll__tcp_addr_format(const struct sockaddr *sa, char *buf, size_t cap);

/* A nonblocking, close-on-exec TCP socket with TCP_NODELAY and, when
 * sock_buf > 0, that send/receive buffer size (set before connect/listen so
 * the window scale covers it). Returns the fd or -errno. */
int coll__tcp_socket(int family, int sock_buf);

/* 1 when connected socket fd's two ends have one address (a connection
 * within a host: loopback, or the host's own address), else 0. */
int coll__tcp_same_host(int fd);

/* Sets fd's send and receive buffers to bytes (the kernel doubles them,
 * and caps them at net.core.wmem_max and rmem_max). */
void coll__tcp_set_buffers(int fd, int bytes);

/* Sets fd's congestion control (TCP_CONGESTION) to name. 0, or -errno:
 * ENOENT where the kernel has no such algorithm, EPERM where this process
 * may not choose it (net.ipv4.tcp_allowed_congestion_control). */
int coll__tcp_set_congestion(int fd, const char *name);

/* Listens on bind_ip with an ephemeral port; *fd is nonblocking and addr
 * receives the text to publish. */
coll_status_t coll__tcp_listen(const char *bind_ip, int backlog, int sock_buf,
                               int *fd, char *addr, size_t cap);

#endif
