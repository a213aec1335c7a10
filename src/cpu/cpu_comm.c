/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_comm.c: creating, aborting and destroying CPU ring comms. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "cpu/cpu_comm.h"
#include "cpu/exec.h"

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

coll_status_t coll__cpu_comm_create(coll_transport_t *t,
                                    const coll_comm_config_t *cfg,
                                    coll_comm_t **out) {
  int rank = coll_transport_rank(t), world = coll_transport_size(t);
  coll_cpu_t *cpu = NULL;
  coll_comm_t *c = NULL;
  int locks = 0; /* made so far: 1 the mutex, 2 the condition too */
  coll_status_t s;
  *out = NULL;
  COLL_CHECK_GOTO(coll__knobs_load(), s, fail);
  cpu = calloc(1, sizeof *cpu);
  if (cpu == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "comm_create: out of memory");
    goto fail;
  }
  COLL_CHECK_GOTO(coll__topo_init(&cpu->topo, world, rank, coll__t_hosts(t)), s,
                  fail);
  if (uv_mutex_init(&cpu->mu) != 0) goto no_lock;
  locks = 1;
  if (uv_cond_init(&cpu->cv) != 0) goto no_lock;
  locks = 2;
  COLL_CHECK_GOTO(coll__comm_new(&cpu_ops, rank, world, cfg, &c), s, fail);
  cpu->comm = c;
  cpu->t = t;
  c->be = cpu; /* from here the comm owns it all */
  coll__t_adopt(t, c->timeout_ms);
  atomic_init(&cpu->aborted, 0);
  /* A failure here is the transport's, in the segment agreement or the
   * link probe: nothing of the comm is usable. */
  COLL_CHECK_GOTO(coll__cpu_tune(cpu), s, fail);
  COLL_INFO(COLL_LOG_INIT,
            "comm %s over %s: %d ranks on %d hosts, timeout %lld ms", c->name,
            coll__t_name(t), world, cpu->topo.nhosts, (long long)c->timeout_ms);
  *out = c;
  return COLL_OK;
no_lock:
  s = coll__err(COLL_ERR_SYSTEM, "comm_create: cannot create a mutex");
fail:
  if (c != NULL) {
    (void)cpu_destroy(c, 1);
    coll__comm_free_shell(c);
    return s;
  }
  if (locks > 1) uv_cond_destroy(&cpu->cv);
  if (locks > 0) uv_mutex_destroy(&cpu->mu);
  if (cpu != NULL) coll__topo_free(&cpu->topo);
  free(cpu);
  coll_transport_destroy(t);
  return s;
}
