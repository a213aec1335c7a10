/* SPDX-License-Identifier: Apache-2.0 */
/* shrink_agree.c: the survivors of a failure agree on who they are.
 *
 * The protocol is the rotating coordinator of Chandra and Toueg for a
 * perfect failure detector. Links are reliable and ordered, and a link
 * reports its peer gone only once the peer's end is closed (its process
 * died, or it left the comm), after every byte the peer sent before.
 *
 *  1. Every rank sends HELLO (its rank and the address it will listen on
 *     for the new comm) to every other rank and waits, until the hello
 *     deadline, for a HELLO or the loss of each peer. Its estimate is
 *     itself plus every rank whose HELLO came.
 *  2. Rounds r = 0 .. world-1, in order. In round r, rank r sends its
 *     current estimate (EST) to every other rank; every other rank waits
 *     for that EST or for rank r's loss, and adopts the EST if it came. A
 *     rank never gives up on a round by time: past the deadline it fails
 *     the whole shrink with COLL_ERR_TIMEOUT and returns no comm.
 *  3. After the last round a rank decides its estimate. If it is not a
 *     member, it returns an error, never a comm.
 *
 * Why two ranks that decide can never disagree. Let p be a rank that
 * decides. p completed round p, so it sent its estimate E to every rank
 * before any later step, and it was not lost before (it went on to
 * decide), so every rank q that completes round p reads E on p's link
 * before any loss of p can be seen there: q adopts E in round p. From
 * then on every estimate of a rank that reaches a later round is E, so
 * every EST sent in a later round is E and adopting it changes nothing.
 * So every rank that decides, having completed every round, holds E: one
 * view, whoever died before, during or after the agreement, and whatever
 * the ranks saw in step 1. A rank that is only slow is never taken for
 * lost (losses are seen as closed links, never as silence), which is what
 * the argument needs; silence only ever ends a rank's shrink with an
 * error. A rank whose HELLO came late is left out of the estimates of the
 * rounds before its own (it is in E only if its own round comes first),
 * and learns from E whether it is a member. */
#include "transport/common/shrink_agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/le.h"
#include "core/log.h"

#define HDR_BYTES 8

void (*coll__shrink_test_hook)(int rank, int step, int peer) = NULL;

coll_status_t coll__shrink_view_init(coll_shrink_view_t *v, int world) {
  v->world = world;
  v->member = calloc((size_t)world, 1);
  v->addr = calloc((size_t)world, sizeof *v->addr);
  if (v->member == NULL || v->addr == NULL) {
    coll__shrink_view_free(v);
    return coll__err(COLL_ERR_NO_MEMORY, "shrink: out of memory");
  }
  return COLL_OK;
}

void coll__shrink_view_free(coll_shrink_view_t *v) {
  free(v->member);
  free(v->addr);
  v->member = NULL;
  v->addr = NULL;
}

int coll__shrink_view_count(const coll_shrink_view_t *v) {
  int r, n = 0;
  for (r = 0; r < v->world; r++) n += v->member[r] != 0;
  return n;
}

int coll__shrink_view_rank(const coll_shrink_view_t *v, int rank) {
  int r, n = 0;
  if (rank < 0 || rank >= v->world || !v->member[rank]) return -1;
  for (r = 0; r < rank; r++) n += v->member[r] != 0;
  return n;
}

/* Header: kind (1), zero (1), address length (2), rank (4). */
static void put_hdr(uint8_t *p, int kind, size_t alen, int rank) {
  p[0] = (uint8_t)kind;
  p[1] = 0;
  coll__put_le16(p + 2, (uint16_t)alen);
  coll__put_le32(p + 4, (uint32_t)rank);
}

size_t coll__shrink_hello_encode(uint8_t *buf, size_t cap, int rank,
                                 const char *addr) {
  size_t alen = strlen(addr);
  if (alen >= COLL_SHRINK_ADDR_MAX || cap < HDR_BYTES + alen) return 0;
  put_hdr(buf, COLL_SHRINK_K_HELLO, alen, rank);
  memcpy(buf + HDR_BYTES, addr, alen);
  return HDR_BYTES + alen;
}

/* EST: header (address length 0), member count (4), then per member its
 * rank (4), address length (2) and address. */
size_t coll__shrink_est_encode(uint8_t *buf, size_t cap, int rank,
                               const coll_shrink_view_t *v) {
  size_t off = HDR_BYTES + 4;
  int r;
  if (cap < off) return 0;
  put_hdr(buf, COLL_SHRINK_K_EST, 0, rank);
  coll__put_le32(buf + HDR_BYTES, (uint32_t)coll__shrink_view_count(v));
  for (r = 0; r < v->world; r++) {
    size_t alen;
    if (!v->member[r]) continue;
    alen = strlen(v->addr[r]);
    if (cap - off < 6 + alen) return 0;
    coll__put_le32(buf + off, (uint32_t)r);
    coll__put_le16(buf + off + 4, (uint16_t)alen);
    memcpy(buf + off + 6, v->addr[r], alen);
    off += 6 + alen;
  }
  return off;
}

