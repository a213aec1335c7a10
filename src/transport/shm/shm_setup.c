/* SPDX-License-Identifier: Apache-2.0 */
/* shm_setup.c: making a rank's region and meeting its peers. Each rank
 * makes a memfd (no name in any file system, so nothing outlives the
 * processes, kill -9 included) and an eventfd doorbell, listens on an
 * autobound abstract Unix socket and publishes its name. Rank i dials every
 * lower rank; each pair then swaps a hello and both descriptors with
 * SCM_RIGHTS and keeps the socket connected: its hangup is how a peer's
 * end shows. A peer must have this process's uid (SO_PEERCRED) and the same
 * job id and token (a digest in the hello). The hello also names a word of
 * the sender's private memory, which the peer reads back to learn whether
 * single copies between them work (shm_cma.c). */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/cores.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "transport/shm/shm.h"
#include "transport/shm/shm_int.h"
#include "transport/shm/shm_ops.h"

#define SHM_HELLO_MAGIC 0x4f4c4c4548534d43ull /* "CMSHELLO" */
/* An accepted client must send its hello this soon: a rank sends it right
 * after it connected; a stranger that stays silent is dropped. */
#define SHM_HELLO_MS 5000
/* How often a rank waiting for higher ranks' dials asks whether one gave
 * up (coll_shm_rdv_t.gave_up): one store get per missing rank each time. */
#define SHM_GAVE_UP_MS 100

typedef struct shm_hello {
  uint64_t magic;
  uint32_t version, rank, world, cells;
  uint64_t region_bytes;
  uint8_t digest[COLL_SHA256_BYTES];
  uint64_t probe_addr, probe_val; /* the sender's probe word (shm_cma.c) */
} shm_hello_t;

typedef struct shm_setup {
  const coll_shm_opts_t *o;
  shm_ep_t *ep;
  int mfd, lfd;
  uint8_t digest[COLL_SHA256_BYTES];
} shm_setup_t;

static void job_digest(const coll_shm_opts_t *o, uint8_t out[32]) {
  coll_sha256_t h;
  static const char domain[] = "coll-shm-hello";
  coll__sha256_init(&h);
  coll__sha256_update(&h, domain, sizeof domain);
  coll__sha256_update(&h, o->job_id, strlen(o->job_id) + 1);
  if (o->token != NULL) coll__sha256_update(&h, o->token, strlen(o->token));
  coll__sha256_final(&h, out);
}

static int64_t left_ms(int64_t deadline) {
  int64_t l;
  if (deadline < 0) return -1;
  l = deadline - coll__now_ms();
  return l < 0 ? 0 : l;
}

static coll_status_t sys_err(const char *what) {
  return coll__err(COLL_ERR_SYSTEM, "shm setup: %s: %s", what, strerror(errno));
}

static void hello_fill(const shm_setup_t *su, shm_hello_t *h) {
  memset(h, 0, sizeof *h);
  h->magic = SHM_HELLO_MAGIC;
  h->version = SHM_VERSION;
  h->rank = (uint32_t)su->ep->rank;
  h->world = (uint32_t)su->ep->world;
  h->cells = su->ep->lay.cells;
  h->region_bytes = su->ep->lay.region_bytes;
  memcpy(h->digest, su->digest, sizeof h->digest);
  h->probe_addr = (uint64_t)(uintptr_t)&su->ep->probe;
  h->probe_val = su->ep->probe;
}

/* Why a hello is refused, or NULL. */
static const char *hello_check(const shm_setup_t *su, const shm_hello_t *h) {
  uint8_t diff = 0;
  if (h->magic != SHM_HELLO_MAGIC) return "not a libcoll shm hello";
  if (h->version != SHM_VERSION) return "another shm protocol version";
  if (h->world != (uint32_t)su->ep->world) return "another world size";
  if (h->cells != su->ep->lay.cells ||
      h->region_bytes != su->ep->lay.region_bytes)
    return "another region layout (another libcoll build)";
  for (size_t i = 0; i < sizeof h->digest; i++)
    diff |= (uint8_t)(h->digest[i] ^ su->digest[i]);
  if (diff != 0) return "another job id or auth token";
  return NULL;
}

