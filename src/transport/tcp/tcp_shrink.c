/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_shrink.c: shrinking an elastic TCP endpoint: end the old data mesh,
 * agree with the survivors over the control connections on who they are
 * and where each listens, then connect a fresh mesh among them with the
 * ordinary mesh code (renumbered ranks, a job id of its own). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/tcp/tcp_elastic.h"
#include "transport/tcp/tcp_mesh.h"

/* How long the others may take to join when the comm has no timeout. */
#define HELLO_WINDOW_NO_TIMEOUT_MS 30000
/* The survivors' mesh of one attempt when the comm has no timeout, and the
 * least time worth another attempt. */
#define MESH_ATTEMPT_NO_TIMEOUT_MS 30000
#define MESH_ATTEMPT_MIN_MS 1000

typedef struct view_rdv {
  const coll_shrink_view_t *v;
  int *old_of; /* new rank -> old rank */
  int n;
} view_rdv_t;

static coll_status_t view_publish(void *ctx, int rank, const char *addr) {
  (void)ctx;
  (void)rank;
  (void)addr;
  return COLL_OK; /* the agreement carried it */
}

static coll_status_t view_lookup(void *ctx, int rank, char *addr, size_t cap,
                                 int64_t deadline_ms) {
  view_rdv_t *r = ctx;
  (void)deadline_ms;
  if (rank < 0 || rank >= r->n)
    return coll__err(COLL_ERR_INVALID_ARG, "shrink: no rank %d", rank);
  snprintf(addr, cap, "%s", r->v->addr[r->old_of[rank]]);
  return COLL_OK;
}

/* "0, 1, 3" into buf: the old ranks of the members. */
static void members_text(const coll_shrink_view_t *v, char *buf, size_t cap) {
  size_t off = 0;
  int r;
  buf[0] = '\0';
  for (r = 0; r < v->world && off + 16 < cap; r++)
    if (v->member[r])
      off += (size_t)snprintf(buf + off, cap - off, "%s%d", off ? ", " : "", r);
}

static coll_status_t connect_survivors(tcp_transport_t *t,
                                       const coll_shrink_view_t *v, int lfd,
                                       int attempt, int64_t deadline,
                                       coll_transport_t **out) {
  tcp_elastic_t *el = t->el;
  view_rdv_t vr = {v, NULL, coll__shrink_view_count(v)};
  coll_tcp_rdv_t rdv = {&vr, view_publish, view_lookup};
  coll_tcp_opts_t o;
  char job[512];
  int r, k = 0;
  coll_status_t s;
  vr.old_of = malloc((size_t)vr.n * sizeof *vr.old_of);
  if (vr.old_of == NULL) {
    close(lfd);
    return coll__err(COLL_ERR_NO_MEMORY, "shrink: out of memory");
  }
  for (r = 0; r < v->world; r++)
    if (v->member[r]) vr.old_of[k++] = r;
  /* Every survivor derives the same job id, and no connection of the old
   * meshes (or of an earlier attempt) can pass for one of the new. */
  snprintf(job, sizeof job, "%s/shrunk/%d", el->job_id, attempt);
  o.rank = coll__shrink_view_rank(v, t->rank);
  o.world = vr.n;
  o.bind_ip = el->bind_ip;
  o.job_id = job;
  o.token = el->token;
  o.timeout_ms = deadline < 0 ? -1 : coll__remaining_ms(deadline);
  if (o.timeout_ms == 0) o.timeout_ms = 1;
  s = coll__tcp_transport_build(&o, &rdv, &el->x, 1, lfd, out);
  free(vr.old_of);
  return s;
}

/* The survivors' mesh of one attempt is bounded by half of what is left,
 * so that another attempt fits when a member died after the others heard
 * its hello (its listener is gone: the mesh cannot complete). */
static int64_t mesh_deadline(int64_t deadline) {
  int64_t left;
  if (deadline < 0) return coll__now_ms() + MESH_ATTEMPT_NO_TIMEOUT_MS;
  left = coll__remaining_ms(deadline);
  return coll__now_ms() + (left >= 2 * MESH_ATTEMPT_MIN_MS ? left / 2 : left);
}

