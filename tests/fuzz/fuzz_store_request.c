/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_store_request.c: arbitrary bytes through the rendezvous store
 * server's request parsing (store_parse.c, what store_conn.c and
 * store_ops.c run on every request), as one client's stream: a header, its
 * body, the next header, ... The first request must be HELLO; once one
 * passed, the connection counts as authenticated (the MAC is not what is
 * fuzzed here). Stops at the first refusal, as the server closes then. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the server relies on once a request passed: keys inside the body,
 * 1..COLL_STORE_KEY_MAX bytes each, without NUL, in order. */
static void check_keys(const uint8_t *body, size_t len, const store_key_t *k,
                       int n, size_t end) {
  size_t prev = 0;
  int i;
  if (end > len) abort();
  for (i = 0; i < n; i++) {
    if (k[i].len == 0 || k[i].len > COLL_STORE_KEY_MAX) abort();
    if (k[i].off < prev + 2 || (size_t)k[i].off + k[i].len > end) abort();
    if (memchr(body + k[i].off, '\0', k[i].len) != NULL) abort();
    prev = (size_t)k[i].off + k[i].len;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int authed = 0;
  while (size >= COLL_STORE_HDR_BYTES) {
    coll_store_hdr_t h;
    char why[160];
    store_key_t *keys;
    uint8_t *body;
    size_t end = 0;
    int bad = -1;
    why[0] = '\0';
    if (coll__store_check_hdr(data, authed, &h, why, sizeof why) != 0) {
      if (why[0] == '\0') abort(); /* a refusal says why */
      return 0;
    }
    data += COLL_STORE_HDR_BYTES;
    size -= COLL_STORE_HDR_BYTES;
    if (h.body_len > size) return 0; /* the client stopped mid-body */
    if (!authed) {
      if (h.code != COLL_STORE_OP_HELLO || h.body_len != COLL_STORE_HELLO_BODY)
        abort();
      authed = 1;
    } else {
      /* The body in a buffer of its exact size, as the server allocates it,
       * so ASan sees a read past it. */
      body = malloc(h.body_len > 0 ? h.body_len : 1);
      keys = malloc((size_t)h.nkeys * sizeof *keys);
      if (body == NULL || keys == NULL) abort();
      memcpy(body, data, h.body_len);
      if (coll__store_split_keys(body, h.body_len, h.nkeys, keys, &end, &bad) ==
          0) {
        check_keys(body, h.body_len, keys, h.nkeys, end);
      } else if (bad < 0 || bad >= h.nkeys) {
        abort();
      }
      free(keys);
      free(body);
      if (bad >= 0) return 0;
    }
    data += h.body_len;
    size -= h.body_len;
  }
  return 0;
}
