// SPDX-License-Identifier: Apache-2.0
// process_group_coll.hpp: a torch.distributed ProcessGroup over a libcoll
// comm, with Work objects that libcoll's nonblocking calls complete.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <coll.h>

namespace coll_torch {

// The comm's abort handle, shared by the process group and its Work
// objects, so a Work can abort the comm even after the group is gone
// (coll_abort on a destroyed comm's handle is a no-op).
using AbortHandle = std::shared_ptr<coll_abort_handle_t>;

// One collective or point-to-point call. wait() waits at most the call's
// timeout; when it expires it aborts the comm (every rank then fails
// instead of hanging) and throws. The future completes with the output
// tensors, or with the error.
class CollWork : public c10d::Work {
 public:
  CollWork(int rank, c10d::OpType type, const char *name,
           std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
           AbortHandle abort);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

  // Ends the work: success when eptr is null. Called once, by the group's
  // progress thread (or by the issuing thread when the call was refused).
  void complete(std::exception_ptr eptr);

  const char *name() const { return name_; }

 private:
  const char *name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  AbortHandle abort_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A libcoll call waiting to be issued or to end. issue() runs on the
// progress thread; done() runs there after the call succeeded (copies out
// of staging buffers) and may throw.
struct CollJob {
  std::function<coll_status_t(coll_comm_t *, coll_request_t **, size_t *)>
      issue;
  std::function<void(size_t received)> done;
  c10::intrusive_ptr<CollWork> work;
  bool p2p = false;
  coll_request_t *req = nullptr;
  size_t received = 0;
};

// The process group. The comm is used by its progress thread only
// (libcoll: one thread per comm); torch's threads hand calls over through
// a locked queue. Collectives end in issue order, so the thread waits for
// the oldest; point-to-point calls may end in any order, so while one is
// the oldest the thread polls instead and keeps issuing.
class ProcessGroupColl : public c10d::ProcessGroup {
 public:
  // Meets the other ranks through `store` (torch's, as init_process_group
  // hands it over) and builds the comm; timeout bounds that and, by
  // default, every call.
  ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                   int size, std::chrono::milliseconds timeout);
  ~ProcessGroupColl() override;

  // Runs f (the destructor's wait for the progress thread), letting other
  // threads take Python's GIL meanwhile if the caller holds it: a future's
  // Python callback on the progress thread needs it. The Python module
  // sets it; the default just runs f.
  static void (*runBlocking)(const std::function<void()> &f);

  const std::string getBackendName() const override { return "coll"; }
  // "cpu" or "nccl": which libcoll backend the comm runs on.
  std::string commBackend() const;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor> &tensors,
      const c10d::BroadcastOptions &opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor> &tensors,
      const c10d::AllreduceOptions &opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor> &tensors,
      const c10d::AllreduceCoalescedOptions &opts =
          c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor> &tensors,
      const c10d::ReduceOptions &opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>> &outputs,
      std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor> &outputs,
      std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ReduceScatterOptions &opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::ReduceScatterOptions &opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions &opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                               int tag) override;

 private:
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds t) const;
  void checkDevice(const at::Tensor &t, const char *what) const;
  c10::intrusive_ptr<c10d::Work> submit(std::unique_ptr<CollJob> job);
  void progressLoop();
  void issue(std::unique_ptr<CollJob> job);
  void retire(std::unique_ptr<CollJob> job);
  static void finish(CollJob &job, coll_status_t s);

  c10::intrusive_ptr<c10d::Store> store_;
  coll_comm_t *comm_ = nullptr;
  AbortHandle abort_;
  std::chrono::milliseconds timeout_;
  bool device_comm_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<CollJob>> queue_;  // guarded by mu_
  // Ended jobs, freed by the issuing threads (submit, the destructor),
  // never by the progress thread: the last reference to a tensor that
  // Python knew takes the GIL to free it, which a thread of ours must not
  // wait for (the GIL's holder may be waiting for us, or Python may be
  // shutting down).
  std::vector<std::unique_ptr<CollJob>> ended_;    // guarded by mu_
  bool stop_ = false;                              // guarded by mu_
  std::deque<std::unique_ptr<CollJob>> inflight_;  // progress thread only
  std::thread progress_;
};

}  // namespace coll_torch