/* One agreement and the survivors' mesh. *again is set when the mesh
 * failed and there is time for another attempt: every member that failed
 * it comes back, and the agreement's links are at the same place on every
 * side (each completed agreement reads exactly what its peers sent). */
static coll_status_t attempt(tcp_transport_t *t, int n, int64_t deadline,
                             coll_transport_t **out, int *again) {
  tcp_elastic_t *el = t->el;
  coll_shrink_links_t links;
  coll_shrink_view_t v;
  char mine[COLL_TCP_ADDR_MAX], who[256];
  int64_t hello_dl, mesh_dl;
  int lfd = -1;
  coll_status_t s;
  *again = 0;
  COLL_CHECK(coll__shrink_view_init(&v, t->world));
  COLL_CHECK_GOTO(coll__tcp_listen(el->bind_ip, COLL_TCP_BACKLOG,
                                   el->x.sock_buf, &lfd, mine, sizeof mine),
                  s, out);
  hello_dl = deadline < 0 ? coll__now_ms() + HELLO_WINDOW_NO_TIMEOUT_MS
                          : coll__now_ms() + coll__remaining_ms(deadline) / 2;
  coll__tcp_elastic_links(t, &links);
  COLL_CHECK_GOTO(coll__shrink_agree(&links, mine, hello_dl, deadline, &v), s,
                  out);
  if (atomic_load(&el->left)) {
    /* Aborted meanwhile: its links went down under it, so what it decided
     * says nothing about the others. */
    s = coll__err(COLL_ERR_ABORTED,
                  "rank %d was aborted by its owner during the shrink",
                  t->rank);
    goto out;
  }
  members_text(&v, who, sizeof who);
  if (!v.member[t->rank]) {
    s = coll__err(COLL_ERR_PEER_LOST,
                  "the survivors (old ranks %s) left rank %d out: it joined "
                  "their agreement too late",
                  who, t->rank);
    goto out;
  }
  COLL_INFO(COLL_LOG_NET, "tcp: rank %d: survivors are old ranks %s", t->rank,
            who);
  mesh_dl = mesh_deadline(deadline);
  s = connect_survivors(t, &v, lfd, n, mesh_dl, out);
  lfd = -1;
  if (s != COLL_OK && s != COLL_ERR_NO_MEMORY && s != COLL_ERR_SYSTEM &&
      (deadline < 0 || coll__remaining_ms(deadline) >= MESH_ATTEMPT_MIN_MS)) {
    COLL_WARN(COLL_LOG_NET,
              "tcp: rank %d: the survivors' mesh (old ranks %s) failed: %s; "
              "agreeing again",
              t->rank, who, coll_last_error());
    *again = 1;
  }
out:
  if (lfd >= 0) close(lfd);
  coll__shrink_view_free(&v);
  return s;
}

coll_status_t coll__tcp_shrink(void *ctx, int64_t deadline,
                               coll_transport_t **out) {
  tcp_transport_t *t = ctx;
  tcp_elastic_t *el = t->el;
  coll_origin_t o = coll__origin_local(t->rank, COLL_ERR_ABORTED);
  coll_status_t s;
  int n, again = 1;
  if (el == NULL)
    return coll__err(COLL_ERR_NOT_AVAILABLE,
                     "the 'tcp' transport cannot shrink (the TCP transport "
                     "with COLL_ELASTIC=1 and the in-process one can)");
  if (atomic_load(&el->left))
    return coll__err(COLL_ERR_ABORTED,
                     "rank %d was aborted by its owner and left the comm",
                     t->rank);
  if (el->used)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "this comm was shrunk before: shrink the comm that "
                     "shrink returned");
  el->used = 1;
  /* The old data mesh ends here, for this rank's part: its pending work
   * fails and peers still in a collective learn why. */
  atomic_store(&el->shrinking, 1);
  coll__tcp_fail_hook(t, &o);
  s = COLL_OK;
  for (n = 1; again; n++) s = attempt(t, n, deadline, out, &again);
  return s;
}
