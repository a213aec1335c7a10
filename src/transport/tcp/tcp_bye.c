/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_bye.c: the last words of destroy: a goodbye on every connection, and
 * waiting (within a budget) until each peer's kernel has them. A close
 * with bytes still unsent or unread resets the connection and drops what
 * is unsent: a peer that had not read our stream yet would never see the
 * goodbye and would take this rank for lost. */
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/log.h"
#include "transport/tcp/tcp_int.h"

/* How often the kernel's send queue is looked at again: it shrinks
 * without an event. */
#define BYE_TICK_MS 5

void coll__tcp_bye_queue(tcp_transport_t *t) {
  coll_origin_t o = {t->rank, COLL_CAUSE_DESTROYED, 0};
  int i;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    /* Also to a peer that said goodbye first: it may still be listening
     * while it tears down, and must not take our close for a crash. */
    if (c->fd < 0) continue;
    uv_mutex_lock(&c->smu);
    /* Sends never waited for (a broken contract) may have freed buffers:
     * no goodbye after them, the peer sees the connection closed. */
    if (coll__tcp_sq_has_user_sends(c) &&
        atomic_load(&c->bye_state) == TCP_BYE_NONE) {
      atomic_store(&c->bye_state, TCP_BYE_SENT);
      shutdown(c->fd, SHUT_WR);
    }
    coll__tcp_tx_farewell(c, &o);
    uv_mutex_unlock(&c->smu);
  }
}

/* 1 once c needs no more waiting: its goodbye is written and the peer's
 * kernel acknowledged everything (or the connection is gone). */
static int settled(tcp_conn_t *c) {
  int unacked = 0;
  int flushed;
  uv_mutex_lock(&c->smu);
  flushed = coll__tcp_tx_flush(c);
  uv_mutex_unlock(&c->smu);
  if (!flushed) return 0;
  return ioctl(c->fd, SIOCOUTQ, &unacked) != 0 || unacked == 0;
}

void coll__tcp_bye_finish(tcp_transport_t *t, int64_t deadline) {
  struct pollfd *pf = calloc((size_t)t->world, sizeof *pf);
  int *who = calloc((size_t)t->world, sizeof *who);
  char *eof = calloc((size_t)t->world, 1);
  char sink[4096];
  int i, n;
  if (pf == NULL || who == NULL || eof == NULL) goto out;
  for (;;) {
    int64_t left = deadline - coll__now_ms();
    n = 0;
    for (i = 0; i < t->world; i++) {
      tcp_conn_t *c = &t->conns[i];
      if (c->fd < 0 || eof[i] == 2 || settled(c)) continue;
      /* Bytes that arrive are read and dropped: a peer blocked sending to
       * us would otherwise never get to read our goodbye. */
      pf[n].fd = c->fd;
      pf[n].events =
          (short)((eof[i] ? 0 : POLLIN) |
                  (atomic_load(&c->bye_state) == TCP_BYE_FLUSHING ? POLLOUT
                                                                  : 0));
      pf[n].revents = 0;
      who[n++] = i;
    }
    if (n == 0) break;
    if (left <= 0) {
      COLL_INFO(COLL_LOG_NET,
                "tcp: rank %d: %d peers had not taken our goodbye in time",
                t->rank, n);
      break;
    }
    if (poll(pf, (nfds_t)n, left < BYE_TICK_MS ? (int)left : BYE_TICK_MS) < 0 &&
        errno != EINTR)
      break;
    for (i = 0; i < n; i++) {
      int k = who[i];
      if (pf[i].revents & (POLLERR | POLLNVAL)) {
        eof[k] = 2; /* reset: nothing more reaches the peer */
        continue;
      }
      /* Both sides shut and its end read: poll would only repeat it. */
      if ((pf[i].revents & POLLHUP) && eof[k]) {
        eof[k] = 2;
        continue;
      }
      if (pf[i].revents & POLLIN) {
        ssize_t got = recv(pf[i].fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got == 0) eof[k] = 1;
        if (got < 0 && errno != EAGAIN && errno != EINTR) eof[k] = 2;
      }
    }
  }
out:
  free(pf);
  free(who);
  free(eof);
}
