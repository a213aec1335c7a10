// SPDX-License-Identifier: Apache-2.0
// collectives.cpp: broadcast, the reductions that keep their result in the
// caller's tensors (allreduce, allreduce_coalesced, reduce) and barrier.
// Each checks its arguments on the calling thread (a refusal raises before
// anything is sent) and hands a libcoll call to the progress thread.
// Strided tensors and dtypes libcoll lacks go through staged copies
// (tensors.hpp); NCCL comms get the legacy default stream (NULL): this
// extension is built without torch's CUDA headers, and coll_wait waits for
// the GPU.
#include <c10/util/Exception.h>

#include "fallback.hpp"
#include "process_group_coll.hpp"

namespace coll_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::broadcast(
    std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) {
  const char *what = "broadcast";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  checkRoot(opts.rootRank, getSize(), what);
  TORCH_CHECK(opts.rootTensor == 0, "coll: ", what, ": rootTensor must be 0");
  int root = static_cast<int>(opts.rootRank);
  Staged st = stage(t, t.scalar_type(), root == getRank());
  Moved m = moveDesc(st.work);
  auto job = newJob(c10d::OpType::BROADCAST, what, "coll:broadcast", {t}, {t},
                    timeoutOf(opts.timeout));
  at::Tensor w = st.work;
  job->issue = [w, m, root](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_ibroadcast(c, ptr(w), m.count, m.dt, root, nullptr, req);
  };
  if (st.copied) job->done = [st](size_t) { st.finish(); };
  return submit(std::move(job));
}

