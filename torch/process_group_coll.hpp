// SPDX-License-Identifier: Apache-2.0
// process_group_coll.hpp: a torch.distributed ProcessGroup over a libcoll
// comm, with Work objects that libcoll's nonblocking calls complete.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

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

#include "compat.hpp"
#include "tensors.hpp"
#include "work.hpp"

namespace coll_torch {

// A libcoll call waiting to be issued or to end, run by the group's
// progress thread. A call is either one nonblocking libcoll call (`issue`,
// then `done` once it succeeded: copies out of staging buffers, checks;
// it may throw) or a sequence of blocking ones (`run`: the composite
// calls, as a sparse allreduce's metadata, then data, then the sum).
struct CollJob {
  std::function<coll_status_t(coll_comm_t *, coll_request_t **, size_t *)>
      issue;
  std::function<void(size_t received)> done;
  std::function<void(coll_comm_t *)> run;
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
class ProcessGroupColl : public Base {
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
  // The timeout calls default to (init_process_group's).
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Point-to-point tags of the group's own (monitoredBarrier's); a user's
  // send or recv on them is refused.
  static constexpr int kTagBarrierIn = 0x7ffffffe;
  static constexpr int kTagBarrierOut = 0x7fffffff;

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
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>> &outputs,
      std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>> &outputs,
      std::vector<at::Tensor> &inputs,
      const c10d::GatherOptions &opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor> &outputs,
      std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ScatterOptions &opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor> &outputs,
      std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ReduceScatterOptions &opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::ReduceScatterOptions &opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor &output, at::Tensor &input,
      std::vector<int64_t> &outputSplitSizes,
      std::vector<int64_t> &inputSplitSizes,
      const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions &opts = c10d::BarrierOptions()) override;
  void monitoredBarrier(const c10d::BarrierOptions &opts,
                        bool waitAllRanks = false) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                               int tag) override;

 private:
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds t) const;
  void checkDevice(const at::Tensor &t, const char *what) const;
  void checkTag(int tag, const char *what) const;
  std::unique_ptr<CollJob> newJob(c10d::OpType type, const char *name,
                                  const char *title,
                                  const std::vector<at::Tensor> &inputs,
                                  std::vector<at::Tensor> outputs,
                                  std::chrono::milliseconds timeout) const;
  c10::intrusive_ptr<c10d::Work> submit(std::unique_ptr<CollJob> job);
  // A reduction libcoll has no op for: every rank's data gathered, then
  // combined here (fallback.cpp). `root` < 0: every rank keeps the result.
  c10::intrusive_ptr<c10d::Work> foldReduce(const char *what, const char *title,
                                            c10d::OpType type, at::Tensor t,
                                            const ReducePlan &plan, int root,
                                            std::chrono::milliseconds timeout);
  // reduce_scatter of one flat input (the list form's, concatenated).
  c10::intrusive_ptr<c10d::Work> reduceScatterFlat(
      const char *what, const at::Tensor &output, const at::Tensor &input,
      const c10d::ReduceScatterOptions &opts);
  c10::intrusive_ptr<c10d::Work> sparseAllreduce(
      at::Tensor t, const c10d::AllreduceOptions &opts);
  // The p2p calls, with the group's own tags allowed (monitoredBarrier).
  c10::intrusive_ptr<CollWork> sendTagged(const at::Tensor &t, int dst,
                                          int tag);
  c10::intrusive_ptr<CollWork> recvTagged(const at::Tensor &t, int src,
                                          int tag);
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