static coll_status_t send_hello(const shm_setup_t *su, int fd) {
  shm_hello_t h;
  int fds[2] = {su->mfd, su->ep->bell};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } c;
  struct iovec iov;
  struct msghdr m;
  struct cmsghdr *cm;
  hello_fill(su, &h);
  memset(&c, 0, sizeof c);
  memset(&m, 0, sizeof m);
  iov.iov_base = &h;
  iov.iov_len = sizeof h;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = c.buf;
  m.msg_controllen = sizeof c.buf;
  cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  /* A fresh socket's buffer takes a hello whole. */
  if (sendmsg(fd, &m, MSG_NOSIGNAL) != (ssize_t)sizeof h)
    return sys_err("sending the hello");
  return COLL_OK;
}

static void close_fds(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* Reads a hello and the two descriptors that come with it, before the
 * deadline. fds[] are -1 when absent. */
static coll_status_t recv_hello(int fd, int64_t deadline, shm_hello_t *h,
                                int fds[2]) {
  size_t got = 0;
  fds[0] = fds[1] = -1;
  while (got < sizeof *h) {
    union {
      char buf[CMSG_SPACE(4 * sizeof(int))];
      struct cmsghdr align;
    } c;
    struct iovec iov = {(char *)h + got, sizeof *h - got};
    struct msghdr m;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t l = left_ms(deadline);
    ssize_t n;
    if (l == 0) return coll__err(COLL_ERR_TIMEOUT, "no hello in time");
    if (poll(&p, 1, l < 0 ? -1 : (int)l) < 0 && errno != EINTR)
      return sys_err("poll");
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = c.buf;
    m.msg_controllen = sizeof c.buf;
    n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return sys_err("reading a hello");
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm != NULL;
         cm = CMSG_NXTHDR(&m, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), in[4];
      if (k > 4) k = 4;
      memcpy(in, CMSG_DATA(cm), (size_t)k * sizeof(int));
      for (int i = 0; i < k; i++) {
        if (i < 2 && fds[i] < 0)
          fds[i] = in[i];
        else
          close(in[i]);
      }
    }
    if (n == 0)
      return coll__err(COLL_ERR_PEER_LOST,
                       "the connection closed during "
                       "the hello (a refused handshake: "
                       "another job id or auth token?)");
    got += (size_t)n;
  }
  if (fds[0] < 0 || fds[1] < 0)
    return coll__err(COLL_ERR_PROTOCOL, "a hello came without descriptors");
  return COLL_OK;
}

/* 1 if the process at the other end of fd has this process's uid; its
 * pid (as this process sees it) in *pid. */
static int same_uid(int fd, pid_t *pid) {
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return 0;
  *pid = cr.pid;
  return cr.uid == getuid();
}

/* Maps peer p's region from its memfd, keeps its socket and doorbell, and
 * probes single copies from it (its hello h, its process pid). */
static coll_status_t adopt(shm_setup_t *su, int p, int sock, int fds[2],
                           const shm_hello_t *h, pid_t pid) {
  shm_ep_t *ep = su->ep;
  shm_peer_t *pr = &ep->peers[p];
  shm_hdr_t *ph;
  struct stat st;
  void *m;
  if (fstat(fds[0], &st) != 0 || (size_t)st.st_size < ep->lay.region_bytes)
    return coll__err(COLL_ERR_PROTOCOL,
                     "rank %d's shared memory is smaller than its hello "
                     "said",
                     coll__shm_name(ep, p));
  m = mmap(NULL, ep->lay.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
           fds[0], 0);
  if (m == MAP_FAILED) return sys_err("mapping a peer's memory");
  ph = m;
  if (atomic_load_explicit(&ph->ready, memory_order_acquire) != 1 ||
      ph->magic != SHM_MAGIC || ph->rank != (uint32_t)p ||
      ph->world != (uint32_t)ep->world) {
    munmap(m, ep->lay.region_bytes);
    return coll__err(COLL_ERR_PROTOCOL,
                     "rank %d's shared memory has a foreign header",
                     coll__shm_name(ep, p));
  }
  close(fds[0]);
  fds[0] = -1;
  pr->region = m;
  pr->bell = fds[1];
  fds[1] = -1;
  pr->sock = sock;
  pr->tx = coll__shm_ring(m, &ep->lay, ep->rank);
  pr->rx = coll__shm_ring(ep->region, &ep->lay, p);
  pr->pid = pid;
  coll__shm_probe_peer(ep, p, h->probe_addr, h->probe_val);
  return COLL_OK;
}

