/* SPDX-License-Identifier: Apache-2.0 */
/* shm_cma.c: single copy between the processes of one host. A rank reads a
 * peer's buffer straight out of the peer's memory with cross-memory attach
 * (process_vm_readv): one copy through the kernel, where the slots of the
 * rounds take two (into the slot, out of it). This is what Open MPI's vader
 * does for large messages.
 *
 * The kernel allows it between processes of one user unless a security
 * module says otherwise (Yama's ptrace_scope, a seccomp filter, a process
 * that made itself undumpable), and that can differ from one pair to the
 * next. So every endpoint probes at setup: each rank's hello names a word
 * of its private memory and the value in it, and the peer reads it back;
 * then every rank tells every peer whether it could read them all, and the
 * endpoint offers single copy only where every rank could (every rank
 * reaches the same verdict, so the collectives all take the same path).
 * Otherwise the collectives keep the slots, and the log says why at INFO.
 *
 * Only reads: a rank never writes into a peer's memory, so a peer that
 * gave up on a collective and returned (an abort) can at worst hand a
 * reader stale bytes, which the reader then never delivers (the round
 * fails on the peer's missing flag). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/le.h"
#include "core/log.h"
#include "core/trace.h"
#include "transport/shm/shm.h"
#include "transport/shm/shm_int.h"

int coll__shm_cma_refuse = 0;
size_t coll__shm_copy_from_test = 0;

void coll__shm_cma_config(shm_ep_t *ep) {
  int64_t v = coll__knob(COLL_ENV_SHM_SINGLE_COPY);
  if (coll__shm_copy_from_test != 0) v = (int64_t)coll__shm_copy_from_test;
  ep->copy_from = (uint64_t)v;
  if (v == 0) {
    ep->cma_mine = 0;
    snprintf(ep->cma_why, sizeof ep->cma_why,
             "COLL_SHM_SINGLE_COPY=0 on rank %d", coll__shm_name(ep, ep->rank));
  }
}

void coll__shm_probe_init(shm_ep_t *ep) {
  uint64_t v = coll__now_ns() ^ ((uint64_t)getpid() << 32) ^
               (uint64_t)(uintptr_t)ep ^ 0x9e3779b97f4a7c15ull;
  ep->probe = v != 0 ? v : 1;
}

/* One read of len bytes from pid at `from` into dst, whole or not at all:
 * 0, or the errno of the failure (EFAULT for a short read that stopped). */
static int read_all(pid_t pid, void *dst, const void *from, size_t len) {
  while (len > 0) {
    struct iovec l = {dst, len}, r = {(void *)from, len};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    dst = (char *)dst + n;
    from = (const char *)from + n;
    len -= (size_t)n;
  }
  return 0;
}

void coll__shm_probe_peer(shm_ep_t *ep, int p, uint64_t addr, uint64_t val) {
  shm_peer_t *pr = &ep->peers[p];
  uint64_t got = 0;
  int e;
  if (coll__shm_cma_refuse) {
    e = EPERM;
  } else if (pr->pid <= 0) {
    e = ESRCH;
  } else {
    e = read_all(pr->pid, &got, (const void *)(uintptr_t)addr, sizeof got);
    if (e == 0 && got != val) e = EINVAL; /* another process: pid namespace */
  }
  if (!ep->cma_mine) return; /* turned off, or one peer failed already */
  if (e == 0 || ep->cma_why[0] != '\0') {
    if (e != 0) ep->cma_mine = 0;
    return;
  }
  ep->cma_mine = 0;
  snprintf(ep->cma_why, sizeof ep->cma_why,
           "rank %d cannot read rank %d's memory (process_vm_readv: %s)",
           coll__shm_name(ep, ep->rank), coll__shm_name(ep, p),
           e == EINVAL ? "another process answered" : strerror(e));
}

/* Reads peer p's verdict (coll__shm_cma_agree) from its socket before the
 * deadline. */
