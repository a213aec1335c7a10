/* SPDX-License-Identifier: Apache-2.0 */
/* shm_ops.h: the shared-memory provider's table, for shm_setup.c. */
#ifndef COLL_TRANSPORT_SHM_OPS_H
#define COLL_TRANSPORT_SHM_OPS_H

#include "transport/provider.h"

const coll_provider_t *coll__shm_provider(void);

#endif
