/* SPDX-License-Identifier: Apache-2.0 */
/* req.h: the CPU backend's request objects. */
#ifndef COLL_CPU_REQ_H
#define COLL_CPU_REQ_H

#include <stdio.h>

#include "cpu/cpu.h"
#include "transport/transport.h"

/* A queued collective. Its own mutex and condition, so it outlives the comm:
 * destroy completes queued requests with ABORTED and the user frees them in
 * coll_wait. */
struct cpu_req {
  coll_request_t hdr;
  cpu_req_t *next;
  coll_cpu_t *cpu; /* NULL once completed */
  coll_work_t work;
  uv_mutex_t mu;
  uv_cond_t cv;
  int done;
  int is_inline; /* blocking fast path: run by coll_wait on the caller */
  coll_status_t status;
  char msg[COLL_ERRMSG_MAX];
};

#endif
