/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_comm.h: the CPU ring backend's constructor, for the composition root
 * in src/api. */
#ifndef COLL_CPU_CPU_COMM_H
#define COLL_CPU_CPU_COMM_H

#include "coll.h"

/* A CPU ring comm over transport t. Takes t in all cases: on failure it is
 * destroyed. One thread. */
coll_status_t coll__cpu_comm_create(coll_transport_t *t,
                                    const coll_comm_config_t *cfg,
                                    coll_comm_t **out);

#endif