static int addr_parse(const char *text, struct sockaddr_un *a, socklen_t *len) {
  size_t n = strlen(text);
  if (n < 2 || text[0] != '@' || n - 1 > sizeof a->sun_path - 1) return -1;
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path + 1, text + 1, n - 1); /* abstract: a leading NUL */
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  return 0;
}

/* Dials lower rank p and swaps hellos. */
static coll_status_t dial(shm_setup_t *su, const coll_shm_rdv_t *rdv, int p) {
  char text[COLL_SHM_ADDR_MAX];
  struct sockaddr_un a;
  socklen_t alen;
  shm_hello_t h;
  int fds[2] = {-1, -1}, fd;
  const char *bad;
  coll_status_t s;
  pid_t pid = 0;
  int name = coll__shm_name(su->ep, p);
  COLL_CHECK(rdv->lookup(rdv->ctx, p, text, sizeof text, su->o->deadline_ms));
  if (addr_parse(text, &a, &alen) != 0)
    return coll__err(COLL_ERR_PROTOCOL,
                     "rank %d published '%s', not a shm socket name", name,
                     text);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys_err("socket");
  /* A full backlog (EAGAIN) clears as the peer accepts: retry. */
  while (connect(fd, (struct sockaddr *)&a, alen) != 0) {
    struct timespec ms = {0, 1000000};
    if ((errno != EAGAIN && errno != EINTR) ||
        left_ms(su->o->deadline_ms) == 0) {
      s = coll__err(COLL_ERR_PEER_LOST, "rank %d's socket %s: %s", name, text,
                    strerror(errno));
      goto fail;
    }
    nanosleep(&ms, NULL);
  }
  if (!same_uid(fd, &pid)) {
    s = coll__err(COLL_ERR_PROTOCOL,
                  "rank %d's socket %s belongs to another user", name, text);
    goto fail;
  }
  COLL_CHECK_GOTO(send_hello(su, fd), s, fail);
  COLL_CHECK_GOTO(recv_hello(fd, su->o->deadline_ms, &h, fds), s, fail);
  bad = hello_check(su, &h);
  if (bad == NULL && h.rank != (uint32_t)p) bad = "another rank answered";
  if (bad != NULL) {
    s = coll__err(COLL_ERR_PROTOCOL, "rank %d's hello: %s", name, bad);
    goto fail;
  }
  COLL_CHECK_GOTO(adopt(su, p, fd, fds, &h, pid), s, fail);
  return COLL_OK;
fail:
  close_fds(fds, 2);
  close(fd);
  return s;
}

/* A higher rank that has not dialed yet and said it never will
 * (rdv->gave_up), as PEER_LOST; COLL_OK if none. */
static coll_status_t given_up(shm_setup_t *su, const coll_shm_rdv_t *rdv) {
  shm_ep_t *ep = su->ep;
  for (int p = ep->rank + 1; p < ep->world; p++)
    if (ep->peers[p].region == NULL && rdv->gave_up(rdv->ctx, p))
      return coll__err(COLL_ERR_PEER_LOST,
                       "rank %d failed its setup before it joined this "
                       "host's shared memory",
                       coll__shm_name(ep, p));
  return COLL_OK;
}

