/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_comm.c: creating, aborting and destroying CPU ring comms. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/cores.h"
#include "core/env.h"
#include "core/log.h"
#include "cpu/cpu_comm.h"
#include "cpu/exec.h"

/* COLL_DEFAULT_RING_THRESHOLD (core/env.h), the bytes from which auto
 * picks the ring over recursive doubling (COLL_RING_THRESHOLD overrides).
 * Recursive doubling is one message per round but reduces the whole buffer on
 * every rank and, from 3 ranks, sends log2 n buffers against the ring's
 * 2(n-1)/n. Over TCP on 127.0.0.1, 2 ranks, coll-perf under coll-run,
 * COLL_ALGO=rd against COLL_ALGO=ring in alternating runs (medians of 3 to 10,
 * on a shared 2-core machine): recursive doubling wins at 64 KiB in every
 * sitting (52 against 94 us; 71 against 100), the ring at 1 MiB in every
 * sitting (774 against 1001; 1075 against 1957); from 128 KiB to 512 KiB the
 * winner changed from one sitting to the next, by up to 2x either way,
 * so the threshold stays at 256 KiB. 3 and 4 ranks: recursive doubling
 * ahead up to 256 KiB, the ring from 512 KiB (one sitting). Between
 * threads the ring is as fast as recursive doubling from 256 KiB. A comm
 * that spans hosts measures its links instead (algo/link_probe.c). */
#define DEFAULT_RING_THRESHOLD ((size_t)COLL_DEFAULT_RING_THRESHOLD)

static void cpu_abort(coll_comm_t *c) {
  coll_cpu_t *cpu = c->be;
  atomic_store(&cpu->aborted, 1);
  /* An aborted rank never shrinks: the others must not wait for it. */
  coll__t_leave(cpu->t);
  coll__t_abort(cpu->t);
}

/* The comm's own timeout unless cfg sets one. */
static int64_t shrink_timeout_ms(const coll_comm_t *c,
                                 const coll_comm_config_t *cfg) {
  if (cfg != NULL &&
      cfg->size >= offsetof(coll_comm_config_t, timeout_ms) + sizeof(int64_t) &&
      cfg->timeout_ms != 0)
    return cfg->timeout_ms;
  return c->timeout_ms;
}

static coll_status_t cpu_shrink(coll_comm_t *c, const coll_comm_config_t *cfg,
                                coll_comm_t **out) {
  coll_cpu_t *cpu = c->be;
  coll_transport_t *nt = NULL;
  int pending;
  coll_status_t s;
  if (coll_is_aborted(c->abort))
    return coll__err(COLL_ERR_ABORTED,
                     "this rank's comm (%s) was aborted: an aborted rank "
                     "leaves the group and cannot shrink",
                     c->name);
  uv_mutex_lock(&cpu->mu);
  pending = cpu->busy || cpu->head != NULL || cpu->p2p != NULL;
  uv_mutex_unlock(&cpu->mu);
  if (pending || cpu->unposted != NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "requests on the comm are still pending: coll_wait each "
                     "one first");
  s = coll__t_shrink(cpu->t, coll__deadline(shrink_timeout_ms(c, cfg)), &nt);
  if (s != COLL_OK) return s;
  return coll__cpu_comm_create(nt, cfg, out);
}

static coll_status_t cpu_destroy(coll_comm_t *c, int aborted) {
  coll_cpu_t *cpu = c->be;
  int pending;
  (void)aborted;
  uv_mutex_lock(&cpu->mu);
  pending = cpu->busy || cpu->head != NULL || cpu->p2p != NULL;
  uv_mutex_unlock(&cpu->mu);
  /* Work still in flight would block until its timeout: abort the
   * transport so it ends now with COLL_ERR_ABORTED. */
  if (pending) coll__t_abort(cpu->t);
  coll__cpu_executor_stop(cpu);
  coll__fedavg_free(cpu->fed, cpu->t);
  cpu->fed = NULL;
  coll__cpu_p2p_reap_all(cpu);
  coll_transport_destroy(cpu->t);
  coll__scratch_free(&cpu->scratch);
  coll__scratch_free(&cpu->work);
  coll__scratch_free(&cpu->extra);
  coll__topo_free(&cpu->topo);
  uv_cond_destroy(&cpu->cv);
  uv_mutex_destroy(&cpu->mu);
  free(cpu);
  c->be = NULL;
  return COLL_OK;
}

