/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_heartbeat.c: heartbeats, so that a stopped, swapped-out or wedged
 * process is found while a call waits on it. The loop thread ticks every
 * fiftieth of the timeout (common/silence.h). On a link that sent nothing
 * for a tick, it sends a heartbeat frame; a link under load sends none. A
 * peer from which the kernel received nothing for the whole timeout, past
 * the longest gap a running peer leaves between two frames, while a
 * request on its connection is pending, is unresponsive: the transport
 * fails with it as the origin, and every peer hears so in the goodbyes.
 * Before it names a peer the tick reads what that peer sent and nobody
 * read yet (a goodbye that names this rank, after its own stall), and a
 * tick that comes a quarter of the timeout late (this rank was stopped)
 * judges nobody: silence it could not watch does not count. The kernel's
 * own clocks (TCP_INFO) say when data last went each way, so the data path
 * does no bookkeeping for this, and bytes count whether or not this side
 * has read them yet. A process busy in its own code keeps its loop
 * thread, which keeps sending heartbeats. */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/log.h"
#include "transport/tcp/tcp_int.h"

/* Sends a heartbeat on c if its send side is idle: nothing queued here,
 * nothing unacknowledged in the kernel. With the kernel's queue empty a
 * 24-byte send is taken whole or not at all, so a frame is never cut.
 * smu held. Returns 0, or -1 if only part went (the stream is broken). */
static int send_heartbeat(tcp_conn_t *c) {
  uint8_t hdr[COLL_TCP_FRAME_BYTES];
  int unacked = 0;
  ssize_t n;
  if (c->sq != NULL || atomic_load(&c->bye_state) != TCP_BYE_NONE ||
      coll__tcp_conn_stopped(c))
    return 0;
  if (ioctl(c->fd, SIOCOUTQ, &unacked) != 0 || unacked != 0) return 0;
  coll__tcp_frame_encode(hdr, COLL_TCP_K_HEARTBEAT, 0, (uint32_t)c->t->rank, 0,
                         0);
  n = send(c->fd, hdr, sizeof hdr, MSG_NOSIGNAL | MSG_DONTWAIT);
  /* Errors are the receive side's to report (it sees the reset too). */
  return n > 0 && (size_t)n < sizeof hdr ? -1 : 0;
}

/* The longest a running peer leaves its link without a frame, as this
 * side's clock sees it: a heartbeat goes out on the first tick after a
 * tick of silence (two ticks), and one more for a loop thread a little
 * late. */
#define HB_GAP_TICKS 3

/* Names c's peer unresponsive, silent for ms: the transport fails with it
 * as the origin. Loop thread. */
static void name_unresponsive(tcp_conn_t *c, int64_t ms) {
  coll_origin_t o = {c->peer, COLL_CAUSE_UNRESPONSIVE, (uint32_t)ms};
  coll__tcp_fail_transport(c->t, &o);
}

void coll__tcp_heartbeat_tick(tcp_transport_t *t) {
  coll_silence_t *w = &t->hb_silence;
  int64_t now = coll__now_ms(), gap = HB_GAP_TICKS * w->tick_ms;
  /* This rank was stalled: what its peers sent meanwhile is read first
   * (by its waits and its loop), and their silence counts from now. */
  int stalled = coll__silence_tick(w, now);
  int i;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int64_t heard;
    int cut;
    if (c->fd < 0 || coll__tcp_conn_stopped(c)) continue;
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;
    if ((int64_t)ti.tcpi_last_data_sent >= w->tick_ms) {
      uv_mutex_lock(&c->smu);
      cut = send_heartbeat(c);
      uv_mutex_unlock(&c->smu);
      if (cut != 0) {
        coll_origin_t o = coll__origin_local(t->rank, COLL_ERR_INTERNAL);
        COLL_WARN(COLL_LOG_NET, "tcp: a heartbeat to rank %d went out in part",
                  c->peer);
        coll__tcp_fail_transport(t, &o);
        return;
      }
    }
    heard = now - (int64_t)ti.tcpi_last_data_recv;
    if (stalled || !coll__silence_over(w, heard, now, gap) ||
        atomic_load(&c->npend[TCP_REQ_RECV]) +
                atomic_load(&c->npend[TCP_REQ_SEND]) ==
            0)
      continue;
    /* What the peer said before it went silent speaks first. */
    if (coll__tcp_read_before_judging(c)) return;
    name_unresponsive(c, coll__silence_watched_ms(w, heard, now));
    return;
  }
}