/* Accepts the higher ranks; strangers and refused hellos are dropped.
 * Where the rendezvous can tell that a rank gave up, it is asked every
 * SHM_GAVE_UP_MS while ranks are missing. */
static coll_status_t accept_all(shm_setup_t *su, const coll_shm_rdv_t *rdv) {
  shm_ep_t *ep = su->ep;
  int missing = ep->world - 1 - ep->rank;
  while (missing > 0) {
    struct pollfd p = {.fd = su->lfd, .events = POLLIN};
    int64_t l = left_ms(su->o->deadline_ms), hd;
    shm_hello_t h;
    int fds[2], fd, ready;
    pid_t pid = 0;
    const char *bad;
    if (l == 0)
      return coll__err(COLL_ERR_TIMEOUT,
                       "%d higher rank(s) did not connect to rank %d's shm "
                       "socket in time",
                       missing, coll__shm_name(ep, ep->rank));
    if (rdv->gave_up != NULL && (l < 0 || l > SHM_GAVE_UP_MS))
      l = SHM_GAVE_UP_MS;
    ready = poll(&p, 1, l < 0 ? -1 : (int)l);
    if (ready < 0 && errno != EINTR) return sys_err("poll");
    if (ready == 0 && rdv->gave_up != NULL) {
      COLL_CHECK(given_up(su, rdv));
      continue;
    }
    fd = accept4(su->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      return sys_err("accept");
    }
    if (!same_uid(fd, &pid)) {
      COLL_WARN(COLL_LOG_BOOT, "shm: dropped a connection from another user");
      close(fd);
      continue;
    }
    hd = coll__now_ms() + SHM_HELLO_MS;
    if (su->o->deadline_ms >= 0 && su->o->deadline_ms < hd)
      hd = su->o->deadline_ms;
    if (recv_hello(fd, hd, &h, fds) != COLL_OK) {
      COLL_WARN(COLL_LOG_BOOT, "shm: dropped a client: %s", coll_last_error());
      close_fds(fds, 2);
      close(fd);
      continue;
    }
    bad = hello_check(su, &h);
    if (bad == NULL && (h.rank <= (uint32_t)ep->rank || h.rank >= h.world ||
                        ep->peers[h.rank].region != NULL))
      bad = "a rank that is not expected";
    if (bad == NULL && send_hello(su, fd) != COLL_OK) bad = coll_last_error();
    if (bad == NULL && adopt(su, (int)h.rank, fd, fds, &h, pid) != COLL_OK)
      bad = coll_last_error();
    if (bad != NULL) {
      COLL_WARN(COLL_LOG_BOOT, "shm: refused a hello: %s", bad);
      close_fds(fds, 2);
      close(fd);
      continue;
    }
    missing--;
  }
  return COLL_OK;
}

static coll_status_t listen_publish(shm_setup_t *su,
                                    const coll_shm_rdv_t *rdv) {
  struct sockaddr_un a;
  socklen_t len = sizeof(sa_family_t);
  char text[COLL_SHM_ADDR_MAX];
  size_t n;
  su->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (su->lfd < 0) return sys_err("socket");
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  /* An address of just the family autobinds: the kernel picks a free
   * abstract name, which no file system holds. */
  if (bind(su->lfd, (struct sockaddr *)&a, len) != 0) return sys_err("bind");
  if (listen(su->lfd, su->ep->world > 128 ? su->ep->world : 128) != 0)
    return sys_err("listen");
  len = sizeof a;
  if (getsockname(su->lfd, (struct sockaddr *)&a, &len) != 0)
    return sys_err("getsockname");
  n = len - offsetof(struct sockaddr_un, sun_path);
  if (n < 2 || n > sizeof text - 1 || a.sun_path[0] != '\0')
    return coll__err(COLL_ERR_SYSTEM, "shm setup: no abstract socket name");
  text[0] = '@';
  memcpy(text + 1, a.sun_path + 1, n - 1);
  text[n] = '\0';
  return rdv->publish(rdv->ctx, su->ep->rank, text);
}

