/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_transport.c: creating the TCP transport (mesh, then loop thread),
 * aborting it from any thread, and tearing it down with a goodbye. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/cores.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/common/liveness.h"
#include "transport/provider.h"
#include "transport/tcp/tcp_elastic.h"
#include "transport/tcp/tcp_int.h"
#include "transport/tcp/tcp_sock.h"

/* How long destroy tries to get its goodbyes to the peers, in total. */
#define GOODBYE_BUDGET_MS 1000
/* The ring's pipeline segment over sockets (where blocks are short, see
 * TCP_SEGMENT_BYTES_LARGE). 1 MiB amortised the hand-off
 * of every message to the loop thread; since a waiting caller drives its
 * sockets itself (tcp_ops.c) a smaller segment overlaps the reduction
 * with the transfer for less. coll-perf --peer-protocol, 2 ranks over
 * loopback, 5 interleaved runs, medians, busbw GB/s:
 *
 *   segment   1M     16M    64M
 *   128K      2.47   2.17   2.05
 *   256K      2.49   2.30   2.32
 *   512K      2.00   2.02   2.01
 *   1M        2.03   2.02   1.89
 *
 * (ranks unbound). With 4 ranks on the 2 cores 256K and 1M came out even
 * unbound (within 4 %, 4 runs each), and 1M ahead once coll-run bound
 * the ranks: TCP_SEGMENT_BYTES_CROWDED. */
#define TCP_SEGMENT_BYTES (256u << 10)
/* Where the host's ranks outnumber its cores, every message costs a
 * switch between ranks: 4 ranks on 2 cores, bound (coll-run), 3
 * interleaved runs, busbw GB/s:
 *
 *   segment   1M          16M         64M
 *   256K      1.17-1.41   0.65-0.79   0.57-0.81
 *   1M        1.38-1.44   0.97-1.01   0.94-0.99
 *
 * With 2 ranks on the 2 cores 256K stays ahead (1 MiB: 3.6-4.1 against
 * 1.7-3.0). */
#define TCP_SEGMENT_BYTES_CROWDED (1u << 20)
/* What segments grow to for long blocks (algo/ring.c: an eighth of the
 * block, from 256 KiB up to this; within a host only, cpu_comm.c). 2
 * ranks over loopback, bound (coll-run), coll-perf -b 1M -e 64M -n 30
 * -c 0, 5 interleaved runs, medians of in-place busbw, GB/s:
 *
 *   segment   1M    2M    4M    8M    16M   32M   64M
 *   256K      4.17  3.74  3.86  1.68  1.76  1.73  1.74
 *   1M        3.26  1.88  1.94  1.95  1.87  1.77  1.73
 *   growing   3.52  3.81  4.08  1.81  1.87  1.97  1.97
 *
 * Blocks of up to 2 MiB keep 256 KiB (with 1 MiB a 1 MiB allreduce of 2
 * ranks is one segment per block: nothing overlaps), longer ones take
 * fewer, longer messages. Alone at 1 MiB (coll-perf --peer-protocol -b 1M
 * -e 1M, 8 alternations) growing ran at 4.07 against 1.87 for 1 MiB
 * segments at every size, and in the full peer-protocol sweep at 1.15x
 * (16 and 64 MiB even). */
#define TCP_SEGMENT_BYTES_LARGE (1u << 20)

void coll__tcp_xopts_default(coll_tcp_xopts_t *x) {
  x->frame_cap = COLL_TCP_FRAME_CAP_DEFAULT;
  x->hs_timeout_ms = COLL_TCP_HS_TIMEOUT_DEFAULT;
  x->sock_buf = COLL_TCP_SOCK_BUF_DEFAULT;
  x->local_buf = -1;
  x->host_cores = 0;
  x->spin_ns = -1;
  x->hb_timeout_ms = -1;
  x->congestion[0] = '\0';
}

/* COLL_HEARTBEAT_TIMEOUT_MS into x when x leaves it to the environment. */
static coll_status_t heartbeat_from_env(coll_tcp_xopts_t *x) {
  if (x->hb_timeout_ms < 0) x->hb_timeout_ms = coll__hb_timeout_ms();
  return COLL_OK;
}

/* COLL_TCP_SPIN_US and COLL_TCP_LOCAL_BUFFER_BYTES into x where x leaves
 * them to the environment. */
static void knobs_from_env(coll_tcp_xopts_t *x) {
  if (x->spin_ns < 0) x->spin_ns = coll__knob(COLL_ENV_TCP_SPIN_US) * 1000;
  if (x->local_buf < 0)
    x->local_buf = (int)coll__knob(COLL_ENV_TCP_LOCAL_BUFFER_BYTES);
}

