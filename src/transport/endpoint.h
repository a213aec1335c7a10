/* SPDX-License-Identifier: Apache-2.0 */
/* endpoint.h: the object behind coll_transport_t, for the files of
 * src/transport/ that implement transport.h. Providers never see it: they
 * see their own ctx, and the algorithms see only transport.h. */
#ifndef COLL_TRANSPORT_ENDPOINT_H
#define COLL_TRANSPORT_ENDPOINT_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/desync.h"
#include "core/position.h"
#include "transport/common/liveness.h"
#include "transport/provider.h"

struct coll_transport {
  coll_provider_t p; /* copied; p.name points at name[] below */
  char name[COLL_TRANSPORT_NAME_MAX];
  void *ctx;
  int rank;
  int world;
  atomic_int aborted;
  /* host_of[r]: the number of rank r's host (hosts numbered by their
   * lowest rank), as learnt at rendezvous (route/); NULL: every rank on
   * one host (a third party's transport, the in-process one). Owned. */
  int *host_of;
  /* 1 for a composite (route/): it reports each send's carrier to the
   * send test hook itself. */
  int composite;
  /* Where the comm over this endpoint is (core/position.h): pos_own, or
   * the provider's (its position slot). The comm's threads write it, the
   * provider answers peers from it. */
  coll_pos_t *pos;
  coll_pos_t pos_own;
  int64_t timeout_ms; /* the comm's, for the desync report; < 0: none */
  /* This rank's own report, written once by the thread that timed out. */
  coll_report_cell_t report;
  /* The provider's rounds table (its rounds slot), or NULL. */
  coll_rounds_t *rounds;
};

/* Ends t for a failure that started at o: its fail slot (the origin t
 * already holds wins), else its abort. Any thread. */
void coll__t_fail_at(coll_transport_t *t, const coll_origin_t *o);

#endif
