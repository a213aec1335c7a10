// SPDX-License-Identifier: Apache-2.0
// fallback.hpp: what libcoll has no single call for, composed of blocking
// libcoll calls on the group's progress thread: reductions with the
// bitwise ops (every rank's data gathered, then combined with torch's own
// ops) and the sparse allreduce (every rank's indices and values gathered,
// then summed by coalescing, as gloo does).
#pragma once

#include <ATen/ATen.h>

#include <coll.h>

#include "tensors.hpp"

namespace coll_torch {

// Raises failure(what, s) unless s is COLL_OK. Progress thread.
void check(coll_status_t s, const char *what);

// Combines every rank's t (this rank's `rank` of `size`) with plan.fold
// into t: on every rank (root < 0) or on root only. Blocking calls on c.
void foldInPlace(coll_comm_t *c, const at::Tensor &t, const ReducePlan &plan,
                 int root, int rank, int size, const char *what);

// reduce_scatter with plan.fold: rank r's output is block r of every
// rank's `flat` input (size blocks of out.numel() elements) combined.
void foldScatter(coll_comm_t *c, const at::Tensor &flat, const at::Tensor &out,
                 const ReducePlan &plan, int size, const char *what);

// The sum of every rank's sparse COO tensor t (same sizes and dtype on
// every rank, else an error on every rank), coalesced. Blocking calls on c.
at::Tensor sparseSum(coll_comm_t *c, const at::Tensor &t, int rank, int size);

}  // namespace coll_torch
