/* SPDX-License-Identifier: Apache-2.0 */
/* wire.h: the TCP transport's byte layouts (frames and handshake), all
 * little-endian, with encoders and decoders that never trust the bytes. */
#ifndef COLL_TRANSPORT_TCP_WIRE_H
#define COLL_TRANSPORT_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/le.h"

/* "COLL" read as a little-endian u32: the first bytes of every message. */
#define COLL_TCP_MAGIC 0x4C4C4F43u
/* Bumped on any change to the layouts below; peers must agree exactly. */
#define COLL_TCP_WIRE_VERSION 3u

/* ------------------------------------------------------------------------ */
/* Frames: every byte after the handshake is a frame header + payload.      */
/* ------------------------------------------------------------------------ */

/* Frame kinds. A message longer than the frame cap travels as one DATA frame
 * followed by CONT frames; every frame but the last has COLL_TCP_F_MORE. The
 * frames of one message are contiguous on the stream. */
enum {
  COLL_TCP_K_DATA = 1,      /* first (often only) frame of a message */
  COLL_TCP_K_CONT = 2,      /* next frame of the same message (same tag) */
  COLL_TCP_K_GOODBYE = 3,   /* the sender closes: a bye payload says why */
  COLL_TCP_K_HEARTBEAT = 4, /* the sender is alive; len 0, between messages */
  COLL_TCP_K_QUERY = 5,     /* "where are you?"; len 0, between messages */
  COLL_TCP_K_POSITION = 6,  /* the answer: a position payload */
  COLL_TCP_K_REPORT = 7,    /* a desync report (printable text, no NUL),
                               just before a goodbye */
};
#define COLL_TCP_F_MORE 0x01u

/* The layout, for documentation and the size checks; encoding goes through
 * the byte helpers below, never through this struct. */
struct coll_tcp_frame_layout {
  uint32_t magic;   /* COLL_TCP_MAGIC */
  uint16_t version; /* COLL_TCP_WIRE_VERSION */
  uint8_t kind;     /* COLL_TCP_K_* */
  uint8_t flags;    /* COLL_TCP_F_* */
  uint32_t src;     /* sender's rank */
  uint32_t tag;
  uint64_t len; /* payload bytes of this frame */
};
#define COLL_TCP_FRAME_BYTES 24
_Static_assert(sizeof(struct coll_tcp_frame_layout) == COLL_TCP_FRAME_BYTES,
               "frame header must be 24 bytes");
_Static_assert(offsetof(struct coll_tcp_frame_layout, len) == 16,
               "frame length at offset 16");

typedef struct coll_tcp_frame {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;
  uint8_t flags;
  uint32_t src;
  uint32_t tag;
  uint64_t len;
} coll_tcp_frame_t;

static inline void coll__tcp_frame_encode(uint8_t out[COLL_TCP_FRAME_BYTES],
                                          uint8_t kind, uint8_t flags,
                                          uint32_t src, uint32_t tag,
                                          uint64_t len) {
  coll__put_le32(out, COLL_TCP_MAGIC);
  coll__put_le16(out + 4, COLL_TCP_WIRE_VERSION);
  out[6] = kind;
  out[7] = flags;
  coll__put_le32(out + 8, src);
  coll__put_le32(out + 12, tag);
  coll__put_le64(out + 16, len);
}

/* Decodes without judging; the receiver checks every field. */
static inline void coll__tcp_frame_decode(const uint8_t *in,
                                          coll_tcp_frame_t *f) {
  f->magic = coll__get_le32(in);
  f->version = coll__get_le16(in + 4);
  f->kind = in[6];
  f->flags = in[7];
  f->src = coll__get_le32(in + 8);
  f->tag = coll__get_le32(in + 12);
  f->len = coll__get_le64(in + 16);
}

/* ------------------------------------------------------------------------ */
/* Goodbye: the last frame a rank sends on a connection, at a frame          */
/* boundary (possibly between two frames of one message), always with this */
/* payload: where the failure that ends the connection started. An orderly */
/* destroy names the sender itself with COLL_CAUSE_DESTROYED.              */
/* ------------------------------------------------------------------------ */

struct coll_tcp_bye_layout {
  uint32_t origin; /* the rank where the failure started */
  uint16_t cause;  /* coll_cause_t (core/origin.h) */
  uint16_t zero;   /* 0 */
  uint32_t detail; /* per cause */
  uint32_t zero2;  /* 0 */
};
#define COLL_TCP_BYE_BYTES 16
_Static_assert(sizeof(struct coll_tcp_bye_layout) == COLL_TCP_BYE_BYTES,
               "bye payload must be 16 bytes");

