// SPDX-License-Identifier: Apache-2.0
// process_group_coll.cpp: torch.distributed's collectives on a libcoll comm.
#include "process_group_coll.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "store_ops.hpp"

namespace coll_torch {
namespace {

// How long a Work waits for its comm to end the call after it aborted it
// (libcoll ends aborted calls within milliseconds).
constexpr std::chrono::seconds kAbortGrace{10};

// A sentence for a failed libcoll call, read on the thread that made it.
std::string failure(const char *what, coll_status_t s) {
  std::ostringstream o;
  o << "coll: " << what << " failed: " << coll_status_name(s) << ": "
    << coll_last_error();
  return o.str();
}

coll_dtype_t collDtype(const at::Tensor &t, const char *what) {
  switch (t.scalar_type()) {
    case at::kHalf: return COLL_F16;
    case at::kBFloat16: return COLL_BF16;
    case at::kFloat: return COLL_F32;
    case at::kDouble: return COLL_F64;
    case at::kChar: return COLL_I8;
    case at::kByte: return COLL_U8;
    case at::kInt: return COLL_I32;
    case at::kLong: return COLL_I64;
    default:
      TORCH_CHECK(false, "coll: ", what, ": dtype ", t.scalar_type(),
                  " is not supported (libcoll has float16, bfloat16, "
                  "float32, float64, int8, uint8, int32, int64)");
  }
}

coll_op_t collOp(const c10d::ReduceOp &op, const char *what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return COLL_SUM;
    case c10d::ReduceOp::AVG: return COLL_AVG;
    case c10d::ReduceOp::PRODUCT: return COLL_PROD;
    case c10d::ReduceOp::MIN: return COLL_MIN;
    case c10d::ReduceOp::MAX: return COLL_MAX;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "coll: ", what,
                  ": bitwise ReduceOps (BAND, BOR, BXOR) are not supported "
                  "(libcoll has SUM, AVG, PRODUCT, MIN, MAX)");
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(false, "coll: ", what,
                  ": PREMUL_SUM is supported by allreduce only");
    default:
      TORCH_CHECK(false, "coll: ", what, ": unknown ReduceOp ",
                  static_cast<int>(op.op_));
  }
}

