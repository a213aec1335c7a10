/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_proxy_flow.h: one direction of one proxied connection: the bytes read
 * and not yet forwarded, when each may go (delay), where the frames of
 * src/transport/tcp/wire.h begin, and the faults armed on them. Used by
 * tcp_proxy.c on the proxy's thread only. */
#ifndef COLL_TEST_TCP_PROXY_FLOW_H
#define COLL_TEST_TCP_PROXY_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "tcp_proxy.h"
#include "transport/tcp/wire.h"

/* Bytes queued per direction before the proxy stops reading (then TCP's
 * flow control holds the sender back), and reads remembered for delays. */
#define FLOW_QCAP ((size_t)1 << 20)
#define FLOW_MARKS 1024
/* Largest write, so a corruption can be applied to a copy. */
#define FLOW_PIECE ((size_t)64 * 1024)

/* The end (stream position) of one read and when it may be forwarded. */
typedef struct flow_mark {
  uint64_t end;
  int64_t due_ms;
} flow_mark_t;

typedef struct flow {
  uint8_t *buf; /* queued bytes: buf[head, tail) = stream [fwd, in) */
  size_t head, tail;
  uint64_t in, fwd; /* stream positions read and forwarded */
  flow_mark_t marks[FLOW_MARKS];
  int mfirst, mcount;
  int eof; /* the source closed its side */
  /* Frames: the handshake's bytes come first, then header + payload. */
  uint64_t next_hdr; /* where the next (or current) header starts */
  uint8_t hdr[COLL_TCP_FRAME_BYTES];
  size_t hdr_fill; /* header bytes forwarded so far */
  int hdr_seen;    /* faults were resolved for the header at next_hdr */
  /* Hold: forward up to hold_at, then nothing. */
  int hold_armed, hold_set;
  uint64_t hold_from, hold_at;
  /* Corruption: [cor_start, cor_end) flipped once resolved. */
  int cor_armed, cor_set;
  tcp_proxy_at_t cor_kind;
  uint64_t cor_from, cor_start, cor_end;
  size_t cor_off, cor_n;
  uint64_t frames, flipped;
} flow_t;

/* hs_bytes: handshake bytes this direction carries before its first frame.
 * 0, or -1 when out of memory. */
int flow_init(flow_t *f, uint64_t hs_bytes);
void flow_free(flow_t *f);

/* 1 when there is room to read more. */
int flow_can_read(const flow_t *f);
/* One recv() from fd; every byte may go at now_ms + delay_ms. 0 (read or
 * would block), 1 at end of stream, -1 on an error. */
int flow_read(flow_t *f, int fd, int64_t now_ms, int64_t delay_ms);
/* 1 when bytes could be written now. */
int flow_can_write(flow_t *f, int64_t now_ms, int stalled);
/* Writes what may go to fd until it would block. 0, or -1 on an error. */
int flow_write(flow_t *f, int fd, int64_t now_ms, int stalled);
/* When the next queued byte becomes due, or -1 if none waits for time. */
int64_t flow_next_due(const flow_t *f, int64_t now_ms);
/* 1 while forwarding stops at a hold with the rest of the header queued or
 * not yet sent. */
int flow_held(const flow_t *f);

void flow_hold(flow_t *f);
void flow_corrupt(flow_t *f, tcp_proxy_at_t at, size_t offset, size_t n);
/* Disarms a hold and a corruption not yet applied. */
void flow_clear(flow_t *f);

#endif
