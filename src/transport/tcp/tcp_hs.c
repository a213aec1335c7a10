/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_hs.c: the handshake messages: challenge, hello with its token proof,
 * welcome with the verdict and the acceptor's proof. */
#include "transport/tcp/tcp_hs.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "core/sha256.h"

void coll__tcp_hs_ctx_init(coll_tcp_hs_ctx_t *ctx, int rank, int world,
                           const char *job_id, const char *token) {
  memset(ctx, 0, sizeof *ctx);
  ctx->rank = rank;
  ctx->world = world;
  coll__sha256(job_id, strlen(job_id), ctx->job);
  if (token != NULL && token[0] != '\0') {
    ctx->token = token;
    ctx->token_len = strlen(token);
  }
}

coll_status_t coll__tcp_hs_nonce(uint8_t nonce[COLL_TCP_NONCE_BYTES]) {
  /* Synchronous getrandom(2)/urandom through libuv. */
  int rc = uv_random(NULL, NULL, nonce, COLL_TCP_NONCE_BYTES, 0, NULL);
  if (rc != 0)
    return coll_set_last_error(COLL_ERR_SYSTEM,
                               "tcp: no random bytes for a nonce: %s",
                               uv_strerror(rc));
  return COLL_OK;
}

static void put_head(uint8_t *p, uint8_t kind) {
  coll__put_le32(p, COLL_TCP_MAGIC);
  coll__put_le16(p + 4, COLL_TCP_WIRE_VERSION);
  p[6] = kind;
  p[7] = 0;
}

/* The proof of the token over everything both sides agree on. `label` makes
 * the hello and welcome proofs different even over the same fields. */
static void proof(const coll_tcp_hs_ctx_t *ctx, const char *label,
                  const uint8_t *job, const uint8_t *nonce_a,
                  const uint8_t *nonce_b, uint32_t r1, uint32_t r2, uint32_t r3,
                  uint8_t out[COLL_TCP_HASH_BYTES]) {
  uint8_t nums[12];
  coll_bytes_t parts[5];
  if (ctx->token == NULL) {
    memset(out, 0, COLL_TCP_HASH_BYTES);
    return;
  }
  coll__put_le32(nums, r1);
  coll__put_le32(nums + 4, r2);
  coll__put_le32(nums + 8, r3);
  parts[0] = (coll_bytes_t){label, strlen(label) + 1};
  parts[1] = (coll_bytes_t){nonce_a, COLL_TCP_NONCE_BYTES};
  parts[2] = (coll_bytes_t){nonce_b, COLL_TCP_NONCE_BYTES};
  parts[3] = (coll_bytes_t){job, COLL_TCP_HASH_BYTES};
  parts[4] = (coll_bytes_t){nums, sizeof nums};
  coll__hmac_sha256(ctx->token, ctx->token_len, parts, 5, out);
}

void coll__tcp_hs_challenge(const coll_tcp_hs_ctx_t *ctx,
                            const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                            uint8_t out[COLL_TCP_CHALLENGE_BYTES]) {
  put_head(out, COLL_TCP_K_CHALLENGE);
  coll__put_le32(out + 8, (uint32_t)ctx->rank);
  coll__put_le32(out + 12, (uint32_t)ctx->world);
  memcpy(out + 16, nonce_s, COLL_TCP_NONCE_BYTES);
}

/* Magic, version and kind of any handshake message; 0 when fine. */
static int check_head(const uint8_t *in, uint8_t kind, char *why, size_t cap) {
  uint32_t magic = coll__get_le32(in);
  uint16_t version = coll__get_le16(in + 4);
  if (magic != COLL_TCP_MAGIC) {
    snprintf(why, cap, "not a libcoll endpoint (magic 0x%08x)", magic);
    return -1;
  }
  if (version != COLL_TCP_WIRE_VERSION) {
    snprintf(why, cap, "peer speaks wire version %u, this build speaks %u",
             version, COLL_TCP_WIRE_VERSION);
    return -1;
  }
  if (in[6] != kind) {
    snprintf(why, cap, "unexpected handshake message kind 0x%02x", in[6]);
    return -1;
  }
  return 0;
}

coll_status_t coll__tcp_hs_check_challenge(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_CHALLENGE_BYTES],
    int peer, uint8_t nonce_s[COLL_TCP_NONCE_BYTES], char *why, size_t cap) {
  uint32_t rank = coll__get_le32(in + 8), world = coll__get_le32(in + 12);
  if (check_head(in, COLL_TCP_K_CHALLENGE, why, cap) != 0)
    return COLL_ERR_PROTOCOL;
  if (rank != (uint32_t)peer || world != (uint32_t)ctx->world) {
    snprintf(why, cap,
             "the endpoint published for rank %d says it is rank %u of %u",
             peer, rank, world);
    return COLL_ERR_PROTOCOL;
  }
  memcpy(nonce_s, in + 16, COLL_TCP_NONCE_BYTES);
  return COLL_OK;
}

