// SPDX-License-Identifier: Apache-2.0
// compat.hpp: everything in the "coll" backend that depends on the torch
// version, in one place. The backend is written against torch 1.13's
// c10d (Debian 12's libtorch-dev and python3-torch): a backend derives
// from c10d::ProcessGroup and overrides its collectives; a Work derives
// from c10d::Work; PREMUL_SUM carries its factor in NCCL's supplement;
// Python registers a creator with Backend.register_backend(name, fn,
// extended_api).
//
// A port to torch 2's c10d::Backend would change only what is here and the
// registration in python/coll/distributed.py:
//  - Base becomes c10d::Backend (ProcessGroup then wraps backends per
//    device type); the overrides keep their names and signatures, except
//    that ProcessGroup-level calls (getBackendName, options) move to the
//    Backend's.
//  - register_backend gains `devices=["cpu", "cuda"]`, and the creator
//    returns a Backend that torch wraps in a ProcessGroup.
//  - The PREMUL_SUM factor moves to c10d::NCCLPreMulSumSupplement's
//    successor (same fields in 2.0 to 2.4).
//  - Work's profiling constructor is unchanged; OpType gains values.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace coll_torch {

// The torch class this backend derives from.
using Base = c10d::ProcessGroup;

// The factor of a PREMUL_SUM ReduceOp (a double, or one one-element
// tensor); false when op carries none or more than one.
inline bool premulFactor(const c10d::ReduceOp &op, double *factor) {
  const auto *sup =
      dynamic_cast<const c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
  if (sup == nullptr) return false;
  if (sup->tensor_factors.empty()) {
    *factor = sup->double_factor;
    return true;
  }
  if (sup->tensor_factors.size() != 1) return false;
  *factor = sup->tensor_factors[0].item<double>();
  return true;
}

}  // namespace coll_torch
