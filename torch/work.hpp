// SPDX-License-Identifier: Apache-2.0
// work.hpp: the Work of one call on a coll process group: completed by the
// group's progress thread, waited by torch's threads, a future for DDP's
// comm hooks, and a profiler event from issue to completion.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <vector>

#include <coll.h>

#include "compat.hpp"

namespace coll_torch {

// The comm's abort handle, shared by the process group and its Work
// objects, so a Work can abort the comm even after the group is gone
// (coll_abort on a destroyed comm's handle is a no-op).
using AbortHandle = std::shared_ptr<coll_abort_handle_t>;

// One collective or point-to-point call. wait() waits at most the call's
// timeout; when it expires it aborts the comm (every rank then fails
// instead of hanging) and throws. The future completes with the output
// tensors, or with the error. `title` ("coll:all_reduce") names the
// profiler event, which records `inputs`' shapes, as gloo's and NCCL's do.
class CollWork : public c10d::Work {
 public:
  CollWork(int rank, c10d::OpType type, const char *name, const char *title,
           const std::vector<at::Tensor> &inputs,
           std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
           AbortHandle abort);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }
  // The rank a receive from any source took its message from.
  int sourceRank() const override;

  // Waits at most `timeout` (kNoTimeout: without bound) and returns
  // whether the work ended, without aborting the comm or throwing.
  bool waitFor(std::chrono::milliseconds timeout);
  // The failure the work ended with, or null.
  std::exception_ptr failed() const;

  // Ends the work: success when eptr is null. Called once, by the group's
  // progress thread (or by the issuing thread when the call was refused).
  void complete(std::exception_ptr eptr);

  void setSourceRank(int rank) { source_ = rank; }
  void setOutputs(std::vector<at::Tensor> outputs) {
    outputs_ = std::move(outputs);
  }
  const char *name() const { return name_; }

 private:
  const char *name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  AbortHandle abort_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_{-1};
};

}  // namespace coll_torch
