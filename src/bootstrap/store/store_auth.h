/* SPDX-License-Identifier: Apache-2.0 */
/* store_auth.h: the store handshake's proofs and nonces, over the
 * SHA-256/HMAC in core that the TCP transport's handshake uses too. */
#ifndef COLL_BOOTSTRAP_STORE_AUTH_H
#define COLL_BOOTSTRAP_STORE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "core/sha256.h"

/* The store handshake MAC: HMAC-SHA256(token, label | a | b) over two
 * 32-byte nonces; all zero when token is NULL or empty. Any thread. */
void coll__store_mac(const char *token, const char *label, const uint8_t *a,
                     const uint8_t *b, uint8_t out[COLL_SHA256_BYTES]);

/* Fills buf with n unpredictable bytes (getrandom or /dev/urandom, through
 * libuv). Any thread. */
coll_status_t coll__random_bytes(void *buf, size_t n);

#endif