static coll_status_t verdict_recv(shm_ep_t *ep, int p, int64_t deadline,
                                  uint64_t *v) {
  unsigned char b[8];
  size_t got = 0;
  while (got < sizeof b) {
    struct pollfd pf = {.fd = ep->peers[p].sock, .events = POLLIN};
    int64_t left = deadline < 0 ? -1 : deadline - coll__now_ms();
    ssize_t n;
    if (deadline >= 0 && left <= 0)
      return coll__err(COLL_ERR_TIMEOUT,
                       "shm setup: rank %d did not say in time whether it "
                       "can read its peers' memory",
                       coll__shm_name(ep, p));
    if (poll(&pf, 1, left < 0 ? -1 : (int)left) < 0 && errno != EINTR)
      return coll__err(COLL_ERR_SYSTEM, "shm setup: poll: %s", strerror(errno));
    n = recv(ep->peers[p].sock, b + got, sizeof b - got, MSG_DONTWAIT);
    if (n > 0) {
      got += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    return coll__err(COLL_ERR_PEER_LOST,
                     "shm setup: rank %d hung up before it said whether it "
                     "can read its peers' memory",
                     coll__shm_name(ep, p));
  }
  *v = coll__get_le64(b);
  return COLL_OK;
}

/* Every rank sends every peer its verdict: the threshold it would use, or
 * 0 where it cannot read every peer (or was told not to). Single copy is
 * on where no verdict is 0, from the largest threshold, so that every
 * rank picks the same path for the same call. */
coll_status_t coll__shm_cma_agree(shm_ep_t *ep, int64_t deadline) {
  uint64_t mine = ep->cma_mine ? ep->copy_from : 0, agreed = mine;
  int first_no = mine != 0 ? -1 : ep->rank;
  unsigned char b[8];
  coll__put_le64(b, mine);
  for (int p = 0; p < ep->world; p++)
    if (p != ep->rank &&
        send(ep->peers[p].sock, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b)
      return coll__err(COLL_ERR_PEER_LOST,
                       "shm setup: telling rank %d whether this rank can "
                       "read its memory: %s",
                       coll__shm_name(ep, p), strerror(errno));
  for (int p = 0; p < ep->world; p++) {
    uint64_t v = 0;
    if (p == ep->rank) continue;
    COLL_CHECK(verdict_recv(ep, p, deadline, &v));
    if (v == 0 && first_no < 0) first_no = p;
    if (v == 0 || agreed == 0)
      agreed = 0;
    else if (v > agreed)
      agreed = v;
  }
  ep->cma = agreed != 0;
  ep->copy_from = agreed;
  if (ep->world < 2) return COLL_OK;
  if (ep->cma) {
    COLL_INFO(COLL_LOG_BOOT,
              "rank %d: shm single copy (cross-memory attach) from %llu "
              "bytes",
              coll__shm_name(ep, ep->rank), (unsigned long long)agreed);
  } else if (first_no == ep->rank) {
    COLL_INFO(COLL_LOG_BOOT,
              "shm: no single copy: %s; large buffers move through the "
              "shared slots",
              ep->cma_why);
  } else {
    COLL_INFO(COLL_LOG_BOOT,
              "rank %d: shm: no single copy: rank %d cannot read every "
              "peer's memory or turned it off; large buffers move through "
              "the shared slots",
              coll__shm_name(ep, ep->rank), coll__shm_name(ep, first_no));
  }
  return COLL_OK;
}

/* Why a read from member p failed with errno e: the peer's own end where
 * it is gone or closed, else the failure of the read itself. */
static coll_status_t read_failed(shm_ep_t *ep, int p, int e, const void *from,
                                 size_t len) {
  shm_peer_t *pr = &ep->peers[p];
  char why[sizeof pr->why];
  coll_status_t s = COLL_OK;
  int name = coll__shm_name(ep, p);
  pthread_mutex_lock(&ep->mu);
  if (!pr->lost &&
      (e == ESRCH || atomic_load_explicit(&((shm_hdr_t *)pr->region)->gone,
                                          memory_order_acquire)))
    coll__shm_peer_lost(ep, p);
  if (pr->lost) {
    memcpy(why, pr->why, sizeof why);
    s = pr->lost_status;
  }
  pthread_mutex_unlock(&ep->mu);
  if (s != COLL_OK) {
    coll__trace_note_failed_peer(name);
    return coll_set_last_error(s, "shm: reading rank %d's buffer: %s", name,
                               why);
  }
  return coll_set_last_error(COLL_ERR_SYSTEM,
                             "shm: reading %zu bytes of rank %d's buffer at "
                             "%p: %s",
                             len, name, from, strerror(e));
}

coll_status_t coll__shm_peer_read(void *ctx, int peer, void *dst,
                                  const void *from, size_t len) {
  shm_ep_t *ep = ctx;
  int p = coll__shm_member(ep, peer), e;
  if (p < 0 || p == ep->rank)
    return coll_set_last_error(COLL_ERR_INTERNAL,
                               "shm: a single copy from rank %d, not a peer "
                               "of this host endpoint",
                               peer);
  if (coll__shm_peer_read_hook != NULL) coll__shm_peer_read_hook(peer, len);
  e = read_all(ep->peers[p].pid, dst, from, len);
  return e == 0 ? COLL_OK : read_failed(ep, p, e, from, len);
}

void (*coll__shm_peer_read_hook)(int peer, size_t len) = NULL;