static coll_status_t bad(int from, const char *what) {
  return coll__err(COLL_ERR_PROTOCOL, "shrink: rank %d sent %s", from, what);
}

static coll_status_t decode_est(const uint8_t *buf, size_t len, int from,
                                coll_shrink_view_t *v) {
  uint8_t *member = calloc((size_t)v->world, 1);
  char(*addr)[COLL_SHRINK_ADDR_MAX] = calloc((size_t)v->world, sizeof *addr);
  size_t off = HDR_BYTES + 4;
  uint32_t n, i;
  coll_status_t s = COLL_OK;
  if (member == NULL || addr == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "shrink: out of memory");
    goto out;
  }
  if (len < off) {
    s = bad(from, "a truncated estimate");
    goto out;
  }
  n = coll__get_le32(buf + HDR_BYTES);
  if (n == 0 || n > (uint32_t)v->world) {
    s = bad(from, "an estimate with a member count out of range");
    goto out;
  }
  for (i = 0; i < n; i++) {
    uint32_t r;
    uint16_t alen;
    if (len - off < 6) {
      s = bad(from, "a truncated estimate");
      goto out;
    }
    r = coll__get_le32(buf + off);
    alen = coll__get_le16(buf + off + 4);
    if (r >= (uint32_t)v->world || member[r] || alen >= COLL_SHRINK_ADDR_MAX ||
        len - off - 6 < alen) {
      s = bad(from, "an estimate with a bad member entry");
      goto out;
    }
    member[r] = 1;
    memcpy(addr[r], buf + off + 6, alen);
    addr[r][alen] = '\0';
    off += 6 + (size_t)alen;
  }
  if (off != len) {
    s = bad(from, "an estimate with trailing bytes");
    goto out;
  }
  memcpy(v->member, member, (size_t)v->world);
  memcpy(v->addr, addr, (size_t)v->world * sizeof *addr);
out:
  free(member);
  free(addr);
  return s;
}

coll_status_t coll__shrink_msg_decode(const uint8_t *buf, size_t len, int from,
                                      int *kind, coll_shrink_view_t *v) {
  size_t alen;
  if (len < HDR_BYTES) return bad(from, "a message shorter than its header");
  if (buf[1] != 0 || coll__get_le32(buf + 4) != (uint32_t)from)
    return bad(from, "a message with a bad header");
  alen = coll__get_le16(buf + 2);
  switch (buf[0]) {
    case COLL_SHRINK_K_HELLO:
      if (alen >= COLL_SHRINK_ADDR_MAX || len != HDR_BYTES + alen)
        return bad(from, "a malformed hello");
      memcpy(v->addr[from], buf + HDR_BYTES, alen);
      v->addr[from][alen] = '\0';
      v->member[from] = 1;
      *kind = COLL_SHRINK_K_HELLO;
      return COLL_OK;
    case COLL_SHRINK_K_EST:
      if (alen != 0) return bad(from, "a malformed estimate");
      COLL_CHECK(decode_est(buf, len, from, v));
      *kind = COLL_SHRINK_K_EST;
      return COLL_OK;
    default: return bad(from, "a message of an unknown kind");
  }
}

typedef struct agree {
  const coll_shrink_links_t *l;
  uint8_t *gone; /* per peer: its link reported it lost */
  uint8_t *buf;
  size_t cap;
  coll_shrink_view_t *est;
} agree_t;

static void send_all(agree_t *a, size_t len, int64_t deadline) {
  int q;
  if (coll__shrink_test_hook != NULL)
    coll__shrink_test_hook(a->l->rank, a->buf[0], -1);
  for (q = 0; q < a->l->world; q++) {
    if (q == a->l->rank || a->gone[q]) continue;
    /* A send that fails means the peer is gone; its link says so too. */
    if (a->l->send(a->l->ctx, q, a->buf, len, deadline) != COLL_OK)
      a->gone[q] = 1;
    if (coll__shrink_test_hook != NULL)
      coll__shrink_test_hook(a->l->rank, a->buf[0], q);
  }
}

/* Receives the next message from q: COLL_OK and *kind, COLL_ERR_TIMEOUT,
 * or another status once q counts as gone (a malformed message included:
 * a peer that breaks the protocol is cut off by the link). into receives
 * a HELLO's address or an EST's view. */