/* Connections within a host whose ranks outnumber its cores may get
 * buffers of their own (x.local_buf, off by default). There every message
 * costs a switch between ranks, and deep buffers let a ring's sender copy
 * megabytes in ahead of its receiver, which reads them back after they
 * left the caches. With 512 KiB against 4 MiB, 4 ranks on 2 cores, rough
 * times on a loaded machine (bench/tcp-profile.sh, interleaved): 16 MiB
 * 1.2x-2.2x faster in 10 of 12 runs (even in one, 1.4x slower in one);
 * 1 MiB 1.02x-1.4x slower in 5 of 7, 1.4x-1.5x faster in 2; 1 and 2 MiB
 * buffers no faster than 4 MiB at 16 MiB (3 runs). More calls and switches
 * per allreduce (16 MiB: 267-354 against 147-216 calls, 51-76 against
 * 23-60 switches). With a core per rank the deep buffers held their own
 * (2 ranks, 64 MiB), and across hosts they cover the links' round
 * trips. */
static void local_buffers(tcp_transport_t *t) {
  unsigned local = 1, cores = t->x.host_cores;
  int i;
  if (t->x.local_buf <= 0 || t->world < 2) return;
  for (i = 0; i < t->world; i++)
    if (t->conns[i].fd >= 0 && coll__tcp_same_host(t->conns[i].fd)) local++;
  if (cores == 0) cores = coll__host_cores();
  if (local <= cores) return;
  for (i = 0; i < t->world; i++) {
    int fd = t->conns[i].fd;
    if (fd >= 0 && coll__tcp_same_host(fd))
      coll__tcp_set_buffers(fd, t->x.local_buf);
  }
}

/* One line of a /proc/sys file into buf, its newline dropped ("?" where
 * it cannot be read). */
static void sysctl_line(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "re");
  snprintf(buf, cap, "?");
  if (f == NULL) return;
  if (fgets(buf, (int)cap, f) == NULL) snprintf(buf, cap, "?");
  buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

/* COLL_TCP_CONGESTION into x when x leaves it to the environment. The
 * name is tried on a socket of its own, so that one the kernel refuses is
 * an error here that says what this host offers, not a mesh that fails
 * later. (Why a job would choose: on bench/multihost.sh's shaped links
 * BBR, where it is the host's default, sends about 3 % of the bytes again;
 * see docs/multihost.md, "Measuring it".) */