static const coll_backend_ops_t cpu_ops = {
    .name = "cpu",
    .submit = coll__cpu_submit,
    .abort = cpu_abort,
    .destroy = cpu_destroy,
    .check_buffer = NULL, /* device memory is staged (staging.h) */
    .prepare = NULL,
    .shrink = cpu_shrink,
};

static void read_tuning(coll_cpu_t *cpu) {
  unsigned cores = coll__host_cores(); /* reads the cgroup files */
  cpu->algo = (int)coll__knob(COLL_ENV_ALGO);
  cpu->ring_threshold = DEFAULT_RING_THRESHOLD;
  if (coll__knob_set(COLL_ENV_RING_THRESHOLD))
    cpu->ring_threshold = (size_t)coll__knob(COLL_ENV_RING_THRESHOLD);
  cpu->two_level_threshold = cpu->ring_threshold;
  cpu->rh_threshold = SIZE_MAX;
  /* The transport knows what it moves best, on a host with a core per
   * rank or fewer; COLL_SEGMENT_BYTES wins. */
  cpu->seg_bytes = coll__t_segment_bytes_for(cpu->t, cores);
  cpu->seg_max_bytes = coll__t_segment_bytes_max_for(cpu->t, cores);
  /* Segments grow against each message's own cost, which a slow link
   * hides, while a longer one fills the ring's pipeline later: 4 hosts on
   * 1 Gbit/s links (bench/multihost.sh 4x1, 4 runs), 64 MiB ran at 0.116
   * GB/s growing against 0.117 with 256 KiB. So only within a host. */
  if (cpu->topo.nhosts > 1) cpu->seg_max_bytes = cpu->seg_bytes;
  cpu->seg_agree = coll__t_segment_varies(cpu->t);
  if (coll__knob_set(COLL_ENV_SEGMENT_BYTES)) {
    /* The one segment at every size, the same on every rank
     * (rdv_compat.c). */
    cpu->seg_bytes = cpu->seg_max_bytes =
        (size_t)coll__knob(COLL_ENV_SEGMENT_BYTES);
    cpu->seg_agree = 0;
  }
  /* On unless set to 0. */
  cpu->check_mismatch = coll__knob(COLL_ENV_CHECK_MISMATCH) != 0;
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
  coll_algo_ctx_t ctx;
  int64_t v[2] = {(int64_t)cpu->seg_bytes, (int64_t)cpu->seg_max_bytes};
  if (!cpu->seg_agree || cpu->comm->world < 2) return COLL_OK;
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__allreduce_rd(&ctx, v, 2, COLL_I64, COLL_MAX));
  if ((size_t)v[0] != cpu->seg_bytes)
    COLL_INFO(COLL_LOG_INIT,
              "segments of %lld bytes, as another rank chose, not %zu",
              (long long)v[0], cpu->seg_bytes);
  cpu->seg_bytes = (size_t)v[0];
  cpu->seg_max_bytes = (size_t)v[1];
  return COLL_OK;
}

/* Whether the comm measures its links for the ring threshold: only where
 * auto chooses between the ring and recursive doubling by size, nobody set
 * the threshold, the ranks talk by messages (shared memory has its own
 * allreduce), and the choice can go either way (3 ranks or more). By
 * default only across hosts: on one host the constant above was measured. */
