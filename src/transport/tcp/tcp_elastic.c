/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_elastic.c: the control connections of an elastic TCP endpoint: the
 * setup (a listener whose address travels once over the fresh data
 * connections, then a mesh of its own), the departure of a rank that
 * aborted, and the framed messages of the survivors' agreement. */
#include "transport/tcp/tcp_elastic.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/le.h"
#include "core/log.h"
#include "transport/tcp/tcp_mesh.h"

int coll__tcp_elastic_wanted(void) { return coll__knob(COLL_ENV_ELASTIC) != 0; }

/* Moves exactly len bytes in (is_send 0) or out of buf on fd before the
 * deadline. COLL_ERR_PEER_LOST when the peer closed or reset its end. */
static coll_status_t io_exact(int fd, void *buf, size_t len, int is_send,
                              int64_t deadline, int peer) {
  char *p = buf;
  size_t done = 0;
  while (done < len) {
    struct pollfd pf = {fd, (short)(is_send ? POLLOUT : POLLIN), 0};
    int64_t left;
    ssize_t n =
        is_send ? send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                : recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0 && !is_send)
      return coll__err(COLL_ERR_PEER_LOST, "rank %d closed its connection",
                       peer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return coll__err(COLL_ERR_PEER_LOST, "rank %d: %s", peer,
                       strerror(errno));
    left = coll__remaining_ms(deadline);
    if (deadline >= 0 && left <= 0)
      return coll__err(COLL_ERR_TIMEOUT, "rank %d: no progress in time", peer);
    if (poll(&pf, 1, deadline < 0 || left > 1000 ? 1000 : (int)left) < 0 &&
        errno != EINTR)
      return coll__err(COLL_ERR_SYSTEM, "poll(): %s", strerror(errno));
  }
  return COLL_OK;
}

typedef struct addr_book {
  int world;
  char (*addr)[COLL_TCP_ADDR_MAX];
} addr_book_t;

static coll_status_t book_publish(void *ctx, int rank, const char *addr) {
  (void)ctx;
  (void)rank;
  (void)addr;
  return COLL_OK; /* every peer has it already */
}

static coll_status_t book_lookup(void *ctx, int rank, char *addr, size_t cap,
                                 int64_t deadline_ms) {
  addr_book_t *b = ctx;
  (void)deadline_ms;
  if (rank < 0 || rank >= b->world || b->addr[rank][0] == '\0')
    return coll__err(COLL_ERR_INVALID_ARG, "no address for rank %d", rank);
  snprintf(addr, cap, "%s", b->addr[rank]);
  return COLL_OK;
}

/* Swaps the control listeners' addresses: a length (2) and the text, on
 * every data connection, before its first frame. */
static coll_status_t swap_addrs(tcp_transport_t *t, const char *mine,
                                addr_book_t *b, int64_t deadline) {
  uint8_t hdr[2];
  size_t len = strlen(mine);
  int j;
  coll__put_le16(hdr, (uint16_t)len);
  for (j = 0; j < t->world; j++) {
    if (j == t->rank) continue;
    COLL_CHECK(io_exact(t->conns[j].fd, hdr, 2, 1, deadline, j));
    COLL_CHECK(io_exact(t->conns[j].fd, (void *)mine, len, 1, deadline, j));
  }
  for (j = 0; j < t->world; j++) {
    uint16_t n;
    if (j == t->rank) continue;
    COLL_CHECK(io_exact(t->conns[j].fd, hdr, 2, 0, deadline, j));
    n = coll__get_le16(hdr);
    if (n == 0 || n >= COLL_TCP_ADDR_MAX)
      return coll__err(COLL_ERR_PROTOCOL,
                       "rank %d sent a control address of %u bytes", j, n);
    COLL_CHECK(io_exact(t->conns[j].fd, b->addr[j], n, 0, deadline, j));
    b->addr[j][n] = '\0';
  }
  return COLL_OK;
}

static char *dup_text(const char *s) {
  char *d;
  if (s == NULL) return NULL;
  d = malloc(strlen(s) + 1);
  if (d != NULL) memcpy(d, s, strlen(s) + 1);
  return d;
}

