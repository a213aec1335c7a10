// SPDX-License-Identifier: Apache-2.0
// p2p.cpp: send, recv, recv from any source, and monitored_barrier, which
// is point-to-point with rank 0, as gloo's is: every rank reports to rank
// 0 on a tag of the group's own, and rank 0, having heard from all within
// the timeout, releases them; otherwise it names the ranks that did not
// arrive, and aborts the group so that the others fail at once.
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <map>
#include <sstream>

#include "process_group_coll.hpp"

namespace coll_torch {

c10::intrusive_ptr<CollWork> ProcessGroupColl::sendTagged(const at::Tensor &t,
                                                          int dst, int tag) {
  const char *what = "send";
  checkDevice(t, what);
  TORCH_CHECK(dst >= 0 && dst < getSize() && dst != getRank(), "coll: ", what,
              ": destination rank ", dst, " is not another rank of [0, ",
              getSize(), ")");
  at::Tensor src = t.contiguous();
  Moved m = moveDesc(src);
  auto job = newJob(c10d::OpType::SEND, what, "coll:send", {t}, {t}, timeout_);
  job->p2p = true;
  auto utag = static_cast<uint32_t>(tag);
  job->issue = [src, m, dst, utag](coll_comm_t *c, coll_request_t **req,
                                   size_t *) {
    return coll_isend(c, ptr(src), m.count, m.dt, dst, utag, req);
  };
  auto work = job->work;
  submit(std::move(job));
  return work;
}

c10::intrusive_ptr<CollWork> ProcessGroupColl::recvTagged(const at::Tensor &t,
                                                          int src, int tag) {
  const char *what = "recv";
  checkDevice(t, what);
  TORCH_CHECK(src >= 0 && src < getSize() && src != getRank(), "coll: ", what,
              ": source rank ", src, " is not another rank of [0, ", getSize(),
              ")");
  Staged st = stage(t, t.scalar_type(), false);
  Moved m = moveDesc(st.work);
  auto job = newJob(c10d::OpType::RECV, what, "coll:recv", {t}, {t}, timeout_);
  job->p2p = true;
  auto utag = static_cast<uint32_t>(tag);
  at::Tensor dst = st.work;
  job->issue = [dst, m, src, utag](coll_comm_t *c, coll_request_t **req,
                                   size_t *received) {
    return coll_irecv(c, ptr(dst), m.count, m.dt, src, utag, received, req);
  };
  job->done = [st, m, src](size_t received) {
    TORCH_CHECK(received == m.count, "coll: recv: expected ", m.count,
                " elements from rank ", src, ", ", received, " arrived");
    st.finish();
  };
  auto work = job->work;
  submit(std::move(job));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::send(
    std::vector<at::Tensor> &tensors, int dst, int tag) {
  checkOne(tensors, "send");
  checkTag(tag, "send");
  return sendTagged(tensors[0], dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recv(
    std::vector<at::Tensor> &tensors, int src, int tag) {
  checkOne(tensors, "recv");
  checkTag(tag, "recv");
  return recvTagged(tensors[0], src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recvAnysource(
    std::vector<at::Tensor> &tensors, int tag) {
  const char *what = "recv from any source";
  checkOne(tensors, what);
  checkTag(tag, what);
  at::Tensor t = tensors[0];
  checkDevice(t, what);
  TORCH_CHECK(getSize() > 1, "coll: ", what,
              ": the group has no other rank to receive from");
  Staged st = stage(t, t.scalar_type(), false);
  Moved m = moveDesc(st.work);
  auto job = newJob(c10d::OpType::RECVANYSOURCE, what, "coll:recvAnySource",
                    {t}, {t}, timeout_);
  job->p2p = true;
  auto utag = static_cast<uint32_t>(tag);
  auto source = std::make_shared<int>(-1);
  at::Tensor dst = st.work;
  job->issue = [dst, m, utag, source](coll_comm_t *c, coll_request_t **req,
                                      size_t *received) {
    return coll_irecv_any(c, ptr(dst), m.count, m.dt, utag, source.get(),
                          received, req);
  };
  CollWork *work = job->work.get();
  job->done = [st, m, source, work](size_t received) {
    TORCH_CHECK(received == m.count, "coll: recv: expected ", m.count,
                " elements from rank ", *source, ", ", received, " arrived");
    st.finish();
    work->setSourceRank(*source);
  };
  return submit(std::move(job));
}

// ---------------------------------------------------------------------------
// monitored_barrier

namespace {

using Clock = std::chrono::steady_clock;

// What is left of `total` since `start` (waitAll: the whole of it, so that
// a rank that used it up does not leave none for the next); < 0: none.
std::chrono::milliseconds remaining(Clock::time_point start,
                                    std::chrono::milliseconds total,
                                    bool waitAll) {
  if (waitAll) return total;
  auto left = total - std::chrono::duration_cast<std::chrono::milliseconds>(
                          Clock::now() - start);
  return left.count() <= 0 ? std::chrono::milliseconds(-1) : left;
}

std::string textOf(const std::exception_ptr &e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error &x) {
    return x.what_without_backtrace();
  } catch (const std::exception &x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

void ProcessGroupColl::monitoredBarrier(const c10d::BarrierOptions &opts,
                                        bool waitAllRanks) {
  auto total = timeoutOf(opts.timeout);
  int rank = getRank(), size = getSize();
  at::Tensor token = at::full({1}, rank, at::kInt);
  if (device_comm_) token = token.cuda();
  if (size == 1) return;
  if (rank != 0) {
    // Only rank 0 enforces the barrier's timeout, so that it, not another
    // rank, reports who is missing; the others wait the group's own.
    auto sent = sendTagged(token, 0, kTagBarrierIn);
    auto got = recvTagged(token, 0, kTagBarrierOut);
    std::exception_ptr e;
    for (auto *w : {sent.get(), got.get()}) {
      if (e) break;
      if (!w->waitFor(timeout_)) {
        coll_abort(abort_.get());
        e = std::make_exception_ptr(std::runtime_error(
            "coll: monitored_barrier: Timed out waiting for rank 0"));
      } else {
        e = w->failed();
      }
    }
    TORCH_CHECK(!e, "Rank ", rank,
                " successfully reached monitoredBarrier, but received errors "
                "while waiting for send/recv from rank 0. Please check rank 0 "
                "logs for faulty rank.\n Original exception: \n",
                e ? textOf(e) : "");
    return;
  }
  auto start = Clock::now();
  std::map<int, c10::intrusive_ptr<CollWork>> arrivals, releases;
  for (int r = 1; r < size; ++r)
    arrivals[r] = recvTagged(at::empty_like(token), r, kTagBarrierIn);
  // Waits each work in turn, as gloo's does: without waitAll, the first
  // rank that fails ends it; with it, every rank that did not answer
  // within the whole timeout is named.
  auto waitLoop = [&](std::map<int, c10::intrusive_ptr<CollWork>> &works) {
    std::vector<int> done, failed;
    for (auto &kv : works) {
      auto left = remaining(start, total, waitAllRanks);
      if (left.count() < 0) {
        coll_abort(abort_.get());
        TORCH_CHECK(
            false, "Rank ", rank, " timed out in monitoredBarrier after ",
            total.count(), " ms.\n",
            done.empty()
                ? std::string("No ranks successfully processed "
                              "in monitoredBarrier.")
                : "Successfully processed ranks: " + c10::Join(", ", done));
      }
      std::exception_ptr e;
      if (!kv.second->waitFor(left))
        e = std::make_exception_ptr(std::runtime_error(
            "coll: monitored_barrier: Timed out waiting for rank " +
            std::to_string(kv.first)));
      else
        e = kv.second->failed();
      if (!e) {
        done.push_back(kv.first);
        continue;
      }
      failed.push_back(kv.first);
      if (!waitAllRanks) {
        coll_abort(abort_.get());
        TORCH_CHECK(false, "[Rank 0]: Rank ", kv.first,
                    " failed to pass monitoredBarrier in ", total.count(),
                    " ms\n Original exception: \n", textOf(e));
      }
    }
    if (!failed.empty()) {
      coll_abort(abort_.get());
      TORCH_CHECK(false, "[Rank 0]: Ranks ", c10::Join(", ", failed),
                  " failed to pass monitoredBarrier in ", total.count(), " ms");
    }
  };
  waitLoop(arrivals);
  for (int r = 1; r < size; ++r)
    releases[r] = sendTagged(token, r, kTagBarrierOut);
  waitLoop(releases);
}

}  // namespace coll_torch
