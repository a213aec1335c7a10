/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tcp_handshake.c: arbitrary bytes through the TCP handshake checks
 * of tcp_hs.c: the HELLO a listener reads from a client it knows nothing
 * about yet, and the CHALLENGE and WELCOME a connector reads back.
 *
 * Input: byte 0 picks the message (bits 0-1: HELLO, CHALLENGE, WELCOME)
 * and whether the job has a token (bit 2); the rest is the message, cut or
 * zero-padded to its size. The job id, token and nonces are fixed, so the
 * seed corpus (fuzz_seeds.c) holds messages that pass. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_hs_fixture.h"
#include "transport/tcp/tcp_hs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t msg[COLL_TCP_HELLO_BYTES] = {0};
  uint8_t nonce_s[COLL_TCP_NONCE_BYTES], nonce_c[COLL_TCP_NONCE_BYTES];
  uint8_t got[COLL_TCP_NONCE_BYTES];
  coll_tcp_hs_ctx_t acceptor, connector;
  char why[160];
  int kind, token, peer = -1;
  if (size < 1) return 0;
  kind = data[0] & 3;
  token = (data[0] >> 2) & 1;
  memcpy(msg, data + 1,
         size - 1 < sizeof msg ? size - 1 : sizeof msg); /* rest stays 0 */
  coll__fuzz_hs_fixture(token, &acceptor, &connector, nonce_s, nonce_c);
  why[0] = '\0';
  if (kind == 0) {
    coll_tcp_hs_result_t r =
        coll__tcp_hs_check_hello(&acceptor, msg, nonce_s, &peer, got);
    /* An accepted HELLO names a rank that may dial the acceptor. */
    if (r == COLL_TCP_HS_OK &&
        (peer <= acceptor.rank || peer >= acceptor.world))
      abort();
    if (coll__tcp_hs_result_text((uint32_t)r)[0] == '\0') abort();
  } else if (kind == 1) {
    coll_status_t s = coll__tcp_hs_check_challenge(
        &connector, msg, acceptor.rank, got, why, sizeof why);
    if (s != COLL_OK && why[0] == '\0') abort(); /* a refusal says why */
  } else {
    coll_status_t s = coll__tcp_hs_check_welcome(
        &connector, msg, acceptor.rank, nonce_s, nonce_c, why, sizeof why);
    if (s != COLL_OK && why[0] == '\0') abort();
    (void)coll__tcp_hs_result_text(coll__get_le32(msg + 12));
  }
  return 0;
}
