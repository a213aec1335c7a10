/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_accept.c: incoming connections while the mesh is built. Nobody is
 * trusted before its HELLO checks out, so nobody unauthenticated may hold
 * what a rank needs: the listener accepts without pause, a newcomer that
 * finds every slot taken (or no fd left) evicts the oldest unauthenticated
 * connection, a client must send its first byte within
 * COLL_TCP_FIRST_BYTE_MS, and refusals are logged at a rate no client
 * controls. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fd_budget.h"
#include "transport/tcp/tcp_mesh.h"

int coll__tcp_in_cap(void) {
  /* An eighth of the fds: the store and a listener of one process, and
   * what the application holds, still fit beside a full table. */
  return coll__fd_budget(8, COLL_TCP_IN_CAP_MIN, COLL_TCP_IN_CAP_MAX);
}

void coll__tcp_in_drop(tcp_mesh_t *m, tcp_hs_t *h, const char *why) {
  coll__refusal_note(&m->refusals, h->where, why);
  coll__tcp_hs_close(h);
}

/* Drops closed slots, keeping the order (oldest first). */
static void compact(tcp_mesh_t *m) {
  int i, k = 0;
  for (i = 0; i < m->nin; i++)
    if (m->ins[i].state != TCP_HS_IDLE) m->ins[k++] = m->ins[i];
  m->nin = k;
}

/* Closes the oldest connection that has not proven to be a rank; 0 when
 * there was none. */
static int evict_oldest(tcp_mesh_t *m, const char *why) {
  int i;
  for (i = 0; i < m->nin; i++) {
    tcp_hs_t *h = &m->ins[i];
    if (h->state == TCP_HS_IDLE || h->peer >= 0) continue;
    coll__tcp_in_drop(m, h, why);
    compact(m);
    return 1;
  }
  return 0;
}

/* A new slot for fd, with its challenge on the way. */
static coll_status_t take(tcp_mesh_t *m, int fd,
                          const struct sockaddr_storage *ss) {
  tcp_hs_t *h;
  if (m->nin == m->in_cap &&
      !evict_oldest(m, "evicted: the handshake table was full")) {
    /* Every slot holds a rank finishing its welcome: the newcomer waits
     * for none of them, it is turned away (a rank dials again). */
    char where[COLL_TCP_ADDR_MAX];
    coll__tcp_addr_format((const struct sockaddr *)ss, where, sizeof where);
    coll__refusal_note(&m->refusals, where, "the handshake table was full");
    close(fd);
    return COLL_OK;
  }
  h = &m->ins[m->nin++];
  memset(h, 0, sizeof *h);
  h->fd = fd;
  h->peer = -1;
  h->accepted_at = coll__now_ms();
  h->deadline =
      h->accepted_at +
      (m->hs_ms < COLL_TCP_FIRST_BYTE_MS ? m->hs_ms : COLL_TCP_FIRST_BYTE_MS);
  coll__tcp_addr_format((const struct sockaddr *)ss, h->where, sizeof h->where);
  if (coll__tcp_hs_nonce(h->nonce_s) != COLL_OK) return COLL_ERR_SYSTEM;
  coll__tcp_hs_challenge(&m->ctx, h->nonce_s, h->buf);
  coll__tcp_hs_io(h, COLL_TCP_K_CHALLENGE, 1, COLL_TCP_CHALLENGE_BYTES);
  return coll__tcp_hs_pump(m, h);
}

coll_status_t coll__tcp_accept_some(tcp_mesh_t *m) {
  int round;
  /* Bounded, so a flood of new connections cannot starve the handshakes
   * already in progress; the rest wait in the backlog for the next round. */
  for (round = 0; round < COLL_TCP_ACCEPTS_PER_ROUND; round++) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(m->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        /* Out of fds: free one from a stranger and try again; with none
         * to free, rest instead of spinning on the waiting connection. */
        if (evict_oldest(m,
                         "evicted: this process ran out of file "
                         "descriptors"))
          continue;
        m->accept_pause_until = coll__now_ms() + COLL_TCP_ACCEPT_PAUSE_MS;
      }
      return COLL_OK; /* EAGAIN, or a client gone already */
    }
    /* Linux copies TCP_NODELAY from the listener; say it for the rest. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    COLL_CHECK(take(m, fd, &ss));
  }
  return COLL_OK;
}

void coll__tcp_reap_incoming(tcp_mesh_t *m, int64_t now) {
  int i;
  char why[64];
  for (i = 0; i < m->nin; i++) {
    tcp_hs_t *h = &m->ins[i];
    if (h->state == TCP_HS_IDLE || now < h->deadline) continue;
    snprintf(why, sizeof why, "no valid handshake within %lld ms",
             (long long)(now - h->accepted_at));
    coll__tcp_in_drop(m, h, why);
  }
  compact(m);
}