static coll_status_t congestion_from_env(coll_tcp_xopts_t *x) {
  const char *v = coll__knob_text(COLL_ENV_TCP_CONGESTION);
  const char *why, *list, *who;
  char offered[256];
  int fd, rc;
  if (x->congestion[0] == '\0') {
    if (v == NULL) return COLL_OK;
    /* Its length was checked against COLL_TCP_CC_NAME_MAX - 1 (env.h). */
    snprintf(x->congestion, sizeof x->congestion, "%s", v);
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return coll__err(COLL_ERR_SYSTEM, "tcp: socket(): %s", strerror(errno));
  rc = coll__tcp_set_congestion(fd, x->congestion);
  close(fd);
  if (rc == 0) return COLL_OK;
  if (rc == -EPERM) {
    why = "this process may not choose it";
    list = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    who = "this process may choose";
  } else {
    why = rc == -ENOENT ? "the kernel has no such algorithm" : strerror(-rc);
    list = "/proc/sys/net/ipv4/tcp_available_congestion_control";
    who = "this host offers";
  }
  sysctl_line(list, offered, sizeof offered);
  return coll__err(COLL_ERR_INVALID_ARG,
                   "tcp: congestion control '%s' (COLL_TCP_CONGESTION) "
                   "refused: %s; %s: %s",
                   x->congestion, why, who, offered);
}

/* Ends the transport for a failure that started at o, or at the origin
 * this rank already holds: its own transport's first, else a connection's
 * (a peer that left or broke the protocol). Every pending request fails,
 * every peer hears the origin in a goodbye, then the sockets' write sides
 * are shut. Any thread. */
void coll__tcp_fail_hook(void *ctx, const coll_origin_t *o) {
  tcp_transport_t *t = ctx;
  coll_origin_t use = *o;
  int i;
  atomic_store(&t->aborted, 1);
  if (atomic_load(&t->fail.status) == 0)
    for (i = 0; i < t->world; i++)
      if (atomic_load_explicit(&t->conns[i].fail.status,
                               memory_order_acquire) != 0) {
        use = t->conns[i].fail.origin;
        break;
      }
  coll__tcp_fail_transport(t, &use);
}

static void tcp_leave(void *ctx) { coll__tcp_elastic_leave(ctx); }

/* The owner's abort: this rank is the origin, unless a failure that
 * started elsewhere came first. Any thread. */
static void tcp_abort(void *ctx) {
  tcp_transport_t *t = ctx;
  coll_origin_t o = {t->rank, COLL_CAUSE_ABORTED, 0};
  if (!atomic_exchange(&t->aborted, 1))
    COLL_INFO(COLL_LOG_NET, "tcp: rank %d: aborting the transport", t->rank);
  coll__tcp_fail_hook(ctx, &o);
}

/* The caller is about to wait on another endpoint (its host endpoint):
 * the work it posted here and does not drive goes to the loop thread,
 * which learns of work only when kicked. */
static void tcp_kick(void *ctx) {
  tcp_transport_t *t = ctx;
  if (atomic_load(&t->npend_all) > 0) coll__tcp_loop_kick(t);
}

static int tcp_origin(void *ctx, coll_origin_t *o) {
  tcp_transport_t *t = ctx;
  if (atomic_load_explicit(&t->fail.status, memory_order_acquire) == 0)
    return 0;
  *o = t->fail.origin;
  return 1;
}

/* Requests never waited for (a broken contract) are freed, not leaked. */
static void free_leftovers(tcp_conn_t *c) {
  coll_match_item_t *it;
  tcp_req_t *r;
  while ((it = c->posted.head) != NULL) {
    coll__match_remove(&c->posted, it);
    free(COLL_MATCH_OWNER(it, tcp_req_t, m));
  }
  while ((r = c->sq) != NULL) {
    c->sq = r->next;
    free(r);
  }
  free(c->cur_req);
  c->cur_req = NULL;
}

/* Closing a socket with unread bytes (a peer's goodbye, say) sends a reset
 * instead of a FIN; read what is there first. */
static void drain_close(int fd) {
  char sink[4096];
  int i;
  for (i = 0; i < 256; i++)
    if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
  close(fd);
}

static void tcp_destroy(void *ctx) {
  tcp_transport_t *t = ctx;
  int64_t deadline = coll__now_ms() + GOODBYE_BUDGET_MS;
  int i;
  if (t == NULL) return;
  atomic_store(&t->closing, 1);
  if (t->thread_started) coll__tcp_bye_queue(t);
  coll__tcp_loop_stop(t);
  if (t->conns != NULL) coll__tcp_bye_finish(t, deadline);
  for (i = 0; t->conns != NULL && i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    if (c->fd >= 0) drain_close(c->fd);
    free_leftovers(c);
    free(c->tail);
    coll__tcp_rx_free(c);
    uv_mutex_destroy(&c->rmu);
    uv_mutex_destroy(&c->smu);
  }
  coll__tcp_elastic_free(t);
  coll__tcp_req_cache_free(t);
  if (t->req_mu_init) uv_mutex_destroy(&t->req_mu);
  if (t->wake_fd >= 0) close(t->wake_fd);
  free(t->conns);
  free(t);
}

/* The TCP provider. An endpoint made without COLL_ELASTIC=1 has no
 * control connections and refuses to shrink (tcp_shrink.c). */
static const coll_provider_t tcp_provider = {
    .size = sizeof(coll_provider_t),
    .version = COLL_PROVIDER_VERSION,
    .name = "tcp",
    .isend = coll__tcp_isend,
    .irecv = coll__tcp_irecv,
    .wait = coll__tcp_wait,
    .abort = tcp_abort,
    .destroy = tcp_destroy,
    .fail = coll__tcp_fail_hook,
    .origin = tcp_origin,
    .ask = coll__tcp_ask,
    .tell = coll__tcp_tell,
    .heard = coll__tcp_heard,
    .shrink = coll__tcp_shrink,
    .leave = tcp_leave,
    .kick = tcp_kick,
    .probe = coll__tcp_probe,
    .hints = {.seg_bytes = TCP_SEGMENT_BYTES,
              .seg_crowded = TCP_SEGMENT_BYTES_CROWDED,
              .seg_large = TCP_SEGMENT_BYTES_LARGE},
};

static coll_status_t check_opts(const coll_tcp_opts_t *o,
                                const coll_tcp_rdv_t *rdv,
                                const coll_tcp_xopts_t *x,
                                coll_transport_t **out) {
  if (out == NULL || o == NULL || rdv == NULL || x == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: NULL argument");
  *out = NULL;
  if (o->world < 1 || o->rank < 0 || o->rank >= o->world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp: rank %d out of range for "
                     "world %d",
                     o->rank, o->world);
  if (o->bind_ip == NULL || o->job_id == NULL || rdv->publish == NULL ||
      rdv->lookup == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "tcp: bind_ip, job_id and the rendezvous calls are "
                     "required");
  if (x->frame_cap == 0)
    return coll__err(COLL_ERR_INVALID_ARG, "tcp: frame cap of 0 bytes");
  return COLL_OK;
}

static coll_status_t conns_init(tcp_transport_t *t) {
  int i;
  t->conns = calloc((size_t)t->world, sizeof *t->conns);
  if (t->conns == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
  for (i = 0; i < t->world; i++) {
    tcp_conn_t *c = &t->conns[i];
    c->t = t;
    c->peer = i;
    c->fd = -1;
    uv_mutex_init(&c->rmu);
    uv_mutex_init(&c->smu);
  }
  return COLL_OK;
}

coll_status_t coll__tcp_transport_create_x(const coll_tcp_opts_t *o,
                                           const coll_tcp_rdv_t *rdv,
                                           const coll_tcp_xopts_t *x,
                                           coll_transport_t **out) {
  /* The knobs it reads (core/env.h), refused here as at comm creation. */
  if (out != NULL) *out = NULL;
  COLL_CHECK(coll__knobs_load());
  return coll__tcp_transport_build(o, rdv, x, coll__tcp_elastic_wanted(), -1,
                                   out);
}

coll_status_t coll__tcp_transport_build(const coll_tcp_opts_t *o,
                                        const coll_tcp_rdv_t *rdv,
                                        const coll_tcp_xopts_t *x, int elastic,
                                        int lfd, coll_transport_t **out) {
  tcp_transport_t *t = NULL;
  coll_tcp_opts_t opts;
  char job[512];
  int *fds = NULL, i;
  coll_status_t s;
  s = check_opts(o, rdv, x, out);
  if (s != COLL_OK) {
    if (lfd >= 0) close(lfd);
    return s;
  }
  opts = *o;
  if (elastic) {
    /* Elastic ranks swap addresses before the first frame: a rank that is
     * not elastic must not get past the handshake with one that is. */
    snprintf(job, sizeof job, "%s/elastic", o->job_id);
    opts.job_id = job;
  }
  if (opts.timeout_ms == 0) opts.timeout_ms = coll__default_timeout_ms();
  t = calloc(1, sizeof *t);
  fds = calloc((size_t)o->world, sizeof *fds);
  if (t != NULL) t->wake_fd = -1;
  if (t == NULL || fds == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "tcp: out of memory");
    goto fail;
  }
  t->rank = o->rank;
  t->world = o->world;
  t->x = *x;
  COLL_CHECK_GOTO(heartbeat_from_env(&t->x), s, fail);
  knobs_from_env(&t->x);
  COLL_CHECK_GOTO(congestion_from_env(&t->x), s, fail);
  atomic_init(&t->drivers, 0);
  atomic_init(&t->pos, NULL);
  coll__report_cell_init(&t->report);
  if (uv_mutex_init(&t->req_mu) != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: cannot create a mutex");
    goto fail;
  }
  t->req_mu_init = 1;
  t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->wake_fd < 0) {
    s = coll__err(COLL_ERR_SYSTEM, "tcp: eventfd(): %s", strerror(errno));
    goto fail;
  }
  COLL_CHECK_GOTO(conns_init(t), s, fail);
  if (o->world > 1) {
    s = coll__tcp_mesh_connect_fd(&opts, rdv, &t->x, lfd, fds);
    lfd = -1;
    if (s != COLL_OK) goto fail;
  }
  if (lfd >= 0) close(lfd); /* a world of one listens for no one */
  lfd = -1;
  for (i = 0; i < o->world; i++) t->conns[i].fd = i == o->rank ? -1 : fds[i];
  local_buffers(t);
  if (elastic) {
    opts.job_id = o->job_id;
    COLL_CHECK_GOTO(coll__tcp_elastic_setup(t, &opts, &t->x), s, fail);
  }
  COLL_CHECK_GOTO(coll__tcp_loop_start(t), s, fail);
  free(fds);
  fds = NULL;
  /* t belongs to the wrapper only once it was created. */
  COLL_CHECK_GOTO(coll__t_create(&tcp_provider, t, o->rank, o->world, out), s,
                  fail);
  /* The loop thread answers the peers' desync queries from it. */
  atomic_store(&t->pos, coll__t_position(*out));
  return COLL_OK;
fail:
  if (lfd >= 0) close(lfd);
  free(fds);
  tcp_destroy(t);
  return s;
}

coll_status_t coll__tcp_transport_create(const coll_tcp_opts_t *o,
                                         const coll_tcp_rdv_t *rdv,
                                         coll_transport_t **out) {
  coll_tcp_xopts_t x;
  coll__tcp_xopts_default(&x);
  return coll__tcp_transport_create_x(o, rdv, &x, out);
}
