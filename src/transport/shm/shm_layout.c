/* SPDX-License-Identifier: Apache-2.0 */
/* shm_layout.c: where the header, rings and cells of a rank's region
 * lie; every rank computes the same from the world size. */
#include "transport/shm/shm_int.h"

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

void coll__shm_layout(int world, shm_layout_t *l) {
  size_t peers = world > 1 ? (size_t)world - 1 : 1;
  size_t cell = sizeof(shm_cell_hdr_t) + SHM_CELL_DATA;
  size_t cells = SHM_REGION_BUDGET / (peers * cell);
  if (cells > SHM_RING_CELLS_MAX) cells = SHM_RING_CELLS_MAX;
  if (cells < SHM_RING_CELLS_MIN) cells = SHM_RING_CELLS_MIN;
  l->cells = (uint32_t)cells;
  l->cell_bytes = cell;
  l->ring_bytes = round_up(sizeof(shm_ring_ctl_t) + cells * cell, 4096);
  /* One ring slot per rank, the owner's own left unused: indexing by rank
   * keeps the arithmetic trivial for a few hundred KiB. */
  l->coll_off =
      round_up(sizeof(shm_hdr_t), 4096) + (size_t)world * l->ring_bytes;
  l->region_bytes = l->coll_off + 4 * (size_t)SHM_COLL_SLOT;
}

shm_ring_ctl_t *coll__shm_ring(void *region, const shm_layout_t *l, int from) {
  uint8_t *base =
      (uint8_t *)region + ((sizeof(shm_hdr_t) + 4095) / 4096) * 4096;
  return (shm_ring_ctl_t *)(base + (size_t)from * l->ring_bytes);
}

shm_cell_hdr_t *coll__shm_cell(shm_ring_ctl_t *ring, const shm_layout_t *l,
                               uint64_t index) {
  uint8_t *cells = (uint8_t *)ring + sizeof(shm_ring_ctl_t);
  return (shm_cell_hdr_t *)(cells + (size_t)(index % l->cells) * l->cell_bytes);
}
