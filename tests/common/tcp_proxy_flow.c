/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy_flow.c: one direction of a proxied connection: a byte queue
 * with due times, frame tracking after the handshake, and the hold and
 * corruption faults applied as bytes are forwarded. Proxy thread only. */
#include "tcp_proxy_flow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int flow_init(flow_t *f, uint64_t hs_bytes) {
  memset(f, 0, sizeof *f);
  /* The queue, then room for the copy a write corrupts. */
  f->buf = malloc(FLOW_QCAP + FLOW_PIECE);
  f->next_hdr = hs_bytes;
  return f->buf == NULL ? -1 : 0;
}

void flow_free(flow_t *f) {
  free(f->buf);
  f->buf = NULL;
}

int flow_can_read(const flow_t *f) {
  return !f->eof && f->mcount < FLOW_MARKS && f->tail - f->head < FLOW_QCAP;
}

int flow_read(flow_t *f, int fd, int64_t now_ms, int64_t delay_ms) {
  flow_mark_t *m;
  ssize_t n;
  if (!flow_can_read(f)) return 0;
  if (f->head > 0 && FLOW_QCAP - f->tail < FLOW_QCAP / 4) {
    memmove(f->buf, f->buf + f->head, f->tail - f->head);
    f->tail -= f->head;
    f->head = 0;
  }
  n = recv(fd, f->buf + f->tail, FLOW_QCAP - f->tail, 0);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  if (n == 0) {
    f->eof = 1;
    return 1;
  }
  f->tail += (size_t)n;
  f->in += (uint64_t)n;
  m = &f->marks[(f->mfirst + f->mcount) % FLOW_MARKS];
  m->end = f->in;
  m->due_ms = now_ms + delay_ms;
  f->mcount++;
  return 0;
}

/* Faults that wait for "the next header" are placed when it starts. */
static void header_starts(flow_t *f) {
  uint64_t h = f->next_hdr;
  f->hdr_seen = 1;
  if (f->hold_armed && !f->hold_set && h >= f->hold_from) {
    f->hold_set = 1;
    f->hold_at = h + COLL_TCP_FRAME_BYTES / 2;
  }
  if (f->cor_armed && !f->cor_set && f->cor_kind == TCP_PROXY_AT_HEADER &&
      h >= f->cor_from) {
    f->cor_set = 1;
    f->cor_start = h + f->cor_off;
    f->cor_end = f->cor_start + f->cor_n;
  }
}

/* A header went out whole: its (original) length says where the next one
 * starts, and a payload corruption may be placed now. */
static void header_ends(flow_t *f) {
  coll_tcp_frame_t fr;
  uint64_t payload = f->next_hdr + COLL_TCP_FRAME_BYTES;
  coll__tcp_frame_decode(f->hdr, &fr);
  f->frames++;
  if (f->cor_armed && !f->cor_set && f->cor_kind == TCP_PROXY_AT_PAYLOAD &&
      payload >= f->cor_from && fr.len > f->cor_off) {
    f->cor_set = 1;
    f->cor_start = payload + f->cor_off;
    f->cor_end = f->cor_start + f->cor_n;
  }
  f->next_hdr = fr.len > UINT64_MAX - payload ? UINT64_MAX : payload + fr.len;
  f->hdr_fill = 0;
  f->hdr_seen = 0;
}

/* The stream position up to which bytes may go now. */
static uint64_t ready_end(flow_t *f, int64_t now_ms, int stalled) {
  uint64_t end = f->fwd;
  int i;
  while (f->mcount > 0 && f->marks[f->mfirst].end <= f->fwd) {
    f->mfirst = (f->mfirst + 1) % FLOW_MARKS;
    f->mcount--;
  }
  if (stalled) return f->fwd;
  for (i = 0; i < f->mcount; i++) {
    const flow_mark_t *m = &f->marks[(f->mfirst + i) % FLOW_MARKS];
    if (m->due_ms > now_ms) break;
    end = m->end;
  }
  if (f->fwd >= f->next_hdr && !f->hdr_seen) header_starts(f);
  if (f->hold_set && end > f->hold_at) end = f->hold_at;
  return end > f->fwd ? end : f->fwd;
}

