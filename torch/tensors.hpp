// SPDX-License-Identifier: Apache-2.0
// tensors.hpp: torch tensors as libcoll buffers: which dtypes and ops
// libcoll reduces natively and how the others travel, contiguous staging
// for strided tensors, and the error texts of failed calls.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <coll.h>

#include "compat.hpp"

namespace coll_torch {

// "coll: <what> failed: <STATUS>: <libcoll's text>", read on the thread
// that made the call. A timeout says "Timed out" and a lost peer "closed",
// the words torch's callers look for in a backend's errors.
std::string failure(const char *what, coll_status_t s);

// libcoll's dtype for t's elements, if libcoll has one.
bool nativeDtype(at::ScalarType t, coll_dtype_t *out);

// Data that only moves (broadcast, gathers, point-to-point): libcoll's
// dtype and count, or bytes (COLL_U8) for dtypes libcoll lacks.
struct Moved {
  coll_dtype_t dt;
  size_t count;
};
Moved moveDesc(const at::Tensor &t);

// How a reduction of tensor t with op runs:
//  - NATIVE: libcoll reduces `dt` with `op` in the staged buffer;
//  - FOLD: libcoll gathers every rank's bytes and they are combined here
//    with torch's own elementwise op (the bitwise ops, which libcoll has
//    not). `fold` names it.
// bool reduces as uint8 (SUM and MAX: or; PRODUCT and MIN: and); int16 in
// int32 (SUM and PRODUCT wrap to 16 bits as torch's own ops do); complex
// as pairs of reals (SUM and AVG only).
struct ReducePlan {
  enum Kind { NATIVE, FOLD } kind = NATIVE;
  coll_dtype_t dt = COLL_F32;
  coll_op_t op = COLL_SUM;
  c10d::ReduceOp::RedOpType fold = c10d::ReduceOp::SUM;
  at::ScalarType work = at::kFloat;  // the staged buffer's dtype
};
// Raises (naming `what`) for an op or dtype that cannot be reduced.
ReducePlan planReduce(const at::Tensor &t, const c10d::ReduceOp &op,
                      const char *what);

// The tensor libcoll works on for `user`: contiguous, in `dtype` (complex
// as pairs of reals): user's own memory where it already is that, else a
// copy, holding user's values when `fill`. finish() copies the result
// back into user where it was a copy.
struct Staged {
  at::Tensor user;
  at::Tensor work;
  bool copied = false;
  void finish() const;
};
Staged stage(const at::Tensor &user, at::ScalarType dtype, bool fill);
// The real dtype a tensor of dtype t travels in: t, or its real half
// for complex.
at::ScalarType realOf(at::ScalarType t);

// A contiguous copy of every tensor of `parts`, concatenated as bytes.
at::Tensor packBytes(const std::vector<at::Tensor> &parts);
// Copies consecutive byte ranges of `flat` (from `offset`) into `parts`.
void unpackBytes(const at::Tensor &flat, size_t offset,
                 const std::vector<at::Tensor> &parts);

void *ptr(const at::Tensor &t);

// Argument checks shared by the collectives; each raises naming `what`.
void checkOne(const std::vector<at::Tensor> &tensors, const char *what);
void checkSame(const at::Tensor &a, const at::Tensor &b, const char *what);
void checkRoot(int64_t root, int size, const char *what);

}  // namespace coll_torch