static coll_status_t region_make(shm_setup_t *su) {
  shm_ep_t *ep = su->ep;
  su->mfd = memfd_create("coll-shm", MFD_CLOEXEC);
  if (su->mfd < 0) return sys_err("memfd_create");
  if (ftruncate(su->mfd, (off_t)ep->lay.region_bytes) != 0)
    return sys_err("sizing the shared memory");
  ep->region = mmap(NULL, ep->lay.region_bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED, su->mfd, 0);
  if (ep->region == MAP_FAILED) {
    ep->region = NULL;
    return sys_err("mapping the shared memory");
  }
  ep->hdr = ep->region;
  ep->hdr->magic = SHM_MAGIC;
  ep->hdr->version = SHM_VERSION;
  ep->hdr->world = (uint32_t)ep->world;
  ep->hdr->rank = (uint32_t)ep->rank;
  ep->hdr->cells = ep->lay.cells;
  coll__pos_init(&ep->hdr->pos);
  coll__report_cell_init(&ep->hdr->report);
  coll__round_ctl_init(&ep->hdr->round_ctl);
  atomic_store_explicit(&ep->hdr->ready, 1, memory_order_release);
  ep->bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ep->bell < 0) return sys_err("eventfd");
  return COLL_OK;
}

static shm_ep_t *ep_new(const coll_shm_opts_t *o) {
  shm_ep_t *ep = calloc(1, sizeof *ep);
  pthread_condattr_t ca;
  int64_t spin_us = coll__knob(COLL_ENV_SHM_SPIN_US);
  if (ep == NULL) return NULL;
  ep->peers = calloc((size_t)o->world, sizeof *ep->peers);
  if (ep->peers == NULL) {
    free(ep);
    return NULL;
  }
  ep->rank = o->rank;
  ep->world = o->world;
  ep->name_world = o->world;
  if (o->names != NULL) {
    /* The caller's array may be freed once create returns. */
    ep->names = malloc((size_t)o->world * sizeof *ep->names);
    if (ep->names == NULL) {
      free(ep->peers);
      free(ep);
      return NULL;
    }
    memcpy(ep->names, o->names, (size_t)o->world * sizeof *ep->names);
    ep->name_world = o->name_world;
  }
  ep->bell = -1;
  coll__shm_probe_init(ep);
  ep->cma_mine = 1;
  coll__origins_init(&ep->origins);
  atomic_init(&ep->rounds.waiters, 0);
  coll__origin_cell_init(&ep->left);
  for (int p = 0; p < o->world; p++) ep->peers[p].sock = ep->peers[p].bell = -1;
  coll__shm_layout(o->world, &ep->lay);
  ep->per_yield = SHM_SPINS_PER_YIELD;
  if ((unsigned)o->world > SHM_CROWDED_RANKS_PER_CORE * coll__host_cores()) {
    /* Crowded: a waiter that spins holds the core the peer it waits for
     * needs. It yields at every look and, unless COLL_SHM_SPIN_US says
     * otherwise, sleeps soon. */
    ep->per_yield = 1;
    if (!coll__knob_set(COLL_ENV_SHM_SPIN_US)) spin_us = SHM_SPIN_CROWDED_US;
  }
  ep->spin_ns = spin_us * 1000;
  pthread_mutex_init(&ep->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ep->cv, &ca);
  pthread_condattr_destroy(&ca);
  return ep;
}

void coll__shm_ep_free(shm_ep_t *ep) {
  if (ep == NULL) return;
  coll__shm_hb_stop(ep);
  for (int p = 0; p < ep->world; p++) {
    shm_peer_t *pr = &ep->peers[p];
    coll_match_item_t *it = pr->in.early.head, *next;
    for (; it != NULL; it = next) {
      shm_unx_t *u = coll__shm_unx_of(it);
      next = it->next;
      free(u->data);
      free(u);
    }
    if (pr->region != NULL) munmap(pr->region, ep->lay.region_bytes);
    if (pr->sock >= 0) close(pr->sock);
    if (pr->bell >= 0) close(pr->bell);
  }
  if (ep->region != NULL) munmap(ep->region, ep->lay.region_bytes);
  if (ep->bell >= 0) close(ep->bell);
  pthread_cond_destroy(&ep->cv);
  pthread_mutex_destroy(&ep->mu);
  free(ep->round_ctl);
  free(ep->round_mem);
  free(ep->hb_seen);
  free(ep->hb_at);
  free(ep->peers);
  free(ep->names);
  free(ep);
}

