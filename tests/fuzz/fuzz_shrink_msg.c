/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_shrink_msg.c: arbitrary bytes through the parser of the survivors'
 * agreement (transport/common/shrink_agree.c: HELLO and EST messages), as one
 * peer's control stream: the first byte picks the old world (1..64), the second
 * the sender's rank in it, then length-prefixed messages (4 bytes, little
 * endian), each decoded as the agreement decodes what a peer sent. Stops
 * at the first refusal, as the agreement then counts the peer as gone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/le.h"
#include "transport/common/shrink_agree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the agreement relies on once a message passed: members below world,
 * every address NUL-terminated inside its slot. */
static void check_view(const coll_shrink_view_t *v) {
  int r;
  for (r = 0; r < v->world; r++) {
    if (v->member[r] > 1) abort();
    if (memchr(v->addr[r], '\0', COLL_SHRINK_ADDR_MAX) == NULL) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  coll_shrink_view_t v;
  int world, from;
  if (size < 2) return 0;
  world = 1 + data[0] % 64;
  from = data[1] % world;
  data += 2;
  size -= 2;
  if (coll__shrink_view_init(&v, world) != COLL_OK) return 0;
  while (size >= 4) {
    uint32_t n = coll__get_le32(data);
    int kind = 0;
    if (n > COLL_SHRINK_MSG_MAX(world) || n > size - 4) break;
    if (coll__shrink_msg_decode(data + 4, n, from, &kind, &v) != COLL_OK) break;
    if (kind != COLL_SHRINK_K_HELLO && kind != COLL_SHRINK_K_EST) abort();
    if (kind == COLL_SHRINK_K_EST && coll__shrink_view_count(&v) == 0) abort();
    check_view(&v);
    data += 4 + n;
    size -= 4 + n;
  }
  coll__shrink_view_free(&v);
  return 0;
}
