/* SPDX-License-Identifier: Apache-2.0 */
/* link_probe.h: what a comm measures of its links at creation, and the
 * allreduce size from which the ring beats recursive doubling on them. */
#ifndef COLL_ALGO_LINK_PROBE_H
#define COLL_ALGO_LINK_PROBE_H

#include <stddef.h>

#include "algo/algo.h"

/* The slowest link of the comm's ring, as every rank agreed on it: the
 * time of one message step (alpha) and the time per byte (1 / bandwidth). */
typedef struct coll_link_est {
  double alpha_s;
  double s_per_byte;
} coll_link_est_t;

/* Bytes each rank moves around the ring to time the per-byte cost: 1 MiB,
 * so what a link lets through at once (a NIC's or a shaper's burst, 64 KiB
 * on bench/multihost.sh's links) is a small part of it. With 256 KiB the
 * probe saw 0.18-0.73 GB/s on 1 Gbit/s links (0.125), and the thresholds
 * moved from 16 to 126 KB from one run to the next; with 1 MiB it saw
 * 0.12-0.17. */
#define COLL_LINK_PROBE_BYTES ((size_t)1024 * 1024)

/* Times shifts around the ring of positions (to the next, from the
 * previous) of a few bytes and of COLL_LINK_PROBE_BYTES, then takes the
 * slowest rank's figures by an allreduce, so every rank holds the same
 * estimate. Collective: every rank of ctx calls it. */
coll_status_t coll__link_probe(const coll_algo_ctx_t *ctx,
                               coll_link_est_t *out);

/* The allreduce size in bytes from which the ring's time, under the
 * alpha-beta model, is below recursive doubling's for n ranks; SIZE_MAX
 * where doubling is never slower (n <= 2), clamped to
 * [COLL_LINK_RING_MIN, COLL_LINK_RING_MAX] otherwise. */
#define COLL_LINK_RING_MIN ((size_t)16 * 1024)
#define COLL_LINK_RING_MAX ((size_t)16 * 1024 * 1024)
size_t coll__link_ring_threshold(int n, const coll_link_est_t *e);
/* The same for the halving-doubling allreduce (allreduce_rh.c) over n
 * ranks, a power of two (SIZE_MAX otherwise: its fold costs more than the
 * ring); never above the ring's, which sends as much in more steps. */
size_t coll__link_rh_threshold(int n, const coll_link_est_t *e);
/* The same for the two-level allreduce over `hosts` hosts of `local` ranks
 * each against recursive doubling over all of them, every step priced at
 * the slowest link (steps within a host cost less: this errs towards
 * doubling); the same clamps. */
size_t coll__link_two_level_threshold(int hosts, int local,
                                      const coll_link_est_t *e);

#endif
