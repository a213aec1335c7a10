/* SPDX-License-Identifier: Apache-2.0 */
/* shm_ops.h: the shared-memory transport's vtable, for shm_setup.c. */
#ifndef COLL_TRANSPORT_SHM_OPS_H
#define COLL_TRANSPORT_SHM_OPS_H

#include "coll.h"

const coll_transport_ops_t *coll__shm_ops(void);

#endif
