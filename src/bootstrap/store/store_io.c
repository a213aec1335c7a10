/* SPDX-License-Identifier: Apache-2.0 */
/* store_io.c: deadline-bounded connect, send and receive on nonblocking
 * sockets. poll(2) does the waiting, so every call returns by its deadline
 * whatever the peer does. */
#include "bootstrap/store/store_io.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

/* Waits for `events` on fd: 1 ready, 0 deadline passed, -1 error (errno). */
static int io_poll(int fd, short events, int64_t deadline_ms) {
  struct pollfd p;
  for (;;) {
    int64_t left = coll__remaining_ms(deadline_ms);
    int rc;
    p.fd = fd;
    p.events = events;
    p.revents = 0;
    /* Polls once even when the deadline passed, so what is ready counts;
     * wakes at least every second so a far deadline needs no large int. */
    rc = poll(&p, 1, (left < 0 || left > 1000) ? 1000 : (int)left);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -1;
    if (deadline_ms >= 0 && left == 0) return 0;
  }
}

int coll__io_connect(const struct sockaddr *addr, socklen_t addrlen,
                     int64_t deadline_ms, int *err) {
  int fd =
      socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1, soerr = 0, rc;
  socklen_t sl = sizeof soerr;
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (connect(fd, addr, addrlen) != 0) {
    if (errno != EINPROGRESS) goto fail;
    rc = io_poll(fd, POLLOUT, deadline_ms);
    if (rc == 0) errno = ETIMEDOUT;
    if (rc <= 0) goto fail;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) goto fail;
    if (soerr != 0) {
      errno = soerr;
      goto fail;
    }
  }
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
fail:
  *err = errno;
  close(fd);
  return -1;
}

coll_status_t coll__io_sendv(int fd, struct iovec *iov, int n,
                             int64_t deadline_ms, const char *peer) {
  while (n > 0) {
    struct msghdr m;
    ssize_t w;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    /* MSG_NOSIGNAL: a peer that went away is an error, not a SIGPIPE. */
    w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      int rc;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (errno == EPIPE || errno == ECONNRESET)
          return coll__err(COLL_ERR_PEER_LOST, "store %s: connection lost: %s",
                           peer, strerror(errno));
        return coll__err(COLL_ERR_SYSTEM, "store %s: send: %s", peer,
                         strerror(errno));
      }
      rc = io_poll(fd, POLLOUT, deadline_ms);
      if (rc == 0)
        return coll__err(COLL_ERR_TIMEOUT, "store %s: send timed out", peer);
      if (rc < 0)
        return coll__err(COLL_ERR_SYSTEM, "store %s: poll: %s", peer,
                         strerror(errno));
      continue;
    }
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
  return COLL_OK;
}

coll_status_t coll__io_recv(int fd, void *buf, size_t len, int64_t deadline_ms,
                            const char *peer) {
  char *p = buf;
  while (len > 0) {
    ssize_t r = recv(fd, p, len, 0);
    int rc;
    if (r > 0) {
      p += r;
      len -= (size_t)r;
      continue;
    }
    if (r == 0)
      return coll__err(COLL_ERR_PEER_LOST, "store %s closed the connection",
                       peer);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET)
        return coll__err(COLL_ERR_PEER_LOST, "store %s: connection reset",
                         peer);
      return coll__err(COLL_ERR_SYSTEM, "store %s: recv: %s", peer,
                       strerror(errno));
    }
    rc = io_poll(fd, POLLIN, deadline_ms);
    if (rc == 0)
      return coll__err(COLL_ERR_TIMEOUT, "store %s: no reply in time", peer);
    if (rc < 0)
      return coll__err(COLL_ERR_SYSTEM, "store %s: poll: %s", peer,
                       strerror(errno));
  }
  return COLL_OK;
}