static inline void coll__tcp_bye_encode(uint8_t out[COLL_TCP_BYE_BYTES],
                                        uint32_t origin, uint16_t cause,
                                        uint32_t detail) {
  coll__put_le32(out, origin);
  coll__put_le16(out + 4, cause);
  coll__put_le16(out + 6, 0);
  coll__put_le32(out + 8, detail);
  coll__put_le32(out + 12, 0);
}

/* Decodes without judging; 0 if a field that must be zero is not. */
static inline int coll__tcp_bye_decode(const uint8_t *in, uint32_t *origin,
                                       uint16_t *cause, uint32_t *detail) {
  *origin = coll__get_le32(in);
  *cause = coll__get_le16(in + 4);
  *detail = coll__get_le32(in + 8);
  return coll__get_le16(in + 6) == 0 && coll__get_le32(in + 12) == 0;
}

/* ------------------------------------------------------------------------ */
/* Position: the answer to a query, where the sender's comm is             */
/* (core/position.h). A query also sends one urgent byte (MSG_OOB, never   */
/* part of the stream): it tells a peer that reads nothing at the moment   */
/* to read on until the query.                                             */
/* ------------------------------------------------------------------------ */

struct coll_tcp_pos_layout {
  uint64_t seq;      /* the collective it is in or last entered; 0: none */
  uint64_t count;    /* of that collective */
  uint32_t root;     /* root + 1; 0: none */
  uint8_t kind;      /* coll_work_kind_t (core/work.h); 0 with seq 0 */
  uint8_t op;        /* coll_op_t */
  uint8_t dtype;     /* coll_dtype_t */
  uint8_t in_call;   /* 1: inside collective seq */
  uint8_t p2p;       /* 0 none, 1 send, 2 recv: the call it waits in */
  uint8_t zero[3];   /* 0 */
  uint32_t p2p_peer; /* for p2p */
  uint32_t p2p_tag;
  uint32_t zero2; /* 0 */
};
#define COLL_TCP_POS_BYTES 40
_Static_assert(sizeof(struct coll_tcp_pos_layout) == COLL_TCP_POS_BYTES,
               "position payload must be 40 bytes");

/* The longest report a REPORT frame carries. */
#define COLL_TCP_REPORT_MAX 383

/* The position fields as the transport hands them over; the decoder fills
 * them without judging beyond the layout, coll__tcp_pos_valid judges. */
typedef struct coll_tcp_pos {
  uint64_t seq, count;
  uint32_t root1;
  uint8_t kind, op, dtype, in_call, p2p;
  uint32_t p2p_peer, p2p_tag;
} coll_tcp_pos_t;

static inline void coll__tcp_pos_encode(uint8_t out[COLL_TCP_POS_BYTES],
                                        const coll_tcp_pos_t *p) {
  memset(out, 0, COLL_TCP_POS_BYTES);
  coll__put_le64(out, p->seq);
  coll__put_le64(out + 8, p->count);
  coll__put_le32(out + 16, p->root1);
  out[20] = p->kind;
  out[21] = p->op;
  out[22] = p->dtype;
  out[23] = p->in_call;
  out[24] = p->p2p;
  coll__put_le32(out + 28, p->p2p_peer);
  coll__put_le32(out + 32, p->p2p_tag);
}

/* Decodes; 0 if a field that must be zero is not. */
static inline int coll__tcp_pos_decode(const uint8_t *in, coll_tcp_pos_t *p) {
  p->seq = coll__get_le64(in);
  p->count = coll__get_le64(in + 8);
  p->root1 = coll__get_le32(in + 16);
  p->kind = in[20];
  p->op = in[21];
  p->dtype = in[22];
  p->in_call = in[23];
  p->p2p = in[24];
  p->p2p_peer = coll__get_le32(in + 28);
  p->p2p_tag = coll__get_le32(in + 32);
  return in[25] == 0 && in[26] == 0 && in[27] == 0 &&
         coll__get_le32(in + 36) == 0;
}

/* 1 if p is a position a peer of a world of `world` ranks can be in. */
static inline int coll__tcp_pos_valid(const coll_tcp_pos_t *p, uint32_t world) {
  if (p->in_call > 1 || p->p2p > 2) return 0;
  if ((p->seq == 0) != (p->kind == 0) || p->kind > 11) return 0;
  if (p->in_call && p->seq == 0) return 0;
  if (p->root1 > world) return 0;
  return p->p2p == 0 ? p->p2p_peer == 0 && p->p2p_tag == 0
                     : p->p2p_peer < world;
}

