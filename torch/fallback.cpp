// SPDX-License-Identifier: Apache-2.0
// fallback.cpp: the bitwise reductions and the sparse allreduce, composed
// of blocking libcoll calls on the progress thread (fallback.hpp).
#include "fallback.hpp"

#include <c10/util/Exception.h>

#include <stdexcept>

#include "process_group_coll.hpp"

namespace coll_torch {

void check(coll_status_t s, const char *what) {
  if (s != COLL_OK) throw std::runtime_error(failure(what, s));
}

namespace {

size_t bytesOf(const at::Tensor &t) {
  return static_cast<size_t>(t.numel() * t.element_size());
}

// rows[0] combined with rows[1..] by op, in rank order.
at::Tensor foldRows(const at::Tensor &rows, c10d::ReduceOp::RedOpType op) {
  at::Tensor acc = rows[0].clone();
  for (int64_t r = 1; r < rows.size(0); ++r) {
    if (op == c10d::ReduceOp::BAND)
      acc.bitwise_and_(rows[r]);
    else if (op == c10d::ReduceOp::BOR)
      acc.bitwise_or_(rows[r]);
    else
      acc.bitwise_xor_(rows[r]);
  }
  return acc;
}

}  // namespace

void foldInPlace(coll_comm_t *c, const at::Tensor &t, const ReducePlan &plan,
                 int root, int rank, int size, const char *what) {
  at::Tensor src = t.contiguous().reshape({-1});
  int64_t n = src.numel();
  bool keeps = root < 0 || root == rank;
  at::Tensor all = keeps ? at::empty({size, n}, src.options()) : at::Tensor();
  if (root < 0)
    check(coll_allgather(c, ptr(src), ptr(all), bytesOf(src), COLL_U8, nullptr),
          what);
  else
    check(coll_gather(c, ptr(src), keeps ? ptr(all) : nullptr, bytesOf(src),
                      COLL_U8, root, nullptr),
          what);
  if (keeps) t.copy_(foldRows(all, plan.fold).view(t.sizes()));
}

void foldScatter(coll_comm_t *c, const at::Tensor &flat, const at::Tensor &out,
                 const ReducePlan &plan, int size, const char *what) {
  // Block r of every rank's input comes to rank r, then is combined.
  int64_t n = out.numel();
  at::Tensor mine = at::empty({size, n}, flat.options());
  check(coll_alltoall(c, ptr(flat), ptr(mine), bytesOf(out), COLL_U8, nullptr),
        what);
  out.copy_(foldRows(mine, plan.fold).view(out.sizes()));
}

namespace {

// A rank's sparse tensor described in a fixed number of words, so every
// rank can check the others' before the data travels.
constexpr int kMetaDims = 64;
constexpr int kMetaWords = 6 + kMetaDims;
enum { M_NNZ, M_SPARSE, M_DENSE, M_DIM, M_DTYPE, M_ROW };

// Elements of one value row: the dense dimensions' product.
int64_t rowElems(const at::Tensor &values) {
  int64_t n = 1;
  for (int64_t d = 1; d < values.dim(); ++d) n *= values.size(d);
  return n;
}

std::vector<int64_t> describe(const at::Tensor &s) {
  std::vector<int64_t> m(kMetaWords, 0);
  m[M_NNZ] = s._nnz();
  m[M_SPARSE] = s.sparse_dim();
  m[M_DENSE] = s.dense_dim();
  m[M_DIM] = s.dim();
  m[M_DTYPE] = static_cast<int64_t>(s.scalar_type());
  m[M_ROW] = rowElems(s._values());
  for (int64_t d = 0; d < s.dim(); ++d) m[6 + d] = s.size(d);
  return m;
}

// Every rank's description must equal rank 0's (nnz aside).
void checkAlike(const std::vector<int64_t> &all, int size) {
  for (int r = 1; r < size; ++r)
    for (int k = M_SPARSE; k < kMetaWords; ++k) {
      TORCH_CHECK(all[r * kMetaWords + k] == all[k],
                  "coll: allreduce: the ranks' sparse tensors differ in "
                  "shape, dimensions or dtype (rank ",
                  r, " and rank 0)");
    }
}

}  // namespace

at::Tensor sparseSum(coll_comm_t *c, const at::Tensor &t, int rank, int size) {
  const char *what = "allreduce";
  (void)rank;
  at::Tensor s = t.coalesce();
  TORCH_CHECK(s.dim() <= kMetaDims, "coll: ", what, ": a sparse tensor of ",
              s.dim(), " dimensions (at most ", kMetaDims, ")");
  std::vector<int64_t> mine = describe(s), all(size * kMetaWords);
  check(
      coll_allgather(c, mine.data(), all.data(), kMetaWords, COLL_I64, nullptr),
      what);
  checkAlike(all, size);
  int64_t sparse_dim = s.sparse_dim(), total = 0;
  at::Tensor idx = s._indices().t().contiguous();  // nnz x sparse_dim
  at::Tensor vals = s._values().contiguous();      // nnz x dense...
  size_t row_bytes = static_cast<size_t>(vals.element_size()) *
                     static_cast<size_t>(rowElems(vals));
  // Every rank's rows, in rank order: an allgather of unequal parts (each
  // rank sends its own part to every rank).
  std::vector<size_t> si(size), zero(size, 0), ri(size), di(size), sv(size),
      rv(size), dv(size);
  for (int r = 0; r < size; ++r) {
    int64_t nnz = all[r * kMetaWords + M_NNZ];
    si[r] = static_cast<size_t>(s._nnz() * sparse_dim);
    ri[r] = static_cast<size_t>(nnz * sparse_dim);
    sv[r] = static_cast<size_t>(s._nnz()) * row_bytes;
    rv[r] = static_cast<size_t>(nnz) * row_bytes;
    di[r] = static_cast<size_t>(total * sparse_dim);
    dv[r] = static_cast<size_t>(total) * row_bytes;
    total += nnz;
  }
  at::Tensor all_idx = at::empty({total, sparse_dim}, idx.options());
  std::vector<int64_t> vshape = vals.sizes().vec();
  vshape[0] = total;
  at::Tensor all_vals = at::empty(vshape, vals.options());
  check(coll_alltoallv(c, ptr(idx), si.data(), zero.data(), ptr(all_idx),
                       ri.data(), di.data(), COLL_I64, nullptr),
        what);
  check(coll_alltoallv(c, ptr(vals), sv.data(), zero.data(), ptr(all_vals),
                       rv.data(), dv.data(), COLL_U8, nullptr),
        what);
  return at::sparse_coo_tensor(all_idx.t(), all_vals, s.sizes(), s.options())
      .coalesce();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::foldReduce(
    const char *what, const char *title, c10d::OpType type, at::Tensor t,
    const ReducePlan &plan, int root, std::chrono::milliseconds timeout) {
  auto job = newJob(type, what, title, {t}, {t}, timeout);
  int rank = getRank(), size = getSize();
  job->run = [t, plan, root, rank, size, what](coll_comm_t *c) {
    foldInPlace(c, t, plan, root, rank, size, what);
  };
  return submit(std::move(job));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::sparseAllreduce(
    at::Tensor t, const c10d::AllreduceOptions &opts) {
  const char *what = "allreduce";
  TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, "coll: ", what,
              ": sparse tensors are reduced with SUM only");
  TORCH_CHECK(!device_comm_ && t.is_cpu(), "coll: ", what,
              ": sparse tensors on CPU process groups only");
  TORCH_CHECK(t.layout() == at::kSparse, "coll: ", what, ": sparse layout ",
              t.layout(), " is not supported (COO is)");
  auto job = newJob(c10d::OpType::ALLREDUCE, what, "coll:sparse_all_reduce",
                    {t}, {t}, timeoutOf(opts.timeout));
  int rank = getRank(), size = getSize();
  CollWork *work = job->work.get();
  job->run = [t, rank, size, work](coll_comm_t *c) {
    at::Tensor sum = sparseSum(c, t, rank, size);
    t.copy_(sum);
    work->setOutputs({sum});
  };
  return submit(std::move(job));
}

}  // namespace coll_torch
