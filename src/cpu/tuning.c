/* SPDX-License-Identifier: Apache-2.0 */
/* tuning.c: a CPU comm's tuning record (tuning.h), computed once at
 * creation: from the transport's hints (its segment sizes, the sizes its
 * shared memory suits), the ranks' hosts and the knobs; then made the same
 * on every rank (the segment agreement) and, across hosts, fitted to the
 * links (the link probe). Both of those run collectives while the comm is
 * made, and only here. */
#include <stdint.h>

#include "core/cores.h"
#include "core/env.h"
#include "core/log.h"
#include "cpu/cpu.h"

/* COLL_DEFAULT_RING_THRESHOLD (core/env.h), the bytes from which auto
 * picks the ring over recursive doubling (COLL_RING_THRESHOLD overrides).
 * Recursive doubling is one message per round but reduces the whole buffer
 * on every rank and, from 3 ranks, sends log2 n buffers against the ring's
 * 2(n-1)/n. Over TCP on 127.0.0.1, 2 ranks, coll-perf under coll-run,
 * COLL_ALGO=rd against COLL_ALGO=ring in alternating runs (medians of 3 to
 * 10, on a shared 2-core machine): recursive doubling wins at 64 KiB in
 * every sitting (52 against 94 us; 71 against 100), the ring at 1 MiB in
 * every sitting (774 against 1001; 1075 against 1957); from 128 KiB to 512
 * KiB the winner changed from one sitting to the next, by up to 2x either
 * way, so the threshold stays at 256 KiB. 3 and 4 ranks: recursive
 * doubling ahead up to 256 KiB, the ring from 512 KiB (one sitting).
 * Between threads the ring is as fast as recursive doubling from 256 KiB.
 * A comm that spans hosts measures its links instead (algo/link_probe.c). */
#define RING_THRESHOLD ((size_t)COLL_DEFAULT_RING_THRESHOLD)

/* Auto's halving-doubling allreduce ends here: above it the ring, which
 * pipelines each step in segments, measured ahead (bench/multihost.sh
 * 4x1, 1 Gbit/s links: 16 MiB 0.95x the link rate against 0.88x, 64 MiB
 * 0.88x against 0.86x; equal at 1 MiB; at 64 KiB halving-doubling 0.949x,
 * the ring 0.944x). */
#define RH_MAX_BYTES ((size_t)1 << 20)

/* The record from the hints, the hosts and the knobs; no messages. Sets
 * *seg_agree when the segments may differ between ranks until agreed. */
static void from_hints(coll_cpu_t *cpu, int *seg_agree) {
  coll_tuning_t *tu = &cpu->tune;
  coll_transport_t *t = cpu->t;
  unsigned cores = coll__host_cores(); /* reads the cgroup files */
  tu->algo = (int)coll__knob(COLL_ENV_ALGO);
  /* On unless set to 0 (unset is -1: core/env.h). */
  tu->check_mismatch = coll__knob(COLL_ENV_CHECK_MISMATCH) != 0;
  tu->ring_threshold = RING_THRESHOLD;
  if (coll__knob_set(COLL_ENV_RING_THRESHOLD))
    tu->ring_threshold = (size_t)coll__knob(COLL_ENV_RING_THRESHOLD);
  tu->two_level_threshold = tu->ring_threshold;
  tu->rh_threshold = SIZE_MAX;
  tu->rh_max = RH_MAX_BYTES;
  tu->shared = coll__t_rounds(t) != NULL;
  tu->shm_allreduce_below = coll__t_shm_allreduce_below(t);
  tu->shm_others_below = coll__t_shm_others_below(t);
  tu->shm_reduce_scatter_below = coll__t_shm_reduce_scatter_below(t);
  /* The transport knows what it moves best, on a host with a core per
   * rank or fewer; COLL_SEGMENT_BYTES wins. */
  tu->seg_bytes = coll__t_segment_bytes_for(t, cores);
  tu->seg_max_bytes = coll__t_segment_bytes_max_for(t, cores);
  /* Segments grow against each message's own cost, which a slow link
   * hides, while a longer one fills the ring's pipeline later: 4 hosts on
   * 1 Gbit/s links (bench/multihost.sh 4x1, 4 runs), 64 MiB ran at 0.116
   * GB/s growing against 0.117 with 256 KiB. So only within a host. */
  if (cpu->topo.nhosts > 1) tu->seg_max_bytes = tu->seg_bytes;
  *seg_agree = coll__t_segment_varies(t);
  if (coll__knob_set(COLL_ENV_SEGMENT_BYTES)) {
    /* The one segment at every size, the same on every rank (the
     * rendezvous compares the knob). */
    tu->seg_bytes = tu->seg_max_bytes =
        (size_t)coll__knob(COLL_ENV_SEGMENT_BYTES);
    *seg_agree = 0;
  }
}