/* A host endpoint's names: one per member, ascending, below name_world. */
static coll_status_t names_check(const coll_shm_opts_t *o) {
  if (o->names == NULL) return COLL_OK;
  if (o->world < 1 || o->rank < 0 || o->rank >= o->world ||
      o->name_world < o->world)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "shm setup: member %d of %d in a comm of %d ranks",
                     o->rank, o->world, o->name_world);
  for (int i = 0; i < o->world; i++)
    if (o->names[i] < 0 || o->names[i] >= o->name_world ||
        (i > 0 && o->names[i] <= o->names[i - 1]))
      return coll__err(COLL_ERR_INVALID_ARG,
                       "shm setup: names[%d] = %d: names must ascend, each "
                       "below %d",
                       i, o->names[i], o->name_world);
  return COLL_OK;
}

coll_status_t coll__shm_transport_create(const coll_shm_opts_t *o,
                                         const coll_shm_rdv_t *rdv,
                                         coll_transport_t **out) {
  shm_setup_t su = {o, NULL, -1, -1, {0}};
  coll_provider_t prov;
  coll_status_t s;
  *out = NULL;
  /* The knobs it reads (core/env.h), refused here as at comm creation. */
  COLL_CHECK(coll__knobs_load());
  COLL_CHECK(names_check(o));
  su.ep = ep_new(o);
  if (su.ep == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "shm setup: out of memory");
  job_digest(o, su.digest);
  su.ep->hb_ms = coll__hb_timeout_ms();
  coll__shm_cma_config(su.ep);
  COLL_CHECK_GOTO(region_make(&su), s, fail);
  COLL_CHECK_GOTO(listen_publish(&su, rdv), s, fail);
  for (int p = 0; p < o->rank; p++) COLL_CHECK_GOTO(dial(&su, rdv, p), s, fail);
  COLL_CHECK_GOTO(accept_all(&su, rdv), s, fail);
  close(su.lfd);
  close(su.mfd);
  su.lfd = su.mfd = -1;
  COLL_CHECK_GOTO(coll__shm_cma_agree(su.ep, o->deadline_ms), s, fail);
  COLL_CHECK_GOTO(coll__shm_rounds_init(su.ep), s, fail);
  COLL_CHECK_GOTO(coll__shm_hb_start(su.ep), s, fail);
  prov = *coll__shm_provider();
  if (su.ep->cma) {
    prov.peer_read = coll__shm_peer_read;
    prov.hints.copy_from = (size_t)su.ep->copy_from;
  }
  COLL_CHECK_GOTO(coll__t_create(&prov, su.ep, coll__shm_name(su.ep, o->rank),
                                 su.ep->name_world, out),
                  s, fail);
  if (o->names == NULL) {
    COLL_INFO(COLL_LOG_BOOT,
              "rank %d/%d: shared-memory transport, %u cells "
              "of %u bytes per peer",
              o->rank, o->world, su.ep->lay.cells, SHM_CELL_DATA);
  } else {
    COLL_INFO(COLL_LOG_BOOT,
              "rank %d/%d: shared-memory host endpoint of %d ranks, %u cells "
              "of %u bytes per peer",
              o->names[o->rank], o->name_world, o->world, su.ep->lay.cells,
              SHM_CELL_DATA);
  }
  return COLL_OK;
fail:
  if (su.lfd >= 0) close(su.lfd);
  if (su.mfd >= 0) close(su.mfd);
  coll__shm_ep_free(su.ep);
  return s;
}