void coll__tcp_hs_hello(const coll_tcp_hs_ctx_t *ctx, int peer,
                        const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                        const uint8_t nonce_c[COLL_TCP_NONCE_BYTES],
                        uint8_t out[COLL_TCP_HELLO_BYTES]) {
  put_head(out, COLL_TCP_K_HELLO);
  coll__put_le32(out + 8, (uint32_t)ctx->rank);
  coll__put_le32(out + 12, (uint32_t)ctx->world);
  memcpy(out + 16, ctx->job, COLL_TCP_HASH_BYTES);
  memcpy(out + 48, nonce_c, COLL_TCP_NONCE_BYTES);
  proof(ctx, "coll-tcp-hello", ctx->job, nonce_s, nonce_c, (uint32_t)ctx->rank,
        (uint32_t)ctx->world, (uint32_t)peer, out + 64);
}

coll_tcp_hs_result_t coll__tcp_hs_check_hello(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_HELLO_BYTES],
    const uint8_t nonce_s[COLL_TCP_NONCE_BYTES], int *peer,
    uint8_t nonce_c[COLL_TCP_NONCE_BYTES]) {
  uint32_t rank = coll__get_le32(in + 8), world = coll__get_le32(in + 12);
  uint8_t mac[COLL_TCP_HASH_BYTES];
  char why[96];
  if (coll__get_le32(in) != COLL_TCP_MAGIC || in[6] != COLL_TCP_K_HELLO)
    return COLL_TCP_HS_BAD_MAGIC;
  if (check_head(in, COLL_TCP_K_HELLO, why, sizeof why) != 0)
    return COLL_TCP_HS_BAD_VERSION;
  if (ctx->token != NULL) {
    proof(ctx, "coll-tcp-hello", in + 16, nonce_s, in + 48, rank, world,
          (uint32_t)ctx->rank, mac);
    if (!coll__bytes_equal_ct(mac, in + 64, sizeof mac))
      return COLL_TCP_HS_BAD_AUTH;
  }
  if (memcmp(in + 16, ctx->job, COLL_TCP_HASH_BYTES) != 0)
    return COLL_TCP_HS_BAD_JOB;
  if (world != (uint32_t)ctx->world) return COLL_TCP_HS_BAD_WORLD;
  /* Rank i connects to every j < i: only higher ranks dial this one. */
  if (rank >= world || rank <= (uint32_t)ctx->rank) return COLL_TCP_HS_BAD_RANK;
  *peer = (int)rank;
  memcpy(nonce_c, in + 48, COLL_TCP_NONCE_BYTES);
  return COLL_TCP_HS_OK;
}

void coll__tcp_hs_welcome(const coll_tcp_hs_ctx_t *ctx, int peer,
                          coll_tcp_hs_result_t result,
                          const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
                          const uint8_t nonce_c[COLL_TCP_NONCE_BYTES],
                          uint8_t out[COLL_TCP_WELCOME_BYTES]) {
  put_head(out, COLL_TCP_K_WELCOME);
  coll__put_le32(out + 8, (uint32_t)ctx->rank);
  coll__put_le32(out + 12, (uint32_t)result);
  if (result == COLL_TCP_HS_OK)
    proof(ctx, "coll-tcp-welcome", ctx->job, nonce_c, nonce_s,
          (uint32_t)ctx->rank, (uint32_t)peer, (uint32_t)result, out + 16);
  else
    memset(out + 16, 0, COLL_TCP_HASH_BYTES);
}

coll_status_t coll__tcp_hs_check_welcome(
    const coll_tcp_hs_ctx_t *ctx, const uint8_t in[COLL_TCP_WELCOME_BYTES],
    int peer, const uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
    const uint8_t nonce_c[COLL_TCP_NONCE_BYTES], char *why, size_t cap) {
  uint32_t rank = coll__get_le32(in + 8), result = coll__get_le32(in + 12);
  uint8_t mac[COLL_TCP_HASH_BYTES];
  if (check_head(in, COLL_TCP_K_WELCOME, why, cap) != 0)
    return COLL_ERR_PROTOCOL;
  if (rank != (uint32_t)peer) {
    snprintf(why, cap, "welcome from rank %u, expected %d", rank, peer);
    return COLL_ERR_PROTOCOL;
  }
  if (result != COLL_TCP_HS_OK) {
    snprintf(why, cap, "rank %d refused the connection: %s", peer,
             coll__tcp_hs_result_text(result));
    return COLL_ERR_PROTOCOL;
  }
  if (ctx->token != NULL) {
    proof(ctx, "coll-tcp-welcome", ctx->job, nonce_c, nonce_s, rank,
          (uint32_t)ctx->rank, result, mac);
    if (!coll__bytes_equal_ct(mac, in + 16, sizeof mac)) {
      snprintf(why, cap,
               "rank %d could not prove it knows the authentication token",
               peer);
      return COLL_ERR_PROTOCOL;
    }
  }
  return COLL_OK;
}

const char *coll__tcp_hs_result_text(uint32_t result) {
  switch (result) {
#define COLL_TCP_HS_TEXT_(n, v, t) \
  case v: return t;
    COLL_TCP_HS_RESULTS(COLL_TCP_HS_TEXT_)
#undef COLL_TCP_HS_TEXT_
  }
  return "unknown reason";
}
