/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_loop.c: the loop thread: one uv_poll_t per connection watches for
 * the peer closing, and for reads and writes of the pending work while no
 * caller's thread drives it; callers hand it work through their queues
 * plus uv_async_send. */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/common/liveness.h"
#include "transport/tcp/tcp_int.h"

static void on_poll(uv_poll_t *h, int status, int events);

/* 1 while a caller waits: it drives every connection with pending work
 * itself (tcp_ops.c), so this thread keeps off their data. A caller that
 * stops driving with work left kicks this thread, which then re-judges. */
static int callers_drive(const tcp_transport_t *t) {
  return atomic_load(&t->drivers) > 0;
}

/* Reads and/or writes what the socket allows, then watches what is still
 * wanted: the peer closing, always (it forces a read to the end); reads
 * and writes of pending work only while no caller drives it. Woken for
 * data a caller now drives, it leaves the data to the caller and drops the
 * watch: one late wakeup, not one per arrival. Loop thread only. */
static void service(tcp_conn_t *c, int readable, int writable, int force) {
  char why[TCP_WHY_MAX];
  tcp_ev_t ev = TCP_EV_NONE;
  int want = 0, driven = callers_drive(c->t), flushing;
  /* A desync query (tcp_desync.c): a peer's urgent byte says one is on its
   * way (read on to it, past the early-message budget: what the peer sent
   * before it is bounded), and while this rank asks, every answer is read
   * whoever else waits. */
  int drain = atomic_load(&c->drain), asking = atomic_load(&c->t->asking);
  uv_mutex_lock(&c->rmu);
  if ((readable && (!driven || asking)) || force || drain)
    ev = coll__tcp_rx_progress(c, force || drain, why);
  if (c->rstate < RS_CLOSED) {
    want |= UV_DISCONNECT;
    if ((!c->rpaused && atomic_load(&c->npend[TCP_REQ_RECV]) > 0 && !driven) ||
        atomic_load(&c->drain) || (asking && !c->rpaused))
      want |= UV_READABLE;
  }
  uv_mutex_unlock(&c->rmu);
  coll__tcp_handle_ev(c, ev, why);
  ev = TCP_EV_NONE;
  uv_mutex_lock(&c->smu);
  /* A queue of control frames only (a desync answer) is this thread's to
   * write: a caller polls for writing only where its own sends wait. */
  if (c->sq != NULL && (!driven || !coll__tcp_sq_has_user_sends(c))) {
    if (writable) ev = coll__tcp_tx_progress(c, why);
    if (c->sq != NULL) want |= UV_WRITABLE;
  }
  /* A farewell the failing thread could not write at once goes out from
   * here, whoever waits. */
  flushing = writable ? !coll__tcp_tx_flush(c)
                      : atomic_load(&c->bye_state) == TCP_BYE_FLUSHING;
  uv_mutex_unlock(&c->smu);
  coll__tcp_handle_ev(c, ev, why);
  if (coll__tcp_conn_stopped(c)) want = 0;
  if (flushing) want |= UV_WRITABLE;
  if (want == c->poll_events) return;
  c->poll_events = want;
  if (want == 0)
    uv_poll_stop(&c->poll);
  else
    uv_poll_start(&c->poll, want, on_poll);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  tcp_conn_t *c = h->data;
  if (status < 0) {
    /* libuv reports POLLERR (a reset, say) as an error and stops the
     * handle. Bytes that came before the reset, a goodbye perhaps, are
     * still readable: read them, and the socket's own error after them. */
    c->poll_events = 0;
    service(c, 1, 1, 1);
    return;
  }
  service(c, (events & UV_READABLE) != 0, (events & UV_WRITABLE) != 0,
          (events & UV_DISCONNECT) != 0);
}

/* A kick: the caller left work it does not drive (or stopped driving
 * some), or a failure or abort needs every watch re-judged. */
static void on_async(uv_async_t *a) {
  tcp_transport_t *t = a->data;
  int i, driven;
  if (atomic_load(&t->stopping)) {
    for (i = 0; i < t->world; i++)
      if (t->conns[i].poll_init)
        uv_close((uv_handle_t *)&t->conns[i].poll, NULL);
    if (t->hb_init) uv_close((uv_handle_t *)&t->hb_timer, NULL);
    if (t->urg_init) uv_close((uv_handle_t *)&t->urg, NULL);
    uv_close((uv_handle_t *)&t->async, NULL);
    return;
  }
  coll__tcp_answer_queries(t);
  driven = callers_drive(t);
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    int rd, wr;
    if (!c->poll_init) continue;
    rd = (atomic_load(&c->npend[TCP_REQ_RECV]) > 0 && !driven) ||
         atomic_load(&t->asking);
    wr = atomic_load(&c->npend[TCP_REQ_SEND]) > 0 && !driven;
    if (atomic_load(&c->bye_state) == TCP_BYE_FLUSHING) wr = 1;
    if (rd || wr || (c->poll_events & (UV_READABLE | UV_WRITABLE)) ||
        (c->poll_events != 0 && coll__tcp_conn_stopped(c)))
      service(c, rd, wr, 0);
  }
}

