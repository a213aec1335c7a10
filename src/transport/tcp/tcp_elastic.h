/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_elastic.h: what a TCP endpoint keeps so that its comm can shrink
 * (COLL_ELASTIC=1): a second mesh of control connections, idle until a
 * shrink runs the survivors' agreement over it, and the options to build
 * the survivors' mesh with. The data connections end with a failure (the
 * goodbye, then the write side is shut); the control connections end only
 * when their rank leaves: it aborted its comm, destroyed it, or died. */
#ifndef COLL_TRANSPORT_TCP_ELASTIC_H
#define COLL_TRANSPORT_TCP_ELASTIC_H

#include "transport/common/shrink_agree.h"
#include "transport/tcp/tcp_int.h"
#include "transport/tcp/tcp_sock.h"

struct tcp_elastic {
  int *ctl; /* world control sockets; ctl[rank] = -1 */
  /* A shrink of this endpoint began: its own failure of the data mesh is
   * not a departure. */
  atomic_int shrinking;
  atomic_int left; /* the owner aborted: the control sockets are shut */
  int used;        /* a shrink ran its agreement: the sockets are spent */
  char bind_ip[COLL_TCP_ADDR_MAX];
  char *job_id; /* the caller's, before the elastic suffix */
  char *token;  /* NULL: none */
  int64_t timeout_ms;
  coll_tcp_xopts_t x;
};

/* 1 when COLL_ELASTIC asks for control connections, else 0. Any
 * thread. */
int coll__tcp_elastic_wanted(void);

/* Builds t->el after the data mesh is up and before the loop thread runs:
 * listens, swaps the control listeners' addresses over the data
 * connections, and connects the control mesh. One thread. */
coll_status_t coll__tcp_elastic_setup(tcp_transport_t *t,
                                      const coll_tcp_opts_t *o,
                                      const coll_tcp_xopts_t *x);
/* The owner aborted: shuts every control socket, so the other ranks see
 * this one leave. Any thread; idempotent. */
void coll__tcp_elastic_leave(tcp_transport_t *t);
/* Closes the control sockets and frees t->el. One thread, at destroy. */
void coll__tcp_elastic_free(tcp_transport_t *t);

/* Agreement links over the control sockets (tcp_elastic.c). */
void coll__tcp_elastic_links(tcp_transport_t *t, coll_shrink_links_t *l);

/* tcp_transport.c: the transport over a mesh whose listener lfd (>= 0) the
 * caller made, with or without control connections. */
coll_status_t coll__tcp_transport_build(const coll_tcp_opts_t *o,
                                        const coll_tcp_rdv_t *rdv,
                                        const coll_tcp_xopts_t *x, int elastic,
                                        int lfd, coll_transport_t **out);
/* tcp_transport.c: the fail hook (see transport.h). Any thread. */
void coll__tcp_fail_hook(void *ctx, const coll_origin_t *o);
/* tcp_shrink.c: the shrink hook (see coll__t_shrink). One thread. */
coll_status_t coll__tcp_shrink(void *ctx, int64_t deadline_ms,
                               coll_transport_t **out);

#endif
