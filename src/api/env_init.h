/* SPDX-License-Identifier: Apache-2.0 */
/* env_init.h: the pieces of coll_comm_init_env that tests reach on their
 * own. */
#ifndef COLL_API_ENV_INIT_H
#define COLL_API_ENV_INIT_H

#include <stdint.h>

#include "coll.h"

/* Builds the NCCL comm for (rank, world) through the store (libcoll's own,
 * wrapped by coll__store_client_ops, or the caller's): rank 0 creates the
 * unique id and sets it under COLL_KV_UID_KEY, the others wait for it
 * (until timeout_ms; < 0: no bound); then every rank joins on the device
 * LOCAL_RANK picks. COLL_ERR_NOT_AVAILABLE at once when NCCL is not
 * usable. One thread. */
coll_status_t coll__env_nccl_comm(const coll_store_ops_t *store, int rank,
                                  int world, const coll_comm_config_t *cfg,
                                  int64_t timeout_ms, coll_comm_t **out);

#endif
