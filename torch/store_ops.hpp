// SPDX-License-Identifier: Apache-2.0
// store_ops.hpp: torch's c10d::Store as libcoll's rendezvous store
// (coll_store_ops_t), for coll_comm_init_store.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <coll.h>

namespace coll_torch {

// A table whose slots call `store` and never let a C++ exception cross
// into libcoll: each one becomes a status with coll_set_last_error text.
// The store must outlive every use of the table.
coll_store_ops_t storeOps(c10d::Store *store);

}  // namespace coll_torch