static coll_status_t next_msg(agree_t *a, int q, int64_t deadline, int *kind,
                              coll_shrink_view_t *into) {
  size_t len = 0;
  coll_status_t s = a->l->recv(a->l->ctx, q, a->buf, a->cap, &len, deadline);
  if (s == COLL_OK) s = coll__shrink_msg_decode(a->buf, len, q, kind, into);
  if (s != COLL_OK && s != COLL_ERR_TIMEOUT) {
    COLL_INFO(COLL_LOG_COLL, "shrink: rank %d: rank %d is gone: %s", a->l->rank,
              q, coll_last_error());
    a->gone[q] = 1;
  }
  return s;
}

static coll_status_t hellos(agree_t *a, const char *my_addr, int64_t hello_dl,
                            int64_t deadline) {
  const coll_shrink_links_t *l = a->l;
  int q, kind = 0;
  size_t len = coll__shrink_hello_encode(a->buf, a->cap, l->rank, my_addr);
  if (len == 0)
    return coll__err(COLL_ERR_INVALID_ARG, "shrink: address '%s' too long",
                     my_addr);
  a->est->member[l->rank] = 1;
  snprintf(a->est->addr[l->rank], COLL_SHRINK_ADDR_MAX, "%s", my_addr);
  send_all(a, len, deadline);
  for (q = 0; q < l->world; q++) {
    coll_status_t s;
    if (q == l->rank || a->gone[q]) continue;
    s = next_msg(a, q, hello_dl, &kind, a->est);
    if (s == COLL_ERR_TIMEOUT) {
      /* Left out of this estimate; its round is still waited for. */
      COLL_INFO(COLL_LOG_COLL, "shrink: rank %d: no hello from rank %d in time",
                l->rank, q);
      continue;
    }
    if (s == COLL_OK && kind != COLL_SHRINK_K_HELLO) {
      /* An EST before a HELLO breaks the order every rank follows. */
      coll__err(COLL_ERR_PROTOCOL, "shrink: rank %d skipped its hello", q);
      a->gone[q] = 1;
    }
  }
  return COLL_OK;
}

/* Waits for round r's estimate; a HELLO that came too late is skipped. */
static coll_status_t round_wait(agree_t *a, int r, int64_t deadline) {
  coll_shrink_view_t late;
  int kind = 0;
  coll_status_t s;
  COLL_CHECK(coll__shrink_view_init(&late, a->l->world));
  for (;;) {
    kind = 0;
    if (a->gone[r]) break;
    /* A late HELLO must not make its sender a member: decode it aside. */
    s = next_msg(a, r, deadline, &kind, &late);
    if (s == COLL_OK && kind == COLL_SHRINK_K_HELLO) continue;
    if (s == COLL_OK) {
      /* decode wrote the EST into `late`; adopt it. */
      memcpy(a->est->member, late.member, (size_t)a->l->world);
      memcpy(a->est->addr, late.addr, (size_t)a->l->world * sizeof *late.addr);
      break;
    }
    if (s == COLL_ERR_TIMEOUT) {
      coll__shrink_view_free(&late);
      return coll__err(COLL_ERR_TIMEOUT,
                       "shrink: rank %d: rank %d neither sent its round of "
                       "the agreement nor left before the deadline",
                       a->l->rank, r);
    }
  }
  coll__shrink_view_free(&late);
  return COLL_OK;
}

coll_status_t coll__shrink_agree(const coll_shrink_links_t *l,
                                 const char *my_addr, int64_t hello_deadline_ms,
                                 int64_t deadline_ms, coll_shrink_view_t *out) {
  agree_t a;
  coll_status_t s;
  int r;
  memset(&a, 0, sizeof a);
  a.l = l;
  a.est = out;
  a.cap = COLL_SHRINK_MSG_MAX(l->world);
  a.gone = calloc((size_t)l->world, 1);
  a.buf = malloc(a.cap);
  if (a.gone == NULL || a.buf == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "shrink: out of memory");
    goto out;
  }
  COLL_CHECK_GOTO(hellos(&a, my_addr, hello_deadline_ms, deadline_ms), s, out);
  for (r = 0; r < l->world; r++) {
    if (r == l->rank) {
      size_t len = coll__shrink_est_encode(a.buf, a.cap, l->rank, out);
      if (len == 0) {
        s = coll__err(COLL_ERR_NO_MEMORY, "shrink: estimate too large");
        goto out;
      }
      send_all(&a, len, deadline_ms);
      continue;
    }
    COLL_CHECK_GOTO(round_wait(&a, r, deadline_ms), s, out);
  }
  s = COLL_OK;
out:
  free(a.gone);
  free(a.buf);
  return s;
}
