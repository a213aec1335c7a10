// SPDX-License-Identifier: Apache-2.0
// work.cpp: the Work of one call (work.hpp).
#include "work.hpp"

#include <c10/util/Exception.h>

namespace coll_torch {
namespace {

// How long a Work waits for its comm to end the call after it aborted it
// (libcoll ends aborted calls within milliseconds).
constexpr std::chrono::seconds kAbortGrace{10};

}  // namespace

CollWork::CollWork(int rank, c10d::OpType type, const char *name,
                   const char *title, const std::vector<at::Tensor> &inputs,
                   std::vector<at::Tensor> outputs,
                   std::chrono::milliseconds timeout, AbortHandle abort)
    : c10d::Work(rank, type, title,
                 c10::optional<std::vector<at::Tensor>>(inputs)),
      name_(name),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      abort_(std::move(abort)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void CollWork::complete(std::exception_ptr eptr) {
  // Ends the profiler event too.
  finish(eptr);
  // Futures run their callbacks here (DDP's comm hooks): after finish(),
  // so a callback that waits on this work does not block.
  if (eptr) {
    future_->setError(eptr);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool CollWork::waitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto is_done = [this] { return completed_; };
  if (timeout.count() < 0) {
    cv_.wait(lock, is_done);
    return true;
  }
  return cv_.wait_for(lock, timeout, is_done);
}

std::exception_ptr CollWork::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

bool CollWork::wait(std::chrono::milliseconds timeout) {
  auto bound = timeout == kNoTimeout ? timeout_ : timeout;
  if (!waitFor(bound)) {
    // A stuck call: abort the comm so this rank fails now and its peers
    // learn it at once, instead of every rank waiting forever.
    coll_abort(abort_.get());
    waitFor(kAbortGrace);
    TORCH_CHECK(false, "coll: ", name_, ": Timed out after ", bound.count(),
                " ms; the process group was aborted and fails every later "
                "call");
  }
  std::exception_ptr e = failed();
  if (e) std::rethrow_exception(e);
  return true;
}

void CollWork::abort() { coll_abort(abort_.get()); }

int CollWork::sourceRank() const {
  int r = source_.load();
  TORCH_CHECK(r >= 0,
              "coll: sourceRank() is known only for a receive from "
              "any source that completed");
  return r;
}

}  // namespace coll_torch
