/* SPDX-License-Identifier: Apache-2.0 */
/* le.h: little-endian encoding of fixed-size integers into byte buffers,
 * for every wire format libcoll speaks (TCP frames and handshakes, the
 * rendezvous store, the algorithms' agreement messages). Independent of the
 * host's byte order and alignment. Pure functions; any thread. */
#ifndef COLL_CORE_LE_H
#define COLL_CORE_LE_H

#include <stdint.h>

static inline void coll__put_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void coll__put_le32(uint8_t *p, uint32_t v) {
  int i;
  for (i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void coll__put_le64(uint8_t *p, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t coll__get_le16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t coll__get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t coll__get_le64(const uint8_t *p) {
  return (uint64_t)coll__get_le32(p) | (uint64_t)coll__get_le32(p + 4) << 32;
}

#endif