static int wants_probe(const coll_cpu_t *cpu) {
  int64_t mode = coll__knob(COLL_ENV_LINK_PROBE);
  if (mode == COLL_SWITCH_OFF || cpu->algo != COLL_ALGO_AUTO ||
      cpu->comm->world < 3 || coll__t_shared(cpu->t) != NULL ||
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
  coll_algo_ctx_t ctx;
  coll_link_est_t e;
  if (!wants_probe(cpu)) return COLL_OK;
  coll__cpu_ctx(cpu, &ctx);
  COLL_CHECK(coll__link_probe(&ctx, &e));
  cpu->link = e;
  cpu->ring_threshold = coll__link_ring_threshold(cpu->comm->world, &e);
  cpu->two_level_threshold = cpu->ring_threshold;
  cpu->rh_threshold = coll__link_rh_threshold(cpu->comm->world, &e);
  if (coll__topo_two_level(&cpu->topo))
    cpu->two_level_threshold =
        coll__link_two_level_threshold(cpu->topo.nhosts, cpu->topo.local, &e);
  COLL_INFO(COLL_LOG_INIT,
            "link probe: %.1f us a step, %.3f GB/s: ring from %zu bytes, "
            "two-level from %zu, halving-doubling from %zu",
            e.alpha_s * 1e6, e.s_per_byte > 0 ? 1e-9 / e.s_per_byte : 0.0,
            cpu->ring_threshold, cpu->two_level_threshold, cpu->rh_threshold);
  return COLL_OK;
}

coll_status_t coll__cpu_comm_create(coll_transport_t *t,
                                    const coll_comm_config_t *cfg,
                                    coll_comm_t **out) {
  coll_cpu_t *cpu;
  coll_comm_t *c = NULL;
  coll_status_t s;
  *out = NULL;
  s = coll__knobs_load();
  if (s != COLL_OK) {
    coll_transport_destroy(t);
    return s;
  }
  cpu = calloc(1, sizeof *cpu);
  if (cpu == NULL) {
    coll_transport_destroy(t);
    return coll__err(COLL_ERR_NO_MEMORY, "comm_create: out of memory");
  }
  s = coll__topo_init(&cpu->topo, coll_transport_size(t),
                      coll_transport_rank(t), coll__t_hosts(t));
  if (s != COLL_OK) {
    free(cpu);
    coll_transport_destroy(t);
    return s;
  }
  if (uv_mutex_init(&cpu->mu) != 0) goto sys;
  if (uv_cond_init(&cpu->cv) != 0) {
    uv_mutex_destroy(&cpu->mu);
    goto sys;
  }
  s = coll__comm_new(&cpu_ops, coll_transport_rank(t), coll_transport_size(t),
                     cfg, &c);
  if (s != COLL_OK) {
    uv_cond_destroy(&cpu->cv);
    uv_mutex_destroy(&cpu->mu);
    coll__topo_free(&cpu->topo);
    free(cpu);
    coll_transport_destroy(t);
    return s;
  }
  cpu->comm = c;
  cpu->t = t;
  coll__t_adopt(t, c->timeout_ms);
  atomic_init(&cpu->aborted, 0);
  read_tuning(cpu);
  c->be = cpu;
  s = agree_segment(cpu);
  if (s == COLL_OK) s = link_tuning(cpu);
  if (s != COLL_OK) {
    /* The transport failed with the agreement or the probe: nothing of the
     * comm is usable. */
    (void)cpu_destroy(c, 1);
    coll__comm_free_shell(c);
    return s;
  }
  COLL_INFO(COLL_LOG_INIT,
            "comm %s over %s: %d ranks on %d hosts, timeout %lld ms", c->name,
            coll__t_name(t), coll_transport_size(t), cpu->topo.nhosts,
            (long long)c->timeout_ms);
  *out = c;
  return COLL_OK;
sys:
  coll__topo_free(&cpu->topo);
  free(cpu);
  coll_transport_destroy(t);
  return coll__err(COLL_ERR_SYSTEM, "comm_create: cannot create a mutex");
}
