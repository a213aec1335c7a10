// SPDX-License-Identifier: Apache-2.0
// tensors.cpp: dtype and op planning, staging and error texts (tensors.hpp).
#include "tensors.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <sstream>

namespace coll_torch {

std::string failure(const char *what, coll_status_t s) {
  std::ostringstream o;
  o << "coll: " << what << " failed: ";
  if (s == COLL_ERR_TIMEOUT)
    o << "Timed out (" << coll_status_name(s) << "): ";
  else if (s == COLL_ERR_PEER_LOST)
    o << "Connection closed (" << coll_status_name(s) << "): ";
  else
    o << coll_status_name(s) << ": ";
  o << coll_last_error();
  return o.str();
}

bool nativeDtype(at::ScalarType t, coll_dtype_t *out) {
  switch (t) {
    case at::kHalf: *out = COLL_F16; return true;
    case at::kBFloat16: *out = COLL_BF16; return true;
    case at::kFloat: *out = COLL_F32; return true;
    case at::kDouble: *out = COLL_F64; return true;
    case at::kChar: *out = COLL_I8; return true;
    case at::kByte: *out = COLL_U8; return true;
    case at::kInt: *out = COLL_I32; return true;
    case at::kLong: *out = COLL_I64; return true;
    default: return false;
  }
}

at::ScalarType realOf(at::ScalarType t) {
  return at::isComplexType(t) ? c10::toRealValueType(t) : t;
}

Moved moveDesc(const at::Tensor &t) {
  coll_dtype_t dt;
  if (nativeDtype(t.scalar_type(), &dt))
    return {dt, static_cast<size_t>(t.numel())};
  return {COLL_U8, static_cast<size_t>(t.numel()) * t.element_size()};
}

namespace {

const char *opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

coll_op_t nativeOp(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::AVG: return COLL_AVG;
    case c10d::ReduceOp::PRODUCT: return COLL_PROD;
    case c10d::ReduceOp::MIN: return COLL_MIN;
    case c10d::ReduceOp::MAX: return COLL_MAX;
    default: return COLL_SUM;
  }
}

}  // namespace

ReducePlan planReduce(const at::Tensor &t, const c10d::ReduceOp &rop,
                      const char *what) {
  ReducePlan p;
  at::ScalarType st = t.scalar_type();
  auto op = rop.op_;
  if (op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR ||
      op == c10d::ReduceOp::BXOR) {
    TORCH_CHECK(at::isIntegralType(st, /*includeBool=*/true), "coll: ", what,
                ": Cannot use ReduceOp.", opName(op),
                " with non-integral dtype ", st);
    p.kind = ReducePlan::FOLD;
    p.fold = op;
    p.work = st;
    return p;
  }
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM, "coll: ", what,
              ": PREMUL_SUM is supported by allreduce only");
  TORCH_CHECK(op <= c10d::ReduceOp::MAX, "coll: ", what, ": unknown ReduceOp ",
              static_cast<int>(op));
  p.op = nativeOp(op);
  if (st == at::kBool) {
    TORCH_CHECK(op != c10d::ReduceOp::AVG, "coll: ", what,
                ": AVG is not defined on bool tensors");
    // Exact on 0/1: an or (SUM, MAX) or an and (PRODUCT, MIN).
    p.dt = COLL_U8;
    p.op = op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX ? COLL_MAX
                                                                  : COLL_MIN;
    p.work = at::kByte;
  } else if (st == at::kShort) {
    p.dt = COLL_I32;
    p.work = at::kInt;
  } else if (at::isComplexType(st)) {
    TORCH_CHECK(op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG,
                "coll: ", what, ": ", opName(op),
                " is not defined on complex tensors (SUM and AVG are)");
    p.work = realOf(st);
    TORCH_CHECK(nativeDtype(p.work, &p.dt), "coll: ", what, ": dtype ", st,
                " is not supported");
  } else {
    TORCH_CHECK(nativeDtype(st, &p.dt), "coll: ", what, ": dtype ", st,
                " is not supported (libcoll reduces float16, bfloat16, "
                "float32, float64, complex, int8, uint8, int16, int32, "
                "int64 and bool)");
    p.work = st;
  }
  return p;
}

Staged stage(const at::Tensor &user, at::ScalarType dtype, bool fill) {
  Staged s;
  s.user = user;
  at::Tensor src = user.is_complex() ? at::view_as_real(user) : user;
  if (src.is_contiguous() && src.scalar_type() == dtype) {
    s.work = src;
    return s;
  }
  s.work = at::empty(src.sizes(), src.options().dtype(dtype),
                     at::MemoryFormat::Contiguous);
  if (fill) s.work.copy_(src);
  s.copied = true;
  return s;
}

void Staged::finish() const {
  if (!copied) return;
  at::Tensor dst = user.is_complex() ? at::view_as_real(user) : user;
  dst.copy_(work);
}

void *ptr(const at::Tensor &t) {
  return t.numel() > 0 ? t.data_ptr() : nullptr;
}

at::Tensor packBytes(const std::vector<at::Tensor> &parts) {
  int64_t total = 0;
  for (const auto &p : parts) total += p.numel() * p.element_size();
  at::Tensor flat = at::empty({total}, at::TensorOptions().dtype(at::kByte));
  auto *out = static_cast<char *>(flat.data_ptr());
  for (const auto &p : parts) {
    size_t n = static_cast<size_t>(p.numel() * p.element_size());
    if (n == 0) continue;
    at::Tensor c = p.contiguous();
    std::memcpy(out, c.data_ptr(), n);
    out += n;
  }
  return flat;
}

void unpackBytes(const at::Tensor &flat, size_t offset,
                 const std::vector<at::Tensor> &parts) {
  const auto *in = static_cast<const char *>(flat.data_ptr()) + offset;
  for (const auto &p : parts) {
    size_t n = static_cast<size_t>(p.numel() * p.element_size());
    if (n == 0) continue;
    if (p.is_contiguous()) {
      std::memcpy(p.data_ptr(), in, n);
    } else {
      at::Tensor tmp =
          at::empty(p.sizes(), p.options(), at::MemoryFormat::Contiguous);
      std::memcpy(tmp.data_ptr(), in, n);
      p.copy_(tmp);
    }
    in += n;
  }
}

void checkOne(const std::vector<at::Tensor> &tensors, const char *what) {
  TORCH_CHECK(tensors.size() == 1, "coll: ", what,
              " takes one tensor per process, got ", tensors.size());
}

void checkSame(const at::Tensor &a, const at::Tensor &b, const char *what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "coll: ", what,
              ": tensors of different dtypes (", a.scalar_type(), " and ",
              b.scalar_type(), ")");
  TORCH_CHECK(a.device() == b.device(), "coll: ", what,
              ": tensors on different devices (", a.device(), " and ",
              b.device(), ")");
}

void checkRoot(int64_t root, int size, const char *what) {
  TORCH_CHECK(root >= 0 && root < size, "coll: ", what, ": root rank ", root,
              " is not in [0, ", size, ")");
}

}  // namespace coll_torch