/* SIGURG: a peer's desync query is on its way on some connection, maybe
 * of another comm of this process (libuv hands the signal to every loop
 * that watches it). Watching the urgent byte with the sockets' poll
 * (EPOLLPRI) would wake this thread at every arrival of data too (the
 * kernel's readable wakeup carries EPOLLPRI), the very wakeups the caller
 * driving its own socket avoids: measured 1.6x slower at 1 MiB with 2
 * ranks. The signal comes only with a query. */
static void on_urgent(uv_signal_t *h, int signum) {
  tcp_transport_t *t = h->data;
  int i;
  (void)signum;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (c->poll_init && c->fd >= 0 && !coll__tcp_conn_stopped(c) &&
        coll__tcp_take_urgent(c))
      service(c, 0, 0, 0);
  }
}

static void on_heartbeat(uv_timer_t *h) {
  tcp_transport_t *t = h->data;
  if (atomic_load(&t->stopping) || atomic_load(&t->fail.status) != 0 ||
      atomic_load(&t->aborted)) {
    uv_timer_stop(h);
    return;
  }
  coll__tcp_heartbeat_tick(t);
}

/* Every fiftieth of the heartbeat timeout (common/silence.h): a silent
 * peer is found within the timeout plus 8 %. */
static int heartbeat_start(tcp_transport_t *t) {
  uint64_t tick;
  int rc;
  if (t->x.hb_timeout_ms <= 0 || t->world < 2) return 0;
  coll__silence_init(&t->hb_silence, t->x.hb_timeout_ms, coll__now_ms());
  tick = (uint64_t)t->hb_silence.tick_ms;
  rc = uv_timer_init(&t->loop, &t->hb_timer);
  if (rc != 0) return rc;
  t->hb_timer.data = t;
  t->hb_init = 1;
  return uv_timer_start(&t->hb_timer, on_heartbeat, tick, tick);
}

static void loop_main(void *arg) {
  tcp_transport_t *t = arg;
  coll__log_set_rank(t->rank);
  uv_run(&t->loop, UV_RUN_DEFAULT);
}

coll_status_t coll__tcp_loop_start(tcp_transport_t *t) {
  int rc, i;
  rc = uv_loop_init(&t->loop);
  if (rc != 0) goto fail;
  t->loop_init = 1;
  rc = uv_async_init(&t->loop, &t->async, on_async);
  if (rc != 0) goto fail;
  t->async.data = t;
  t->async_init = 1;
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (c->fd < 0) continue;
    rc = uv_poll_init_socket(&t->loop, &c->poll, c->fd);
    if (rc != 0) goto fail;
    c->poll.data = c;
    c->poll_init = 1;
    c->poll_events = UV_DISCONNECT;
    rc = uv_poll_start(&c->poll, UV_DISCONNECT, on_poll);
    if (rc != 0) goto fail;
    /* The kernel raises SIGURG at this process when an urgent byte
     * arrives on the socket. */
    (void)fcntl(c->fd, F_SETOWN, getpid());
  }
  rc = uv_signal_init(&t->loop, &t->urg);
  if (rc != 0) goto fail;
  t->urg.data = t;
  t->urg_init = 1;
  rc = uv_signal_start(&t->urg, on_urgent, SIGURG);
  if (rc != 0) goto fail;
  rc = heartbeat_start(t);
  if (rc != 0) goto fail;
  rc = uv_thread_create(&t->thread, loop_main, t);
  if (rc != 0) goto fail;
  t->thread_started = 1;
  return COLL_OK;
fail:
  return coll__err(COLL_ERR_SYSTEM, "tcp: starting the loop thread: %s",
                   uv_strerror(rc));
}

void coll__tcp_loop_kick(tcp_transport_t *t) {
  if (t->async_init) uv_async_send(&t->async);
}

void coll__tcp_loop_stop(tcp_transport_t *t) {
  int i;
  if (t->thread_started) {
    atomic_store(&t->stopping, 1);
    uv_async_send(&t->async);
    uv_thread_join(&t->thread);
    t->thread_started = 0;
  } else if (t->loop_init) {
    /* Never ran: close what was opened and let the loop settle. */
    for (i = 0; i < t->world; i++)
      if (t->conns[i].poll_init)
        uv_close((uv_handle_t *)&t->conns[i].poll, NULL);
    if (t->hb_init) uv_close((uv_handle_t *)&t->hb_timer, NULL);
    if (t->urg_init) uv_close((uv_handle_t *)&t->urg, NULL);
    if (t->async_init) uv_close((uv_handle_t *)&t->async, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
  }
  if (t->loop_init) uv_loop_close(&t->loop);
  t->loop_init = 0;
  t->async_init = 0;
  t->hb_init = 0;
  t->urg_init = 0;
}