int flow_can_write(flow_t *f, int64_t now_ms, int stalled) {
  return ready_end(f, now_ms, stalled) > f->fwd;
}

/* Flips the bytes of piece (stream [pos, pos + k)) inside the corruption;
 * returns how many. */
static size_t corrupt_piece(const flow_t *f, uint8_t *piece, uint64_t pos,
                            size_t k) {
  uint64_t a, b, i;
  if (!f->cor_set) return 0;
  a = f->cor_start > pos ? f->cor_start : pos;
  b = f->cor_end < pos + k ? f->cor_end : pos + k;
  for (i = a; i < b; i++) piece[i - pos] ^= 0xffu;
  return b > a ? (size_t)(b - a) : 0;
}

int flow_write(flow_t *f, int fd, int64_t now_ms, int stalled) {
  uint8_t *piece = f->buf + FLOW_QCAP;
  for (;;) {
    uint64_t end = ready_end(f, now_ms, stalled), bound;
    size_t k, flips;
    ssize_t n;
    if (end <= f->fwd) return 0;
    bound =
        f->fwd < f->next_hdr ? f->next_hdr : f->next_hdr + COLL_TCP_FRAME_BYTES;
    if (end > bound) end = bound;
    k = end - f->fwd < FLOW_PIECE ? (size_t)(end - f->fwd) : FLOW_PIECE;
    memcpy(piece, f->buf + f->head, k);
    flips = corrupt_piece(f, piece, f->fwd, k);
    n = send(fd, piece, k, MSG_NOSIGNAL);
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if ((size_t)n < k) flips = corrupt_piece(f, piece, f->fwd, (size_t)n);
    f->flipped += flips;
    if (f->fwd >= f->next_hdr) {
      memcpy(f->hdr + f->hdr_fill, f->buf + f->head, (size_t)n);
      f->hdr_fill += (size_t)n;
    }
    f->fwd += (uint64_t)n;
    f->head += (size_t)n;
    if (f->head == f->tail) f->head = f->tail = 0;
    if (f->cor_set && f->fwd >= f->cor_end) f->cor_armed = f->cor_set = 0;
    if (f->hdr_fill == COLL_TCP_FRAME_BYTES) header_ends(f);
    if ((size_t)n < k) return 0;
  }
}

int64_t flow_next_due(const flow_t *f, int64_t now_ms) {
  int i;
  for (i = 0; i < f->mcount; i++) {
    const flow_mark_t *m = &f->marks[(f->mfirst + i) % FLOW_MARKS];
    if (m->end > f->fwd && m->due_ms > now_ms) return m->due_ms;
  }
  return -1;
}

int flow_held(const flow_t *f) { return f->hold_set && f->fwd == f->hold_at; }

/* A fault armed while nothing of the header at fwd has gone out applies to
 * that header. */
static void rearm_header(flow_t *f) {
  if (f->fwd >= f->next_hdr && f->hdr_fill == 0) f->hdr_seen = 0;
}

void flow_hold(flow_t *f) {
  f->hold_armed = 1;
  f->hold_set = 0;
  f->hold_from = f->fwd;
  rearm_header(f);
}

void flow_corrupt(flow_t *f, tcp_proxy_at_t at, size_t offset, size_t n) {
  f->cor_armed = 1;
  f->cor_set = 0;
  f->cor_kind = at;
  f->cor_from = f->fwd;
  f->cor_off = offset;
  f->cor_n = n;
  if (at == TCP_PROXY_AT_BYTES) {
    f->cor_set = 1;
    f->cor_start = f->fwd + offset;
    f->cor_end = f->cor_start + n;
  }
  rearm_header(f);
}

void flow_clear(flow_t *f) {
  f->hold_armed = f->hold_set = 0;
  f->cor_armed = f->cor_set = 0;
}
