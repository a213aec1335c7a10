/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_hs.h: building and checking the handshake messages of wire.h. Pure
 * functions over byte arrays (the socket work is in tcp_mesh.c); any thread. */
#ifndef COLL_TRANSPORT_TCP_HS_H
#define COLL_TRANSPORT_TCP_HS_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "transport/tcp/wire.h"

/* What this rank proves and checks in every handshake. */
typedef struct coll_tcp_hs_ctx {
  int rank;
  int world;
  uint8_t job[COLL_TCP_HASH_BYTES]; /* SHA-256 of the job id */
  const char *token;                /* NULL: no token */
  size_t token_len;
} coll_tcp_hs_ctx_t;

/* Fills ctx from the transport options (job id hashed, "" token = none). */
void coll__tcp_hs_ctx_init(coll_tcp_hs_ctx_t *ctx, int rank, int world,
                           const char *job_id, const char *token);

/* A fresh random nonce. Returns COLL_ERR_SYSTEM if the OS has no entropy. */
coll_status_t coll__tcp_hs_nonce(uint8_t nonce[COLL_TCP_NONCE_BYTES]);

/* Acceptor, first message. */
void coll__tcp_hs_challenge(const coll_tcp_hs_ctx_t *ctx,
                            const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                            uint8_t out[COLL_TCP_CHALLENGE_BYTES]);

/* Connector: checks a CHALLENGE from the rank it dialled and extracts the
 * acceptor's nonce. On failure writes a sentence into why and returns
 * COLL_ERR_PROTOCOL. */
coll_status_t coll__tcp_hs_check_challenge(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_CHALLENGE_BYTES],
    int peer, uint8_t nonce_s[COLL_TCP_NONCE_BYTES], char *why, size_t cap);

/* Connector, second message: its rank and the proof for rank `peer`. */
void coll__tcp_hs_hello(const coll_tcp_hs_ctx_t *ctx, int peer,
                        const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                        const uint8_t nonce_c[COLL_TCP_NONCE_BYTES],
                        uint8_t out[COLL_TCP_HELLO_BYTES]);

/* Acceptor: checks a HELLO against its challenge nonce. Returns
 * COLL_TCP_HS_OK with *peer (a rank above ctx->rank that is expected to
 * connect here) and the connector's nonce, or why it refuses. Whether the
 * rank is already connected is the caller's to check. */
coll_tcp_hs_result_t coll__tcp_hs_check_hello(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_HELLO_BYTES],
    const uint8_t nonce_s[COLL_TCP_NONCE_BYTES], int *peer,
    uint8_t nonce_c[COLL_TCP_NONCE_BYTES]);

/* Acceptor, last message: the verdict (and the acceptor's proof). */
void coll__tcp_hs_welcome(const coll_tcp_hs_ctx_t *ctx, int peer,
                          coll_tcp_hs_result_t result,
                          const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                          const uint8_t nonce_c[COLL_TCP_NONCE_BYTES],
                          uint8_t out[COLL_TCP_WELCOME_BYTES]);

/* Connector: checks the verdict of rank `peer`. A refusal is final and
 * returns COLL_ERR_PROTOCOL with the reason in why. */
coll_status_t coll__tcp_hs_check_welcome(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_WELCOME_BYTES],
    int peer, const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
    const uint8_t nonce_c[COLL_TCP_NONCE_BYTES], char *why, size_t cap);

/* The sentence for a verdict ("job ids differ"). */
const char *coll__tcp_hs_result_text(uint32_t result);

#endif
