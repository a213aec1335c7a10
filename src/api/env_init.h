/* SPDX-License-Identifier: Apache-2.0 */
/* env_init.h: the pieces of coll_comm_init_env that tests reach on their
 * own. */
#ifndef COLL_API_ENV_INIT_H
#define COLL_API_ENV_INIT_H

#include <stdint.h>

#include "bootstrap/store/store.h"
#include "coll.h"

/* Builds the NCCL comm for (rank, world) through the store: rank 0 creates
 * the unique id and sets it there, the others wait for it (until
 * timeout_ms); then every rank joins on the device LOCAL_RANK picks.
 * COLL_ERR_NOT_AVAILABLE at once when NCCL is not usable. One thread. */
coll_status_t coll__env_nccl_comm(coll_store_t *store, int rank, int world,
                                  const coll_comm_config_t *cfg,
                                  int64_t timeout_ms, coll_comm_t **out);

#endif
