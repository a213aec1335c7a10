// SPDX-License-Identifier: Apache-2.0
// process_group_coll.cpp: the coll process group's creation, its progress
// thread and the plumbing every call shares. The calls themselves:
// collectives.cpp, gathers.cpp, p2p.cpp, fallback.cpp.
#include "process_group_coll.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

#include "store_ops.hpp"

namespace coll_torch {

void (*ProcessGroupColl::runBlocking)(const std::function<void()> &f) =
    [](const std::function<void()> &f) { f(); };

ProcessGroupColl::ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store,
                                   int rank, int size,
                                   std::chrono::milliseconds timeout)
    : Base(rank, size), store_(store), timeout_(timeout) {
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

// ---------------------------------------------------------------------------
// The progress thread

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
  if (job->run) {
    // Blocking libcoll calls, queued behind what is in flight (libcoll
    // runs a comm's collectives in issue order).
    std::exception_ptr e;
    try {
      job->run(comm_);
    } catch (...) {
      e = std::current_exception();
    }
    job->work->complete(e);
    retire(std::move(job));
    return;
  }
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

// ---------------------------------------------------------------------------
// What every call shares

std::chrono::milliseconds ProcessGroupColl::timeoutOf(
    std::chrono::milliseconds t) const {
  return t == c10d::kUnsetTimeout ? timeout_ : t;
}

void ProcessGroupColl::checkDevice(const at::Tensor &t,
                                   const char *what) const {
  TORCH_CHECK(t.defined(), "coll: ", what, ": undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "coll: ", what,
              ": tensors of layout ", t.layout(),
              " are not supported here (sparse tensors: allreduce)");
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

void ProcessGroupColl::checkTag(int tag, const char *what) const {
  TORCH_CHECK(tag >= 0, "coll: ", what, ": tag ", tag, " is negative");
  TORCH_CHECK(tag < kTagBarrierIn, "coll: ", what, ": tag ", tag,
              " is the process group's own (monitored_barrier); use a tag "
              "below ",
              kTagBarrierIn);
}

std::unique_ptr<CollJob> ProcessGroupColl::newJob(
    c10d::OpType type, const char *name, const char *title,
    const std::vector<at::Tensor> &inputs, std::vector<at::Tensor> outputs,
    std::chrono::milliseconds timeout) const {
  auto job = std::make_unique<CollJob>();
  job->work = c10::make_intrusive<CollWork>(
      rank_, type, name, title, inputs, std::move(outputs), timeout, abort_);
  return job;
}

}  // namespace coll_torch
