/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tcp_frame.c: arbitrary bytes through the TCP transport's receive
 * state machine (tcp_rx.c), as if a peer had sent them, without a socket.
 *
 * Input: byte 0 picks the options (bit 0: force, as when the peer is
 * closing; bits 1-2: receives posted before any byte arrives, with tags 0..3
 * and capacities from byte 1), byte 1 the capacity unit, byte 2 the size of
 * each chunk handed over, the rest is the stream. After the stream, a
 * receive is posted for each tag, so early messages are matched and copied
 * out too. The desync frames (QUERY, POSITION, REPORT) go through the same
 * machine: whatever they left behind must be what the decoders allow. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp_int.h"

#define PEER 1
#define NPOST_MAX 3
#define FRAME_CAP ((size_t)1 << 20) /* keeps early messages small */

typedef struct fuzz_rx {
  tcp_transport_t t;
  tcp_conn_t c;
  tcp_req_t reqs[NPOST_MAX + 4];
  char *bufs[NPOST_MAX + 4];
  int nreqs;
} fuzz_rx_t;

static tcp_req_t *new_recv(fuzz_rx_t *f, uint32_t tag, size_t cap) {
  tcp_req_t *r = &f->reqs[f->nreqs];
  memset(r, 0, sizeof *r);
  r->conn = &f->c;
  r->kind = TCP_REQ_RECV;
  r->tag = tag;
  r->len = cap;
  /* Exactly cap bytes, so ASan sees any write past the capacity. */
  r->buf = f->bufs[f->nreqs] = malloc(cap > 0 ? cap : 1);
  atomic_init(&r->done, 0);
  f->nreqs++;
  return r;
}

/* Hands the stream over in chunks, the way read_some() stages bytes. */
static tcp_ev_t feed(fuzz_rx_t *f, const uint8_t *p, size_t n, size_t chunk,
                     int force, char *why) {
  tcp_conn_t *c = &f->c;
  while (n > 0) {
    size_t k;
    tcp_ev_t ev;
    if (c->rpos == c->rend) c->rpos = c->rend = 0;
    if (c->rpos > 0) {
      memmove(c->rbuf, c->rbuf + c->rpos, c->rend - c->rpos);
      c->rend -= c->rpos;
      c->rpos = 0;
    }
    k = COLL_TCP_RBUF_BYTES - c->rend;
    if (k > chunk) k = chunk;
    if (k > n) k = n;
    memcpy(c->rbuf + c->rend, p, k);
    c->rend += k;
    p += k;
    n -= k;
    c->rpaused = 0;
    ev = coll__tcp_rx_staged(c, force, why);
    if (ev != TCP_EV_NONE) return ev;
    /* A held-back header (nothing posted, budget full): a reader would wait
     * for a receive; the fuzzer reads on as if the peer were closing. */
    if (c->rpaused) force = 1;
  }
  return TCP_EV_NONE;
}

/* A kept answer is a position the decoder judged valid, and a kept report
 * is printable text of at most COLL_TCP_REPORT_MAX bytes. */
static void check_desync(const fuzz_rx_t *f) {
  const coll_pos_snap_t *a = &f->c.answer;
  size_t i, n;
  if (atomic_load(&f->c.answered) &&
      (a->in_call < 0 || a->in_call > 1 || a->p2p < 0 || a->p2p > 2 ||
       (a->p2p != 0 && (a->p2p_peer < 0 || a->p2p_peer >= f->t.world)) ||
       a->root < -1 || a->root >= f->t.world ||
       (a->seq == 0) != (a->kind == 0)))
    abort();
  if (!atomic_load(&f->t.report.ready)) return;
  n = strnlen(f->t.report.text, sizeof f->t.report.text);
  if (n == 0 || n > COLL_TCP_REPORT_MAX || n == sizeof f->t.report.text)
    abort();
  for (i = 0; i < n; i++)
    if ((unsigned char)f->t.report.text[i] < 0x20 ||
        (unsigned char)f->t.report.text[i] > 0x7e)
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_rx_t *f;
  char why[TCP_WHY_MAX];
  int force, npost, i;
  size_t unit, chunk;
  tcp_ev_t ev;
  if (size < 3) return 0;
  f = calloc(1, sizeof *f);
  if (f == NULL) return 0;
  f->t.rank = 0;
  f->t.world = 2;
  coll__tcp_xopts_default(&f->t.x);
  f->t.x.frame_cap = FRAME_CAP;
  f->c.t = &f->t;
  f->c.peer = PEER;
  f->c.fd = -1;
  f->c.rbuf = malloc(COLL_TCP_RBUF_BYTES);
  if (f->c.rbuf == NULL) {
    free(f);
    return 0;
  }
  force = data[0] & 1;
  npost = (data[0] >> 1) & 3;
  unit = data[1];
  chunk = (size_t)data[2] * 64 + 1;
  for (i = 0; i < npost && i < NPOST_MAX; i++)
    coll__tcp_rx_append(&f->c,
                        new_recv(f, (uint32_t)i, unit * (size_t)(i + 1) * 7));
  why[0] = '\0';
  ev = feed(f, data + 3, size - 3, chunk, force, why);
  if (ev == TCP_EV_NONE) {
    /* Every early message is matched against a receive of its tag. */
    for (i = 0; i < 4; i++) {
      tcp_req_t *r = new_recv(f, (uint32_t)i, unit * 3);
      if (!coll__tcp_rx_match(&f->c, r)) coll__tcp_rx_append(&f->c, r);
    }
  } else if ((ev == TCP_EV_PROTO || ev == TCP_EV_NOMEM) && why[0] == '\0') {
    abort(); /* a refusal always says why */
  }
  check_desync(f);
  coll__tcp_rx_fail_all(&f->c, COLL_ERR_ABORTED, "fuzz: done");
  coll__tcp_rx_free(&f->c);
  for (i = 0; i < f->nreqs; i++) free(f->bufs[i]);
  free(f);
  return 0;
}
