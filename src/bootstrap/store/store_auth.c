/* SPDX-License-Identifier: Apache-2.0 */
/* store_auth.c: the store handshake's MACs and nonces. */
#include "bootstrap/store/store_auth.h"

#include <string.h>
#include <uv.h>

#include "core/error.h"

void coll__store_mac(const char *token, const char *label, const uint8_t *a,
                     const uint8_t *b, uint8_t out[COLL_SHA256_BYTES]) {
  coll_bytes_t parts[3];
  if (token == NULL || token[0] == '\0') {
    memset(out, 0, COLL_SHA256_BYTES);
    return;
  }
  parts[0] = (coll_bytes_t){label, strlen(label)};
  parts[1] = (coll_bytes_t){a, 32};
  parts[2] = (coll_bytes_t){b, 32};
  coll__hmac_sha256(token, strlen(token), parts, 3, out);
}

coll_status_t coll__random_bytes(void *buf, size_t n) {
  /* No loop and no callback: libuv fills the buffer synchronously. */
  int rc = uv_random(NULL, NULL, buf, n, 0, NULL);
  if (rc != 0)
    return coll__err(COLL_ERR_SYSTEM, "store: no random bytes for a nonce: %s",
                     uv_strerror(rc));
  return COLL_OK;
}