/* 1 if n report bytes are printable ASCII (n in 1..COLL_TCP_REPORT_MAX). */
static inline int coll__tcp_report_valid(const uint8_t *in, uint64_t n) {
  uint64_t i;
  if (n == 0 || n > COLL_TCP_REPORT_MAX) return 0;
  for (i = 0; i < n; i++)
    if (in[i] < 0x20 || in[i] > 0x7e) return 0;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Handshake: acceptor -> CHALLENGE, connector -> HELLO, acceptor -> WELCOME */
/* ------------------------------------------------------------------------ */
/* The acceptor speaks first with a fresh nonce, so a recorded HELLO cannot
 * be replayed. With a token, HELLO carries HMAC-SHA-256(token, both nonces,
 * job hash, ranks) and WELCOME answers with its own HMAC over the same
 * fields in another order: each side proves it knows the token and the token
 * never travels. Without a token both MACs are zero and unchecked. Only the
 * handshake is authenticated: frames after it are neither encrypted nor
 * integrity-protected. */

enum {
  COLL_TCP_K_CHALLENGE = 0x10,
  COLL_TCP_K_HELLO = 0x11,
  COLL_TCP_K_WELCOME = 0x12,
};

#define COLL_TCP_NONCE_BYTES 16
#define COLL_TCP_HASH_BYTES 32

struct coll_tcp_challenge_layout {
  uint32_t magic;
  uint16_t version;
  uint8_t kind; /* COLL_TCP_K_CHALLENGE */
  uint8_t flags;
  uint32_t rank; /* acceptor's rank */
  uint32_t world;
  uint8_t nonce[COLL_TCP_NONCE_BYTES];
};
#define COLL_TCP_CHALLENGE_BYTES 32
_Static_assert(sizeof(struct coll_tcp_challenge_layout) ==
                   COLL_TCP_CHALLENGE_BYTES,
               "challenge must be 32 bytes");

struct coll_tcp_hello_layout {
  uint32_t magic;
  uint16_t version;
  uint8_t kind; /* COLL_TCP_K_HELLO */
  uint8_t flags;
  uint32_t rank; /* connector's rank */
  uint32_t world;
  uint8_t job[COLL_TCP_HASH_BYTES]; /* SHA-256 of the job id */
  uint8_t nonce[COLL_TCP_NONCE_BYTES];
  uint8_t mac[COLL_TCP_HASH_BYTES];
};
#define COLL_TCP_HELLO_BYTES 96
_Static_assert(sizeof(struct coll_tcp_hello_layout) == COLL_TCP_HELLO_BYTES,
               "hello must be 96 bytes");

struct coll_tcp_welcome_layout {
  uint32_t magic;
  uint16_t version;
  uint8_t kind; /* COLL_TCP_K_WELCOME */
  uint8_t flags;
  uint32_t rank;   /* acceptor's rank */
  uint32_t result; /* COLL_TCP_HS_* */
  uint8_t mac[COLL_TCP_HASH_BYTES];
};
#define COLL_TCP_WELCOME_BYTES 48
_Static_assert(sizeof(struct coll_tcp_welcome_layout) == COLL_TCP_WELCOME_BYTES,
               "welcome must be 48 bytes");

/* Why an acceptor refused a HELLO (sent back in WELCOME.result). */
#define COLL_TCP_HS_RESULTS(X)                                        \
  X(OK, 0, "accepted")                                                \
  X(BAD_MAGIC, 1, "not a libcoll handshake")                          \
  X(BAD_VERSION, 2, "wire protocol versions differ")                  \
  X(BAD_JOB, 3, "job ids differ")                                     \
  X(BAD_WORLD, 4, "world sizes differ")                               \
  X(BAD_RANK, 5, "rank out of range or not expected to connect here") \
  X(DUPLICATE, 6, "rank already connected")                           \
  X(BAD_AUTH, 7, "authentication token differs")

typedef enum coll_tcp_hs_result {
#define COLL_TCP_HS_ENUM_(n, v, t) COLL_TCP_HS_##n = v,
  COLL_TCP_HS_RESULTS(COLL_TCP_HS_ENUM_)
#undef COLL_TCP_HS_ENUM_
} coll_tcp_hs_result_t;

#endif