// Data that only moves (broadcast, allgather, send/recv) may be of any
// dtype libcoll lacks (bool, int16, complex): it then travels as bytes.
void moveDesc(const at::Tensor &t, coll_dtype_t *dt, size_t *count) {
  switch (t.scalar_type()) {
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
    case at::kDouble:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
      *dt = collDtype(t, "");
      *count = static_cast<size_t>(t.numel());
      return;
    default:
      *dt = COLL_U8;
      *count = static_cast<size_t>(t.numel()) * t.element_size();
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

void *ptr(const at::Tensor &t) { return t.data_ptr(); }

using IssueFn =
    std::function<coll_status_t(coll_comm_t *, coll_request_t **, size_t *)>;

// The issue steps that the list and the flat ("_base") forms share: the
// tensors are captured, so they live until the call ended.
IssueFn issueAllgather(at::Tensor in, at::Tensor out, coll_dtype_t dt,
                       size_t count) {
  return [in, out, dt, count](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_iallgather(c, ptr(in), ptr(out), count, dt, nullptr, req);
  };
}

IssueFn issueReduceScatter(at::Tensor in, at::Tensor out, coll_dtype_t dt,
                           size_t count, coll_op_t op) {
  return
      [in, out, dt, count, op](coll_comm_t *c, coll_request_t **req, size_t *) {
        return coll_ireduce_scatter(c, ptr(in), ptr(out), count, dt, op,
                                    nullptr, req);
      };
}

}  // namespace

// ---------------------------------------------------------------------------
// CollWork

CollWork::CollWork(int rank, c10d::OpType type, const char *name,
                   std::vector<at::Tensor> outputs,
                   std::chrono::milliseconds timeout, AbortHandle abort)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      abort_(std::move(abort)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void CollWork::complete(std::exception_ptr eptr) {
  finish(eptr);
  // Futures run their callbacks here (DDP's comm hooks): after finish(),
  // so a callback that waits on this work does not block.
  if (eptr) {
    future_->setError(eptr);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool CollWork::wait(std::chrono::milliseconds timeout) {
  auto bound = timeout == kNoTimeout ? timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  auto is_done = [this] { return completed_; };
  if (bound.count() < 0) {
    cv_.wait(lock, is_done);
  } else if (!cv_.wait_for(lock, bound, is_done)) {
    // A stuck call: abort the comm so this rank fails now and its peers
    // learn it at once, instead of every rank waiting forever.
    lock.unlock();
    coll_abort(abort_.get());
    lock.lock();
    cv_.wait_for(lock, kAbortGrace, is_done);
    TORCH_CHECK(false, "coll: ", name_, " timed out after ", bound.count(),
                " ms; the process group was aborted and fails every later "
                "call");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void CollWork::abort() { coll_abort(abort_.get()); }

// ---------------------------------------------------------------------------
// ProcessGroupColl: creation and the progress thread

void (*ProcessGroupColl::runBlocking)(const std::function<void()> &f) =
    [](const std::function<void()> &f) { f(); };

ProcessGroupColl::ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store,
                                   int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), store_(store), timeout_(timeout) {
  TORCH_CHECK(store_, "coll: the process group needs a store");
  coll_store_ops_t ops = storeOps(store_.get());
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  cfg.timeout_ms = timeout.count() > 0 ? timeout.count() : 0;
  cfg.name = "torch";
  coll_status_t s = coll_comm_init_store(&ops, rank, size, &cfg, &comm_);
  TORCH_CHECK(s == COLL_OK, failure("process group creation", s));
  coll_abort_handle_t *h = nullptr;
  s = coll_comm_abort_handle(comm_, &h);
  if (s != COLL_OK) {
    std::string text = failure("process group creation", s);
    coll_comm_destroy(comm_);
    TORCH_CHECK(false, text);
  }
  abort_ = AbortHandle(h, coll_abort_handle_release);
  const char *backend = coll_comm_backend(comm_);
  device_comm_ = backend != nullptr && std::string(backend) == "nccl";
  try {
    init();
  } catch (...) {
    coll_comm_destroy(comm_);
    throw;
  }
  // Last: a constructor that throws must leave no thread running.
  progress_ = std::thread([this] { progressLoop(); });
}

ProcessGroupColl::~ProcessGroupColl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The thread ends what was issued (bounded by the comm's timeout) first.
  runBlocking([this] { progress_.join(); });
  coll_comm_destroy(comm_);
  ended_.clear();
}

std::string ProcessGroupColl::commBackend() const {
  const char *b = coll_comm_backend(comm_);
  return b ? b : "";
}

void ProcessGroupColl::progressLoop() {
  auto backoff = std::chrono::microseconds(10);
  for (;;) {
    std::deque<std::unique_ptr<CollJob>> fresh;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight_.empty()) {
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      }
      if (stop_ && queue_.empty() && inflight_.empty()) return;
      fresh.swap(queue_);
    }
    for (auto &job : fresh) issue(std::move(job));
    if (inflight_.empty()) continue;
    if (!inflight_.front()->p2p) {
      CollJob &job = *inflight_.front();
      coll_status_t s = coll_wait(job.req);
      finish(job, s);
      retire(std::move(inflight_.front()));
      inflight_.pop_front();
      continue;
    }
    // A receive may wait for a send this rank has not issued yet: poll
    // everything in flight, and issue new work in between.
    bool progressed = false;
    for (auto it = inflight_.begin(); it != inflight_.end();) {
      int done = 0;
      coll_test((*it)->req, &done);
      if (done) {
        finish(**it, coll_wait((*it)->req));
        retire(std::move(*it));
        it = inflight_.erase(it);
        progressed = true;
      } else {
        ++it;
      }
    }
    if (progressed) {
      backoff = std::chrono::microseconds(10);
    } else {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, backoff, [this] { return !queue_.empty(); });
      backoff = std::min(backoff * 2, std::chrono::microseconds(1000));
    }
  }
}

void ProcessGroupColl::issue(std::unique_ptr<CollJob> job) {
  coll_status_t s = job->issue(comm_, &job->req, &job->received);
  if (s != COLL_OK) {
    job->req = nullptr;
    finish(*job, s);
    retire(std::move(job));
    return;
  }
  inflight_.push_back(std::move(job));
}

void ProcessGroupColl::retire(std::unique_ptr<CollJob> job) {
  std::lock_guard<std::mutex> lock(mu_);
  ended_.push_back(std::move(job));
}

void ProcessGroupColl::finish(CollJob &job, coll_status_t s) {
  if (s != COLL_OK) {
    job.work->complete(std::make_exception_ptr(
        std::runtime_error(failure(job.work->name(), s))));
    return;
  }
  try {
    if (job.done) job.done(job.received);
  } catch (...) {
    job.work->complete(std::current_exception());
    return;
  }
  job.work->complete(nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::submit(
    std::unique_ptr<CollJob> job) {
  c10::intrusive_ptr<c10d::Work> work = job->work;
  std::vector<std::unique_ptr<CollJob>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!stop_, "coll: the process group is being destroyed");
    queue_.push_back(std::move(job));
    ended.swap(ended_);
  }
  cv_.notify_all();
  return work;  // `ended` is freed here, on the caller's thread
}

std::chrono::milliseconds ProcessGroupColl::timeoutOf(
    std::chrono::milliseconds t) const {
  return t == c10d::kUnsetTimeout ? timeout_ : t;
}

void ProcessGroupColl::checkDevice(const at::Tensor &t,
                                   const char *what) const {
  TORCH_CHECK(t.defined(), "coll: ", what, ": undefined tensor");
  TORCH_CHECK(t.is_contiguous(), "coll: ", what,
              ": the tensor is not contiguous (call .contiguous() first)");
  TORCH_CHECK(!t.is_sparse(), "coll: ", what,
              ": sparse tensors are not "
              "supported");
  if (device_comm_) {
    TORCH_CHECK(t.is_cuda(), "coll: ", what,
                ": this process group runs on "
                "NCCL and takes CUDA tensors, got one on ",
                t.device());
  } else {
    TORCH_CHECK(t.is_cpu(), "coll: ", what,
                ": this process group runs on "
                "libcoll's CPU backend and takes CPU tensors, got one on ",
                t.device());
  }
}

namespace {

std::unique_ptr<CollJob> newJob(int rank, c10d::OpType type, const char *name,
                                std::vector<at::Tensor> outputs,
                                std::chrono::milliseconds timeout,
                                const AbortHandle &abort) {
  auto job = std::make_unique<CollJob>();
  job->work = c10::make_intrusive<CollWork>(rank, type, name,
                                            std::move(outputs), timeout, abort);
  return job;
}

}  // namespace

// ---------------------------------------------------------------------------
// Collectives. Each checks its arguments on the calling thread (a refusal
// raises before anything is sent) and hands a libcoll call to the progress
// thread. NCCL comms get the legacy default stream (NULL): this extension
// is built without torch's CUDA headers, and coll_wait waits for the GPU.

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::broadcast(
    std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) {
  const char *what = "broadcast";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "coll: ", what,
              ": root rank ", opts.rootRank, " is not in [0, ", getSize(), ")");
  TORCH_CHECK(opts.rootTensor == 0, "coll: ", what, ": rootTensor must be 0");
  coll_dtype_t dt;
  size_t count;
  moveDesc(t, &dt, &count);
  int root = static_cast<int>(opts.rootRank);
  auto job = newJob(rank_, c10d::OpType::BROADCAST, what, {t},
                    timeoutOf(opts.timeout), abort_);
  job->issue = [t, dt, count, root](coll_comm_t *c, coll_request_t **req,
                                    size_t *) {
    return coll_ibroadcast(c, ptr(t), count, dt, root, nullptr, req);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) {
  const char *what = "allreduce";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  coll_dtype_t dt = collDtype(t, what);
  auto job = newJob(rank_, c10d::OpType::ALLREDUCE, what, {t},
                    timeoutOf(opts.timeout), abort_);
  size_t count = static_cast<size_t>(t.numel());
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    // torch 1.13 hands the factor over as NCCL's supplement: a double or a
    // one-element tensor.
    TORCH_CHECK(opts.reduceOp.supplement_, "coll: ", what,
                ": PREMUL_SUM without a factor");
    const auto *sup = static_cast<const c10d::NCCLPreMulSumSupplement *>(
        opts.reduceOp.supplement_.get());
    double factor = sup->double_factor;
    if (!sup->tensor_factors.empty()) {
      TORCH_CHECK(sup->tensor_factors.size() == 1, "coll: ", what,
                  ": PREMUL_SUM takes one factor per process, got ",
                  sup->tensor_factors.size());
      factor = sup->tensor_factors[0].item<double>();
    }
    TORCH_CHECK(t.is_floating_point(), "coll: ", what,
                ": PREMUL_SUM needs a floating-point tensor, got ",
                t.scalar_type());
    float f = static_cast<float>(factor);
    job->issue = [t, dt, count, f](coll_comm_t *c, coll_request_t **req,
                                   size_t *) {
      coll_buffer_t b = {ptr(t), count, dt};
      return coll_iallreduce_premul_sum(c, &b, 1, f, nullptr, req);
    };
  } else {
    coll_op_t op = collOp(opts.reduceOp, what);
    job->issue = [t, dt, count, op](coll_comm_t *c, coll_request_t **req,
                                    size_t *) {
      return coll_iallreduce(c, ptr(t), ptr(t), count, dt, op, nullptr, req);
    };
  }
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce_coalesced(
    std::vector<at::Tensor> &tensors,
    const c10d::AllreduceCoalescedOptions &opts) {
  const char *what = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "coll: ", what, ": no tensors");
  coll_op_t op = collOp(opts.reduceOp, what);
  std::vector<coll_buffer_t> bufs;
  for (const auto &t : tensors) {
    checkDevice(t, what);
    // libcoll reduces buffers of different dtypes in one batch.
    TORCH_CHECK(t.device() == tensors[0].device(), "coll: ", what,
                ": tensors on different devices (", t.device(), " and ",
                tensors[0].device(), ")");
    bufs.push_back(
        {ptr(t), static_cast<size_t>(t.numel()), collDtype(t, what)});
  }
  auto job = newJob(rank_, c10d::OpType::ALLREDUCE_COALESCED, what, tensors,
                    timeoutOf(opts.timeout), abort_);
  job->issue = [bufs, op](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_iallreduce_batch(c, bufs.data(), bufs.size(), op, nullptr, req);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce(
    std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) {
  const char *what = "reduce";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "coll: ", what,
              ": root rank ", opts.rootRank, " is not in [0, ", getSize(), ")");
  TORCH_CHECK(opts.rootTensor == 0, "coll: ", what, ": rootTensor must be 0");
  coll_dtype_t dt = collDtype(t, what);
  coll_op_t op = collOp(opts.reduceOp, what);
  size_t count = static_cast<size_t>(t.numel());
  int root = static_cast<int>(opts.rootRank);
  auto job = newJob(rank_, c10d::OpType::REDUCE, what, {t},
                    timeoutOf(opts.timeout), abort_);
  job->issue = [t, dt, count, op, root](coll_comm_t *c, coll_request_t **req,
                                        size_t *) {
    return coll_ireduce(c, ptr(t), ptr(t), count, dt, op, root, nullptr, req);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allgather(
    std::vector<std::vector<at::Tensor>> &outputs,
    std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) {
  const char *what = "allgather";
  checkOne(inputs, what);
  TORCH_CHECK(outputs.size() == 1, "coll: ", what,
              " takes one output list per process, got ", outputs.size());
  at::Tensor in = inputs[0];
  checkDevice(in, what);
  std::vector<at::Tensor> outs = outputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "coll: ", what,
              ": the output list holds ", outs.size(),
              " tensors, the group has ", getSize(), " ranks");
  for (const auto &o : outs) {
    TORCH_CHECK(o.defined(), "coll: ", what, ": undefined output tensor");
    checkSame(o, in, what);
    TORCH_CHECK(o.numel() == in.numel(), "coll: ", what,
                ": an output tensor has ", o.numel(),
                " elements, the input has ", in.numel());
  }
  coll_dtype_t dt;
  size_t count;
  moveDesc(in, &dt, &count);
  // Gather into one flat buffer, then copy out to the caller's tensors.
  at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
  auto job = newJob(rank_, c10d::OpType::ALLGATHER, what, outs,
                    timeoutOf(opts.timeout), abort_);
  job->issue = issueAllgather(in, flat, dt, count);
  int64_t n = in.numel();
  job->done = [outs, flat, n](size_t) {
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].copy_(
          flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
    }
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::_allgather_base(
    at::Tensor &output, at::Tensor &input, const c10d::AllgatherOptions &opts) {
  const char *what = "_allgather_base";
  checkDevice(input, what);
  checkDevice(output, what);
  checkSame(output, input, what);
  TORCH_CHECK(output.numel() == getSize() * input.numel(), "coll: ", what,
              ": the output has ", output.numel(), " elements, expected ",
              getSize(), " x ", input.numel());
  coll_dtype_t dt;
  size_t count;
  moveDesc(input, &dt, &count);
  at::Tensor in = input, out = output;
  auto job = newJob(rank_, c10d::OpType::_ALLGATHER_BASE, what, {out},
                    timeoutOf(opts.timeout), abort_);
  job->issue = issueAllgather(in, out, dt, count);
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce_scatter(
    std::vector<at::Tensor> &outputs,
    std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts) {
  const char *what = "reduce_scatter";
  checkOne(outputs, what);
  TORCH_CHECK(inputs.size() == 1, "coll: ", what,
              " takes one input list per process, got ", inputs.size());
  at::Tensor out = outputs[0];
  checkDevice(out, what);
  const auto &ins = inputs[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == getSize(), "coll: ", what,
              ": the input list holds ", ins.size(), " tensors, the group has ",
              getSize(), " ranks");
  for (const auto &i : ins) {
    TORCH_CHECK(i.defined(), "coll: ", what, ": undefined input tensor");
    checkSame(i, out, what);
    TORCH_CHECK(i.numel() == out.numel(), "coll: ", what,
                ": an input tensor has ", i.numel(),
                " elements, the output has ", out.numel());
  }
  coll_dtype_t dt = collDtype(out, what);
  coll_op_t op = collOp(opts.reduceOp, what);
  size_t count = static_cast<size_t>(out.numel());
  // The inputs are copied into one flat buffer now, as the caller passed
  // them.
  std::vector<at::Tensor> flat_parts;
  for (const auto &i : ins) flat_parts.push_back(i.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  auto job = newJob(rank_, c10d::OpType::REDUCE_SCATTER, what, {out},
                    timeoutOf(opts.timeout), abort_);
  job->issue = issueReduceScatter(flat, out, dt, count, op);
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input,
    const c10d::ReduceScatterOptions &opts) {
  const char *what = "_reduce_scatter_base";
  checkDevice(input, what);
  checkDevice(output, what);
  checkSame(output, input, what);
  TORCH_CHECK(input.numel() == getSize() * output.numel(), "coll: ", what,
              ": the input has ", input.numel(), " elements, expected ",
              getSize(), " x ", output.numel());
  coll_dtype_t dt = collDtype(output, what);
  coll_op_t op = collOp(opts.reduceOp, what);
  size_t count = static_cast<size_t>(output.numel());
  at::Tensor in = input, out = output;
  auto job = newJob(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, what, {out},
                    timeoutOf(opts.timeout), abort_);
  job->issue = issueReduceScatter(in, out, dt, count, op);
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::barrier(
    const c10d::BarrierOptions &opts) {
  auto job = newJob(rank_, c10d::OpType::BARRIER, "barrier", {},
                    timeoutOf(opts.timeout), abort_);
  job->issue = [](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_ibarrier(c, req);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::send(
    std::vector<at::Tensor> &tensors, int dst, int tag) {
  const char *what = "send";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  TORCH_CHECK(dst >= 0 && dst < getSize() && dst != getRank(), "coll: ", what,
              ": destination rank ", dst, " is not another rank of [0, ",
              getSize(), ")");
  TORCH_CHECK(tag >= 0, "coll: ", what, ": tag ", tag, " is negative");
  coll_dtype_t dt;
  size_t count;
  moveDesc(t, &dt, &count);
  auto job = newJob(rank_, c10d::OpType::SEND, what, {t}, timeout_, abort_);
  job->p2p = true;
  auto utag = static_cast<uint32_t>(tag);
  job->issue = [t, dt, count, dst, utag](coll_comm_t *c, coll_request_t **req,
                                         size_t *) {
    return coll_isend(c, ptr(t), count, dt, dst, utag, req);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recv(
    std::vector<at::Tensor> &tensors, int src, int tag) {
  const char *what = "recv";
  checkOne(tensors, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  TORCH_CHECK(src >= 0 && src < getSize() && src != getRank(), "coll: ", what,
              ": source rank ", src, " is not another rank of [0, ", getSize(),
              ")");
  TORCH_CHECK(tag >= 0, "coll: ", what, ": tag ", tag, " is negative");
  coll_dtype_t dt;
  size_t count;
  moveDesc(t, &dt, &count);
  auto job = newJob(rank_, c10d::OpType::RECV, what, {t}, timeout_, abort_);
  job->p2p = true;
  auto utag = static_cast<uint32_t>(tag);
  job->issue = [t, dt, count, src, utag](coll_comm_t *c, coll_request_t **req,
                                         size_t *received) {
    return coll_irecv(c, ptr(t), count, dt, src, utag, received, req);
  };
  job->done = [count, src](size_t received) {
    TORCH_CHECK(received == count, "coll: recv: expected ", count,
                " elements from rank ", src, ", ", received, " arrived");
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recvAnysource(
    std::vector<at::Tensor> &, int) {
  TORCH_CHECK(false,
              "coll: recv from any source is not supported; name the source "
              "rank");
}

}  // namespace coll_torch
