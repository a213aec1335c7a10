/* SPDX-License-Identifier: Apache-2.0 */
/* run.c: running one work item: staging of device memory, dispatch to the
 * host path of its collective, and which failures stick. */
#include "cpu/exec.h"
#include "cpu/host.h"
#include "cuda/staging.h"
#include "transport/transport.h"

static coll_status_t run_host(void *arg, const coll_work_t *w) {
  coll_cpu_t *cpu = arg;
  switch (w->kind) {
    case COLL_WORK_ALLREDUCE:
    case COLL_WORK_PREMUL_SUM: return coll__cpu_allreduce(cpu, w);
    case COLL_WORK_BROADCAST:
    case COLL_WORK_REDUCE:
    case COLL_WORK_BARRIER: return coll__cpu_rooted(cpu, w);
    case COLL_WORK_ALLGATHER:
    case COLL_WORK_REDUCE_SCATTER: return coll__cpu_gather_scatter(cpu, w);
    case COLL_WORK_NEGOTIATE: return coll__cpu_negotiate(cpu, w);
    case COLL_WORK_FEDAVG: return coll__cpu_fedavg(cpu, w);
    case COLL_WORK_GATHER:
    case COLL_WORK_SCATTER:
    case COLL_WORK_ALLTOALL: return coll__cpu_exchange(cpu, w);
    case COLL_WORK_SEND:
    case COLL_WORK_RECV: break;
  }
  return coll__err(COLL_ERR_INTERNAL, "work kind %d reached the executor",
                   (int)w->kind);
}

/* Failures that leave the ranks' message streams out of step: the comm
 * cannot be trusted afterwards, so they stick. */
static int is_fatal(coll_status_t s) {
  return s == COLL_ERR_ABORTED || s == COLL_ERR_TIMEOUT ||
         s == COLL_ERR_PEER_LOST || s == COLL_ERR_PROTOCOL ||
         s == COLL_ERR_SYSTEM || s == COLL_ERR_INTERNAL;
}

static coll_status_t run_work(coll_cpu_t *cpu, const coll_work_t *w) {
  const char *what = coll__work_what(w);
  coll_status_t s;
  COLL_CHECK(coll__cpu_check_usable(cpu, what));
  coll__err_clear();
  if (coll__work_on_device(w))
    s = coll__staged_run(cpu, w, run_host, &cpu->comm->abort->aborted,
                         cpu->comm->timeout_ms);
  else
    s = run_host(cpu, w);
  if (s == COLL_OK) return COLL_OK;
  if (atomic_load(&cpu->aborted)) {
    s = COLL_ERR_ABORTED;
    coll__err(s, "%s: the comm (%s) was aborted", what, cpu->comm->name);
  } else {
    coll__err_prefix(what);
    coll__cpu_note_report(cpu, s);
  }
  if (is_fatal(s) || coll__t_aborted(cpu->t)) coll__cpu_set_broken(cpu, s);
  return s;
}

/* Runs w with the comm's position saying so (core/position.h): a peer
 * whose collective times out asks where this rank is. */
static coll_status_t run_at(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_pos_t *pos = coll__t_position(cpu->t);
  coll_status_t s;
  coll__pos_enter(
      pos, (int)w->kind, (int)w->op, (int)w->dtype, w->count,
      w->kind == COLL_WORK_BROADCAST || w->kind == COLL_WORK_REDUCE ||
              w->kind == COLL_WORK_GATHER || w->kind == COLL_WORK_SCATTER
          ? w->root
          : -1);
  s = run_work(cpu, w);
  /* A fatal failure leaves the comm unusable where it stopped: peers that
   * time out later still see this rank in the call it failed in. */
  if (!is_fatal(s)) coll__pos_leave(pos);
  return s;
}

coll_status_t coll__cpu_run(coll_cpu_t *cpu, const coll_work_t *w) {
  coll_trace_t *t = cpu->comm->trace;
  coll_status_t s;
  if (t == NULL) return run_at(cpu, w);
  (void)coll__trace_take_peer(); /* forget an earlier collective's */
  s = run_at(cpu, w);
  if (s != COLL_OK) {
    /* A timeout's desync report goes into the dump the timeout writes. */
    char rep[COLL_DESYNC_REPORT_MAX];
    if (coll__t_report(cpu->t, rep, sizeof rep)) coll__trace_set_desync(t, rep);
  }
  /* Here, on the thread that ran it, the end time is exact and the peer of
   * a failed wait is known. */
  coll__trace_end(t, w->trace_seq, s,
                  s != COLL_OK ? coll__trace_take_peer() : -1);
  return s;
}
