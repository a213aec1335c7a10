/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_hs_fixture.h: the fixed job, token, ranks and nonces of the
 * handshake fuzzer, shared with the seed generator so its seeds pass. */
#ifndef COLL_TESTS_FUZZ_HS_FIXTURE_H
#define COLL_TESTS_FUZZ_HS_FIXTURE_H

#include <string.h>

#include "transport/tcp/tcp_hs.h"

#define FUZZ_HS_WORLD 4
#define FUZZ_HS_ACCEPTOR 1
#define FUZZ_HS_CONNECTOR 2

static inline void coll__fuzz_hs_fixture(
    int token, coll_tcp_hs_ctx_t *acceptor, coll_tcp_hs_ctx_t *connector,
    uint8_t nonce_s[COLL_TCP_NONCE_BYTES],
    uint8_t nonce_c[COLL_TCP_NONCE_BYTES]) {
  const char *tok = token ? "fuzz-token" : "";
  coll__tcp_hs_ctx_init(acceptor, FUZZ_HS_ACCEPTOR, FUZZ_HS_WORLD, "fuzz-job",
                        tok);
  coll__tcp_hs_ctx_init(connector, FUZZ_HS_CONNECTOR, FUZZ_HS_WORLD, "fuzz-job",
                        tok);
  memset(nonce_s, 0x5a, COLL_TCP_NONCE_BYTES);
  memset(nonce_c, 0xc3, COLL_TCP_NONCE_BYTES);
}

#endif
