/* SPDX-License-Identifier: Apache-2.0 */
/* position.c: writing and reading a comm's position (a seqlock). */
#include "core/position.h"

#include <sched.h>
#include <string.h>

#include "core/clock.h"

/* meta: kind | op << 8 | dtype << 16 | in_call << 24 | (root + 1) << 32 */
static uint64_t pack_meta(int kind, int op, int dtype, int in_call, int root) {
  return (uint64_t)(kind & 0xff) | (uint64_t)(op & 0xff) << 8 |
         (uint64_t)(dtype & 0xff) << 16 | (uint64_t)(in_call & 1) << 24 |
         (uint64_t)(uint32_t)(root + 1) << 32;
}

void coll__pos_init(coll_pos_t *p) {
  atomic_init(&p->ver, 0);
  atomic_init(&p->seq, 0);
  atomic_init(&p->count, 0);
  atomic_init(&p->meta, pack_meta(0, 0, 0, 0, -1));
  atomic_init(&p->p2p, 0);
}

/* The seqlock's writer side: ver goes odd, the fields change, ver goes
 * even. Without fences (a thread sanitizer does not model them): every
 * field store is a release, so a reader whose acquire load of a field sees
 * the new value also sees ver odd or past it; the even store is a release
 * too, so a reader that sees it sees every field. */
static void write_begin(coll_pos_t *p) {
  uint64_t v = atomic_load_explicit(&p->ver, memory_order_relaxed);
  atomic_store_explicit(&p->ver, v + 1, memory_order_relaxed);
}

static void write_end(coll_pos_t *p) {
  uint64_t v = atomic_load_explicit(&p->ver, memory_order_relaxed);
  atomic_store_explicit(&p->ver, v + 1, memory_order_release);
}

void coll__pos_enter(coll_pos_t *p, int kind, int op, int dtype, uint64_t count,
                     int root) {
  uint64_t seq = atomic_load_explicit(&p->seq, memory_order_relaxed);
  write_begin(p);
  atomic_store_explicit(&p->seq, seq + 1, memory_order_release);
  atomic_store_explicit(&p->count, count, memory_order_release);
  atomic_store_explicit(&p->meta, pack_meta(kind, op, dtype, 1, root),
                        memory_order_release);
  write_end(p);
}

void coll__pos_leave(coll_pos_t *p) {
  uint64_t m = atomic_load_explicit(&p->meta, memory_order_relaxed);
  write_begin(p);
  atomic_store_explicit(&p->meta, m & ~((uint64_t)1 << 24),
                        memory_order_release);
  write_end(p);
}

void coll__pos_p2p(coll_pos_t *p, int kind, int peer, uint32_t tag) {
  uint64_t w = (uint64_t)(kind & 0xff) << 56 |
               (uint64_t)((uint32_t)peer & 0xffffff) << 32 | tag;
  atomic_store_explicit(&p->p2p, kind == COLL_POS_P2P_NONE ? 0 : w,
                        memory_order_relaxed);
}

/* A writer holds ver odd for a few stores, once per collective; a reader
 * that sees it mid-write spins, then yields the core (the writer may be
 * waiting for it), and gives up after READ_GIVE_UP_MS: a process that died
 * or stopped mid-write leaves ver odd in shared memory for good. */
#define READ_SPINS 1000
#define READ_GIVE_UP_MS 200

void coll__pos_read(const coll_pos_t *p, coll_pos_snap_t *out) {
  uint64_t v0, v1, seq, count, meta, w;
  int64_t give_up = -1;
  int tries = 0, settled;
  coll_pos_t *q = (coll_pos_t *)p; /* atomics are read through non-const */
  for (;;) {
    v0 = atomic_load_explicit(&q->ver, memory_order_acquire);
    seq = atomic_load_explicit(&q->seq, memory_order_acquire);
    count = atomic_load_explicit(&q->count, memory_order_acquire);
    meta = atomic_load_explicit(&q->meta, memory_order_acquire);
    v1 = atomic_load_explicit(&q->ver, memory_order_relaxed);
    settled = v0 == v1 && !(v0 & 1);
    if (settled) break;
    if (++tries < READ_SPINS) continue;
    if (give_up < 0) give_up = coll__now_ms() + READ_GIVE_UP_MS;
    if (coll__now_ms() >= give_up) break;
    sched_yield();
  }
  w = atomic_load_explicit(&q->p2p, memory_order_relaxed);
  memset(out, 0, sizeof *out);
  out->unsettled = !settled;
  out->seq = seq;
  out->count = count;
  out->kind = (int)(meta & 0xff);
  out->op = (int)(meta >> 8 & 0xff);
  out->dtype = (int)(meta >> 16 & 0xff);
  out->in_call = (int)(meta >> 24 & 1);
  out->root = (int)(uint32_t)(meta >> 32) - 1;
  out->p2p = (int)(w >> 56);
  out->p2p_peer = (int)(w >> 32 & 0xffffff);
  if (out->p2p_peer == 0xffffff) out->p2p_peer = -1; /* from any rank */
  out->p2p_tag = (uint32_t)w;
}