coll_status_t coll__tcp_elastic_setup(tcp_transport_t *t,
                                      const coll_tcp_opts_t *o,
                                      const coll_tcp_xopts_t *x) {
  tcp_elastic_t *el = calloc(1, sizeof *el);
  addr_book_t book = {t->world, NULL};
  char mine[COLL_TCP_ADDR_MAX], job[512];
  coll_tcp_rdv_t rdv = {&book, book_publish, book_lookup};
  coll_tcp_opts_t co = *o;
  int lfd = -1, i;
  coll_status_t s;
  if (el == NULL) return coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
  t->el = el;
  el->ctl = malloc((size_t)t->world * sizeof *el->ctl);
  for (i = 0; el->ctl != NULL && i < t->world; i++) el->ctl[i] = -1;
  book.addr = calloc((size_t)t->world, sizeof *book.addr);
  el->job_id = dup_text(o->job_id);
  el->token =
      o->token != NULL && o->token[0] != '\0' ? dup_text(o->token) : NULL;
  if (el->ctl == NULL || book.addr == NULL || el->job_id == NULL ||
      (o->token != NULL && o->token[0] != '\0' && el->token == NULL)) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto out;
  }
  snprintf(el->bind_ip, sizeof el->bind_ip, "%s", o->bind_ip);
  el->timeout_ms = o->timeout_ms;
  el->x = *x;
  if (t->world < 2) {
    s = COLL_OK;
    goto out;
  }
  COLL_CHECK_GOTO(coll__tcp_listen(o->bind_ip, COLL_TCP_BACKLOG, 0, &lfd, mine,
                                   sizeof mine),
                  s, out);
  COLL_CHECK_GOTO(swap_addrs(t, mine, &book, coll__deadline(o->timeout_ms)), s,
                  out);
  snprintf(job, sizeof job, "%s/elastic/control", o->job_id);
  co.job_id = job;
  s = coll__tcp_mesh_connect_fd(&co, &rdv, x, lfd, el->ctl);
  lfd = -1;
out:
  if (lfd >= 0) close(lfd);
  free(book.addr);
  if (s != COLL_OK) coll__err_prefix("tcp: control connections");
  return s;
}

void coll__tcp_elastic_leave(tcp_transport_t *t) {
  int i;
  if (t->el == NULL || atomic_load(&t->el->shrinking) ||
      atomic_exchange(&t->el->left, 1))
    return;
  for (i = 0; i < t->world; i++)
    if (t->el->ctl[i] >= 0) shutdown(t->el->ctl[i], SHUT_RDWR);
}

void coll__tcp_elastic_free(tcp_transport_t *t) {
  tcp_elastic_t *el = t->el;
  int i;
  if (el == NULL) return;
  for (i = 0; el->ctl != NULL && i < t->world; i++)
    if (el->ctl[i] >= 0) close(el->ctl[i]);
  free(el->ctl);
  free(el->job_id);
  free(el->token);
  free(el);
  t->el = NULL;
}

/* Agreement messages: a length (4), then the message. */
static coll_status_t link_send(void *ctx, int peer, const void *msg, size_t len,
                               int64_t deadline_ms) {
  tcp_transport_t *t = ctx;
  uint8_t hdr[4];
  coll__put_le32(hdr, (uint32_t)len);
  COLL_CHECK(io_exact(t->el->ctl[peer], hdr, 4, 1, deadline_ms, peer));
  return io_exact(t->el->ctl[peer], (void *)msg, len, 1, deadline_ms, peer);
}

static coll_status_t link_recv(void *ctx, int peer, void *buf, size_t cap,
                               size_t *len, int64_t deadline_ms) {
  tcp_transport_t *t = ctx;
  uint8_t hdr[4];
  uint32_t n;
  COLL_CHECK(io_exact(t->el->ctl[peer], hdr, 4, 0, deadline_ms, peer));
  n = coll__get_le32(hdr);
  if (n > cap) {
    /* Cut off: it cannot be read past, and the peer broke the protocol. */
    shutdown(t->el->ctl[peer], SHUT_RDWR);
    return coll__err(COLL_ERR_PROTOCOL,
                     "rank %d announced a shrink message of %u bytes", peer, n);
  }
  COLL_CHECK(io_exact(t->el->ctl[peer], buf, n, 0, deadline_ms, peer));
  *len = n;
  return COLL_OK;
}

void coll__tcp_elastic_links(tcp_transport_t *t, coll_shrink_links_t *l) {
  l->ctx = t;
  l->rank = t->rank;
  l->world = t->world;
  l->send = link_send;
  l->recv = link_recv;
}