/* One pipeline segment for the whole comm: the ring's receiver posts one
 * receive per segment of its own size, so ranks that cut differently fail
 * with a length mismatch. The transport's choice hangs on this rank's host
 * (more ranks than cores takes longer segments, tcp_transport.c), and
 * hosts differ, as may the cpuset cgroups of one host's ranks; the comm
 * takes the longest any rank chose. One small allreduce at creation, only
 * where the transport's answer can differ and COLL_SEGMENT_BYTES does not
 * decide. */
static coll_status_t agree_segment(coll_cpu_t *cpu) {
  coll_tuning_t *tu = &cpu->tune;
  coll_algo_ctx_t ctx;
  int64_t v[2] = {(int64_t)tu->seg_bytes, (int64_t)tu->seg_max_bytes};
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__allreduce_rd(&ctx, v, v, 2, COLL_I64, COLL_MAX));
  if ((size_t)v[0] != tu->seg_bytes)
    COLL_INFO(COLL_LOG_INIT,
              "segments of %lld bytes, as another rank chose, not %zu",
              (long long)v[0], tu->seg_bytes);
  tu->seg_bytes = (size_t)v[0];
  tu->seg_max_bytes = (size_t)v[1];
  return COLL_OK;
}

/* Whether the comm measures its links for the ring threshold: only where
 * auto chooses between the ring and recursive doubling by size, nobody set
 * the threshold, the ranks talk by messages (shared memory has its own
 * allreduce), and the choice can go either way (3 ranks or more). By
 * default only across hosts: on one host the constant above was measured. */
static int wants_probe(const coll_cpu_t *cpu) {
  int64_t mode = coll__knob(COLL_ENV_LINK_PROBE);
  if (mode == COLL_SWITCH_OFF || cpu->tune.algo != COLL_ALGO_AUTO ||
      cpu->comm->world < 3 || cpu->tune.shared ||
      coll__knob_set(COLL_ENV_RING_THRESHOLD))
    return 0;
  return mode == COLL_SWITCH_ON || cpu->topo.nhosts > 1;
}

/* Sets the ring threshold from the links, as measured now by every rank,
 * and the two-level allreduce's where it applies: it sends less between
 * hosts than the flat ring in as many steps or fewer, so it pays from a
 * smaller size (about half: on 2 hosts x 2 ranks over 1 Gbit/s links the
 * ring's threshold came out near 64 KiB in some runs, where doubling then
 * ran at 0.71x the link rate and the two-level allreduce at 1.42x). */
static coll_status_t link_tuning(coll_cpu_t *cpu) {
  coll_tuning_t *tu = &cpu->tune;
  coll_algo_ctx_t ctx;
  coll_link_est_t e;
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__link_probe(&ctx, &e));
  tu->link = e;
  tu->ring_threshold = coll__link_ring_threshold(cpu->comm->world, &e);
  tu->two_level_threshold = tu->ring_threshold;
  tu->rh_threshold = coll__link_rh_threshold(cpu->comm->world, &e);
  if (coll__topo_two_level(&cpu->topo))
    tu->two_level_threshold =
        coll__link_two_level_threshold(cpu->topo.nhosts, cpu->topo.local, &e);
  COLL_INFO(COLL_LOG_INIT,
            "link probe: %.1f us a step, %.3f GB/s: ring from %zu bytes, "
            "two-level from %zu, halving-doubling from %zu",
            e.alpha_s * 1e6, e.s_per_byte > 0 ? 1e-9 / e.s_per_byte : 0.0,
            tu->ring_threshold, tu->two_level_threshold, tu->rh_threshold);
  return COLL_OK;
}

coll_status_t coll__cpu_tune(coll_cpu_t *cpu) {
  int seg_agree = 0;
  from_hints(cpu, &seg_agree);
  if (seg_agree && cpu->comm->world > 1) COLL_CHECK(agree_segment(cpu));
  if (wants_probe(cpu)) COLL_CHECK(link_tuning(cpu));
  return COLL_OK;
}
