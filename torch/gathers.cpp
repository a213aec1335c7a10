// SPDX-License-Identifier: Apache-2.0
// gathers.cpp: the calls whose outputs are other ranks' data: allgather
// (list, flat and coalesced), gather, scatter, reduce_scatter (list and
// flat), alltoall (list and flat, with split sizes). Lists travel in one
// flat buffer and are copied out after the call; data that only moves
// travels as bytes where libcoll lacks its dtype.
#include <c10/util/Exception.h>

#include "fallback.hpp"
#include "process_group_coll.hpp"

namespace coll_torch {
namespace {

// Copies the blocks of `flat` (n elements each) into `outs`, in order.
void copyOut(const at::Tensor &flat, const std::vector<at::Tensor> &outs,
             int64_t n) {
  for (size_t i = 0; i < outs.size(); ++i)
    outs[i].copy_(
        flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
}

// `ins` (of one numel each) one after the other in a new flat tensor.
at::Tensor catFlat(const std::vector<at::Tensor> &ins) {
  std::vector<at::Tensor> parts;
  for (const auto &i : ins) parts.push_back(i.reshape({-1}));
  return at::cat(parts);
}

// Every tensor of `list` (`count` of them) of `like`'s dtype, device and
// element count.
void checkList(const std::vector<at::Tensor> &list, size_t count,
               const at::Tensor &like, const char *what, const char *name) {
  TORCH_CHECK(list.size() == count, "coll: ", what, ": the ", name,
              " list holds ", list.size(), " tensors, the group has ", count,
              " ranks");
  for (const auto &t : list) {
    TORCH_CHECK(t.defined(), "coll: ", what, ": undefined ", name, " tensor");
    checkSame(t, like, what);
    TORCH_CHECK(t.numel() == like.numel(), "coll: ", what, ": an ", name,
                " tensor has ", t.numel(), " elements, expected ",
                like.numel());
  }
}

}  // namespace

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
  checkList(outs, getSize(), in, what, "output");
  at::Tensor src = in.contiguous();
  at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
  Moved m = moveDesc(src);
  auto job = newJob(c10d::OpType::ALLGATHER, what, "coll:all_gather", {in},
                    outs, timeoutOf(opts.timeout));
  job->issue = [src, flat, m](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_iallgather(c, ptr(src), ptr(flat), m.count, m.dt, nullptr, req);
  };
  int64_t n = in.numel();
  job->done = [outs, flat, n](size_t) { copyOut(flat, outs, n); };
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
  at::Tensor src = input.contiguous();
  Staged out = stage(output, output.scalar_type(), false);
  Moved m = moveDesc(src);
  auto job =
      newJob(c10d::OpType::_ALLGATHER_BASE, what, "coll:all_gather_into_tensor",
             {input}, {output}, timeoutOf(opts.timeout));
  at::Tensor dst = out.work;
  job->issue = [src, dst, m](coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_iallgather(c, ptr(src), ptr(dst), m.count, m.dt, nullptr, req);
  };
  if (out.copied) job->done = [out](size_t) { out.finish(); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &outputs,
    std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) {
  const char *what = "allgather_coalesced";
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "coll: ", what,
              ": ", outputs.size(), " output lists for a group of ", getSize(),
              " ranks");
  for (const auto &t : inputs) checkDevice(t, what);
  for (const auto &list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "coll: ", what,
                ": an output list holds ", list.size(), " tensors, the input ",
                inputs.size());
    for (size_t j = 0; j < list.size(); ++j) {
      checkSame(list[j], inputs[j], what);
      TORCH_CHECK(list[j].numel() == inputs[j].numel(), "coll: ", what,
                  ": output tensor ", j, " has ", list[j].numel(),
                  " elements, its input ", inputs[j].numel());
    }
  }
  // One allgather of every input's bytes, one after the other.
  at::Tensor flat = packBytes(inputs);
  size_t bytes = static_cast<size_t>(flat.numel());
  at::Tensor all =
      at::empty({getSize() * flat.numel()},
                flat.options().device(inputs.empty() ? at::Device(at::kCPU)
                                                     : inputs[0].device()));
  std::vector<at::Tensor> outs;
  for (const auto &list : outputs)
    outs.insert(outs.end(), list.begin(), list.end());
  auto job = newJob(c10d::OpType::ALLGATHER_COALESCED, what, "coll:all_gather",
                    inputs, outs, timeoutOf(opts.timeout));
  job->issue = [flat, all, bytes](coll_comm_t *c, coll_request_t **req,
                                  size_t *) {
    return coll_iallgather(c, ptr(flat), ptr(all), bytes, COLL_U8, nullptr,
                           req);
  };
  std::vector<std::vector<at::Tensor>> lists = outputs;
  job->done = [all, lists, bytes](size_t) {
    for (size_t r = 0; r < lists.size(); ++r)
      unpackBytes(all, r * bytes, lists[r]);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::gather(
    std::vector<std::vector<at::Tensor>> &outputs,
    std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
  const char *what = "gather";
  checkOne(inputs, what);
  checkRoot(opts.rootRank, getSize(), what);
  at::Tensor in = inputs[0];
  checkDevice(in, what);
  int root = static_cast<int>(opts.rootRank);
  bool on_root = root == getRank();
  std::vector<at::Tensor> outs;
  if (on_root) {
    TORCH_CHECK(outputs.size() == 1, "coll: ", what,
                ": the root takes one output list, got ", outputs.size());
    outs = outputs[0];
    checkList(outs, getSize(), in, what, "output");
  } else {
    TORCH_CHECK(outputs.empty(), "coll: ", what, ": only the root (rank ", root,
                ") takes output tensors");
  }
  at::Tensor src = in.contiguous();
  at::Tensor flat = on_root ? at::empty({getSize() * in.numel()}, in.options())
                            : at::Tensor();
  Moved m = moveDesc(src);
  auto job = newJob(c10d::OpType::GATHER, what, "coll:gather", {in}, outs,
                    timeoutOf(opts.timeout));
  job->issue = [src, flat, m, root](coll_comm_t *c, coll_request_t **req,
                                    size_t *) {
    return coll_igather(c, ptr(src), flat.defined() ? ptr(flat) : nullptr,
                        m.count, m.dt, root, nullptr, req);
  };
  int64_t n = in.numel();
  if (on_root) job->done = [outs, flat, n](size_t) { copyOut(flat, outs, n); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::scatter(
    std::vector<at::Tensor> &outputs,
    std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ScatterOptions &opts) {
  const char *what = "scatter";
  checkOne(outputs, what);
  checkRoot(opts.rootRank, getSize(), what);
  at::Tensor out = outputs[0];
  checkDevice(out, what);
  int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  std::vector<at::Tensor> ins;
  if (root == getRank()) {
    TORCH_CHECK(inputs.size() == 1, "coll: ", what,
                ": the root takes one input list, got ", inputs.size());
    ins = inputs[0];
    checkList(ins, getSize(), out, what, "input");
    flat = catFlat(ins);
  } else {
    TORCH_CHECK(inputs.empty(), "coll: ", what, ": only the root (rank ", root,
                ") takes input tensors");
  }
  Staged st = stage(out, out.scalar_type(), false);
  Moved m = moveDesc(st.work);
  auto job = newJob(c10d::OpType::SCATTER, what, "coll:scatter", ins, {out},
                    timeoutOf(opts.timeout));
  at::Tensor dst = st.work;
  job->issue = [flat, dst, m, root](coll_comm_t *c, coll_request_t **req,
                                    size_t *) {
    return coll_iscatter(c, flat.defined() ? ptr(flat) : nullptr, ptr(dst),
                         m.count, m.dt, root, nullptr, req);
  };
  if (st.copied) job->done = [st](size_t) { st.finish(); };
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
  checkList(inputs[0], getSize(), out, what, "input");
  return reduceScatterFlat(what, out, catFlat(inputs[0]), opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input,
    const c10d::ReduceScatterOptions &opts) {
  return reduceScatterFlat("_reduce_scatter_base", output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduceScatterFlat(
    const char *what, const at::Tensor &output, const at::Tensor &input,
    const c10d::ReduceScatterOptions &opts) {
  const char *title = "coll:reduce_scatter";
  checkDevice(input, what);
  checkDevice(output, what);
  checkSame(output, input, what);
  TORCH_CHECK(input.numel() == getSize() * output.numel(), "coll: ", what,
              ": the input has ", input.numel(), " elements, expected ",
              getSize(), " x ", output.numel());
  ReducePlan plan = planReduce(output, opts.reduceOp, what);
  auto job = newJob(c10d::OpType::_REDUCE_SCATTER_BASE, what, title, {input},
                    {output}, timeoutOf(opts.timeout));
  if (plan.kind == ReducePlan::FOLD) {
    at::Tensor in = input.contiguous(), out = output;
    int size = getSize();
    job->run = [in, out, plan, size, what](coll_comm_t *c) {
      foldScatter(c, in, out, plan, size, what);
    };
    return submit(std::move(job));
  }
  Staged in = stage(input, plan.work, true);
  Staged out = stage(output, plan.work, false);
  at::Tensor src = in.work, dst = out.work;
  coll_dtype_t dt = plan.dt;
  coll_op_t op = plan.op;
  job->issue = [src, dst, dt, op](coll_comm_t *c, coll_request_t **req,
                                  size_t *) {
    size_t n = static_cast<size_t>(dst.numel());
    return coll_ireduce_scatter(c, ptr(src), ptr(dst), n, dt, op, nullptr, req);
  };
  if (out.copied) job->done = [out](size_t) { out.finish(); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::alltoall_base(
    at::Tensor &output, at::Tensor &input,
    std::vector<int64_t> &outputSplitSizes,
    std::vector<int64_t> &inputSplitSizes, const c10d::AllToAllOptions &opts) {
  const char *what = "alltoall_base";
  checkDevice(input, what);
  checkDevice(output, what);
  checkSame(output, input, what);
  int n = getSize();
  at::Tensor src = input.contiguous();
  Staged out = stage(output, output.scalar_type(), false);
  Moved ms = moveDesc(src), mr = moveDesc(out.work);
  // Counts in libcoll's units (elements, or bytes for dtypes it lacks) per
  // rank: equal blocks when no split sizes are given, else rows of dim 0.
  auto counts = [n, what](const at::Tensor &t,
                          const std::vector<int64_t> &split, size_t units,
                          const char *side) {
    std::vector<size_t> cnt(n), dsp(n);
    int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    size_t per_row = rows > 0 ? units / static_cast<size_t>(rows) : 0;
    if (split.empty()) {
      TORCH_CHECK(rows % n == 0, "coll: ", what, ": the ", side,
                  " tensor's first dimension (", rows,
                  ") does not split evenly across ", n, " ranks");
      for (int r = 0; r < n; ++r) cnt[r] = units / n;
    } else {
      TORCH_CHECK(static_cast<int>(split.size()) == n, "coll: ", what, ": ",
                  split.size(), " ", side, " split sizes for ", n, " ranks");
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) {
        TORCH_CHECK(split[r] >= 0, "coll: ", what, ": a negative split size");
        sum += split[r];
        cnt[r] = static_cast<size_t>(split[r]) * per_row;
      }
      TORCH_CHECK(sum == rows, "coll: ", what, ": the ", side,
                  " split sizes add up to ", sum, ", the tensor has ", rows,
                  " rows");
    }
    for (int r = 1; r < n; ++r) dsp[r] = dsp[r - 1] + cnt[r - 1];
    return std::make_pair(cnt, dsp);
  };
  auto s = counts(src, inputSplitSizes, ms.count, "input");
  auto r = counts(out.work, outputSplitSizes, mr.count, "output");
  auto job = newJob(c10d::OpType::ALLTOALL_BASE, what, "coll:all_to_all",
                    {input}, {output}, timeoutOf(opts.timeout));
  at::Tensor dst = out.work;
  coll_dtype_t dt = ms.dt;
  job->issue = [src, dst, s, r, dt](coll_comm_t *c, coll_request_t **req,
                                    size_t *) {
    return coll_ialltoallv(c, ptr(src), s.first.data(), s.second.data(),
                           ptr(dst), r.first.data(), r.second.data(), dt,
                           nullptr, req);
  };
  if (out.copied) job->done = [out](size_t) { out.finish(); };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::alltoall(
    std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllToAllOptions &opts) {
  const char *what = "alltoall";
  int n = getSize();
  TORCH_CHECK(static_cast<int>(inputs.size()) == n &&
                  static_cast<int>(outputs.size()) == n,
              "coll: ", what, ": ", inputs.size(), " inputs and ",
              outputs.size(), " outputs for a group of ", n, " ranks");
  for (int i = 0; i < n; ++i) {
    checkDevice(inputs[i], what);
    checkDevice(outputs[i], what);
    checkSame(outputs[i], inputs[0], what);
    checkSame(inputs[i], inputs[0], what);
  }
  // As bytes, each block its tensor's own size.
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  for (int i = 0; i < n; ++i) {
    sc[i] = static_cast<size_t>(inputs[i].numel() * inputs[i].element_size());
    rc[i] = static_cast<size_t>(outputs[i].numel() * outputs[i].element_size());
    if (i > 0) {
      sd[i] = sd[i - 1] + sc[i - 1];
      rd[i] = rd[i - 1] + rc[i - 1];
    }
  }
  at::Tensor flat_in = packBytes(inputs);
  at::Tensor flat_out = at::empty({static_cast<int64_t>(rd[n - 1] + rc[n - 1])},
                                  flat_in.options());
  auto job = newJob(c10d::OpType::ALLTOALL, what, "coll:all_to_all", inputs,
                    outputs, timeoutOf(opts.timeout));
  job->issue = [flat_in, flat_out, sc, sd, rc, rd](
                   coll_comm_t *c, coll_request_t **req, size_t *) {
    return coll_ialltoallv(c, ptr(flat_in), sc.data(), sd.data(), ptr(flat_out),
                           rc.data(), rd.data(), COLL_U8, nullptr, req);
  };
  std::vector<at::Tensor> outs = outputs;
  job->done = [flat_out, outs](size_t) { unpackBytes(flat_out, 0, outs); };
  return submit(std::move(job));
}

}  // namespace coll_torch
