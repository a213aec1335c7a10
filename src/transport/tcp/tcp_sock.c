/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_sock.c: parsing and printing "host:port" text, creating tuned sockets
 * and the listening socket. */
#include "transport/tcp/tcp_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

/* Numeric host + port through getaddrinfo, which also understands IPv6
 * scopes ("fe80::1%eth0"). */
static coll_status_t resolve_numeric(const char *host, const char *port,
                                     struct sockaddr_storage *ss,
                                     socklen_t *len) {
  struct addrinfo hints, *res = NULL;
  int rc;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0 || res == NULL || res->ai_addrlen > sizeof *ss) {
    if (res != NULL) freeaddrinfo(res);
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp: '%s' is not a numeric IPv4/IPv6 address: %s", host,
                     rc != 0 ? gai_strerror(rc) : "no result");
  }
  memset(ss, 0, sizeof *ss);
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return COLL_OK;
}

coll_status_t coll__tcp_addr_parse(const char *text,
                                   struct sockaddr_storage *ss,
                                   socklen_t *len) {
  char host[COLL_TCP_ADDR_MAX];
  const char *port, *end;
  size_t hl;
  char *num_end = NULL;
  long p;
  if (text == NULL || strlen(text) >= sizeof host)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: address text too long");
  if (text[0] == '[') {
    end = strchr(text, ']');
    if (end == NULL || end[1] != ':') goto bad;
    hl = (size_t)(end - text - 1);
    memcpy(host, text + 1, hl);
    port = end + 2;
  } else {
    end = strrchr(text, ':');
    if (end == NULL) goto bad;
    hl = (size_t)(end - text);
    /* An IPv6 host must be bracketed, else its port is ambiguous. */
    if (memchr(text, ':', hl) != NULL) goto bad;
    memcpy(host, text, hl);
    port = end + 1;
  }
  host[hl] = '\0';
  p = strtol(port, &num_end, 10);
  if (hl == 0 || *port == '\0' || *num_end != '\0' || p < 1 || p > 65535)
    goto bad;
  return resolve_numeric(host, port, ss, len);
bad:
  return coll__err(COLL_ERR_INVALID_ARG,
                   "tcp: malformed address '%s' (want 1.2.3.4:5678 or "
                   "[::1]:5678)",
                   text);
}

coll_status_t coll__tcp_ip_parse(const char *ip, int port,
                                 struct sockaddr_storage *ss, socklen_t *len) {
  char ps[16];
  if (ip == NULL || ip[0] == '\0')
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: no address to bind to");
  snprintf(ps, sizeof ps, "%d", port);
  return resolve_numeric(ip, ps, ss, len);
}

void coll__tcp_addr_format(const struct sockaddr *sa, char *buf, size_t cap) {
  char ip[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "?";
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &s6->sin6_addr, ip, INET6_ADDRSTRLEN);
    /* A link-local address needs its scope to be dialled. */
    if (s6->sin6_scope_id != 0) {
      size_t n = strlen(ip);
      snprintf(ip + n, sizeof ip - n, "%%%u", (unsigned)s6->sin6_scope_id);
    }
    snprintf(buf, cap, "[%s]:%u", ip, (unsigned)ntohs(s6->sin6_port));
  } else if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
    snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(s4->sin_port));
  } else {
    snprintf(buf, cap, "?");
  }
}

int coll__tcp_socket(int family, int sock_buf) {
  int one = 1;
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  /* Frames are written whole (header + payload in one writev), so Nagle
   * would only add latency. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (sock_buf > 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sock_buf, sizeof sock_buf);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sock_buf, sizeof sock_buf);
  }
  return fd;
}

int coll__tcp_set_congestion(int fd, const char *name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name,
                 (socklen_t)strlen(name)) != 0)
    return -errno;
  return 0;
}

coll_status_t coll__tcp_listen(const char *bind_ip, int backlog, int sock_buf,
                               int *fd_out, char *addr, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  int fd = -1;
  coll_status_t s;
  *fd_out = -1;
  COLL_CHECK_GOTO(coll__tcp_ip_parse(bind_ip, 0, &ss, &len), s, out);
  fd = coll__tcp_socket(ss.ss_family, sock_buf);
  if (fd < 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: socket(): %s", strerror(-fd));
    fd = -1;
    goto out;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: cannot listen on %s: %s", bind_ip,
                  strerror(errno));
    goto out;
  }
  len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: getsockname(): %s", strerror(errno));
    goto out;
  }
  coll__tcp_addr_format((struct sockaddr *)&ss, addr, cap);
  *fd_out = fd;
  return COLL_OK;
out:
  if (fd >= 0) close(fd);
  return s;
}

/* The address of a socket's end without its port, for comparing hosts. */
static int end_ip(int fd, int peer, struct sockaddr_storage *ss) {
  socklen_t len = sizeof *ss;
  memset(ss, 0, sizeof *ss);
  if ((peer ? getpeername(fd, (struct sockaddr *)ss, &len)
            : getsockname(fd, (struct sockaddr *)ss, &len)) != 0)
    return -1;
  if (ss->ss_family == AF_INET)
    ((struct sockaddr_in *)ss)->sin_port = 0;
  else if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)ss)->sin6_port = 0;
  else
    return -1;
  return 0;
}

int coll__tcp_same_host(int fd) {
  struct sockaddr_storage a, b;
  if (end_ip(fd, 0, &a) != 0 || end_ip(fd, 1, &b) != 0) return 0;
  if (a.ss_family != b.ss_family) return 0;
  if (a.ss_family == AF_INET)
    return ((struct sockaddr_in *)&a)->sin_addr.s_addr ==
           ((struct sockaddr_in *)&b)->sin_addr.s_addr;
  return memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr,
                &((struct sockaddr_in6 *)&b)->sin6_addr,
                sizeof(struct in6_addr)) == 0;
}

void coll__tcp_set_buffers(int fd, int bytes) {
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}