namespace {

// allreduce with PREMUL_SUM: every rank's tensor scaled by its own factor,
// then summed.
float premulOf(const c10d::ReduceOp &op, const at::Tensor &t,
               const char *what) {
  double factor = 0;
  TORCH_CHECK(premulFactor(op, &factor), "coll: ", what,
              ": PREMUL_SUM takes one factor per process");
  TORCH_CHECK(t.is_floating_point(), "coll: ", what,
              ": PREMUL_SUM needs a floating-point tensor, got ",
              t.scalar_type());
  return static_cast<float>(factor);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) {
  const char *what = "allreduce";
  const char *title = "coll:all_reduce";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  TORCH_CHECK(t.defined(), "coll: ", what, ": undefined tensor");
  if (t.is_sparse()) return sparseAllreduce(t, opts);
  checkDevice(t, what);
  auto timeout = timeoutOf(opts.timeout);
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    float f = premulOf(opts.reduceOp, t, what);
    coll_dtype_t dt;
    TORCH_CHECK(nativeDtype(t.scalar_type(), &dt), "coll: ", what,
                ": PREMUL_SUM on dtype ", t.scalar_type(), " is not supported");
    Staged st = stage(t, t.scalar_type(), true);
    auto job = newJob(c10d::OpType::ALLREDUCE, what, title, {t}, {t}, timeout);
    at::Tensor w = st.work;
    job->issue = [w, dt, f](coll_comm_t *c, coll_request_t **req, size_t *) {
      coll_buffer_t b = {ptr(w), static_cast<size_t>(w.numel()), dt};
      return coll_iallreduce_premul_sum(c, &b, 1, f, nullptr, req);
    };
    if (st.copied) job->done = [st](size_t) { st.finish(); };
    return submit(std::move(job));
  }
  ReducePlan plan = planReduce(t, opts.reduceOp, what);
  if (plan.kind == ReducePlan::FOLD)
    return foldReduce(what, title, c10d::OpType::ALLREDUCE, t, plan, -1,
                      timeout);
  Staged st = stage(t, plan.work, true);
  auto job = newJob(c10d::OpType::ALLREDUCE, what, title, {t}, {t}, timeout);
  at::Tensor w = st.work;
  coll_dtype_t dt = plan.dt;
  coll_op_t op = plan.op;
  job->issue = [w, dt, op](coll_comm_t *c, coll_request_t **req, size_t *) {
    size_t n = static_cast<size_t>(w.numel());
    return coll_iallreduce(c, ptr(w), ptr(w), n, dt, op, nullptr, req);
  };
  if (st.copied) job->done = [st](size_t) { st.finish(); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce_coalesced(
    std::vector<at::Tensor> &tensors,
    const c10d::AllreduceCoalescedOptions &opts) {
  const char *what = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "coll: ", what, ": no tensors");
  std::vector<Staged> staged;
  std::vector<ReducePlan> plans;
  bool fold = false;
  for (const auto &t : tensors) {
    checkDevice(t, what);
    // libcoll reduces buffers of different dtypes in one batch.
    TORCH_CHECK(t.device() == tensors[0].device(), "coll: ", what,
                ": tensors on different devices (", t.device(), " and ",
                tensors[0].device(), ")");
    plans.push_back(planReduce(t, opts.reduceOp, what));
    fold = fold || plans.back().kind == ReducePlan::FOLD;
  }
  auto job = newJob(c10d::OpType::ALLREDUCE_COALESCED, what, "coll:all_reduce",
                    tensors, tensors, timeoutOf(opts.timeout));
  if (fold) {
    // Bitwise ops: each tensor gathered and combined in turn.
    std::vector<at::Tensor> ts = tensors;
    int rank = getRank(), size = getSize();
    job->run = [ts, plans, rank, size](coll_comm_t *c) {
      for (size_t i = 0; i < ts.size(); i++)
        foldInPlace(c, ts[i], plans[i], -1, rank, size, "allreduce_coalesced");
    };
    return submit(std::move(job));
  }
  std::vector<coll_buffer_t> bufs;
  for (size_t i = 0; i < tensors.size(); i++) {
    staged.push_back(stage(tensors[i], plans[i].work, true));
    const at::Tensor &w = staged.back().work;
    bufs.push_back({ptr(w), static_cast<size_t>(w.numel()), plans[i].dt});
  }
  coll_op_t op = plans[0].op;
  job->issue = [bufs, op, staged](coll_comm_t *c, coll_request_t **req,
                                  size_t *) {
    return coll_iallreduce_batch(c, bufs.data(), bufs.size(), op, nullptr, req);
  };
  job->done = [staged](size_t) {
    for (const auto &st : staged) st.finish();
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce(
    std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) {
  const char *what = "reduce";
  const char *title = "coll:reduce";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  checkRoot(opts.rootRank, getSize(), what);
  TORCH_CHECK(opts.rootTensor == 0, "coll: ", what, ": rootTensor must be 0");
  int root = static_cast<int>(opts.rootRank);
  auto timeout = timeoutOf(opts.timeout);
  ReducePlan plan = planReduce(t, opts.reduceOp, what);
  if (plan.kind == ReducePlan::FOLD)
    return foldReduce(what, title, c10d::OpType::REDUCE, t, plan, root,
                      timeout);
  Staged st = stage(t, plan.work, true);
  auto job = newJob(c10d::OpType::REDUCE, what, title, {t}, {t}, timeout);
  at::Tensor w = st.work;
  coll_dtype_t dt = plan.dt;
  coll_op_t op = plan.op;
  job->issue = [w, dt, op, root](coll_comm_t *c, coll_request_t **req,
                                 size_t *) {
    size_t n = static_cast<size_t>(w.numel());
    return coll_ireduce(c, ptr(w), ptr(w), n, dt, op, root, nullptr, req);
  };
  if (st.copied && root == getRank()) job->done = [st](size_t) { st.finish(); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::barrier(
    const c10d::BarrierOptions &opts) {
  auto job = newJob(c10d::OpType::BARRIER, "barrier", "coll:barrier", {}, {},
                    timeoutOf(opts.timeout));
  job->issue = [](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_ibarrier(c, req);
  };
  return submit(std::move(job));
}

}  // namespace coll_torch
