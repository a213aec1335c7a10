# SPDX-License-Identifier: Apache-2.0
"""One rank of test_errors: every refusal a caller can reach raises a
RuntimeError naming what was wrong, before anything is sent (so the ranks
need not agree on it), and the group keeps working afterwards. Prints a
RESULT line with what did not behave."""
import torch
import torch.distributed as dist

from rank_setup import finish, init

R = dist.ReduceOp
rank, world, store, _ = init()
peer = 1 - rank
failures = []
cases = [0]


def expect(name, words, call):
    """call() must raise a RuntimeError whose text holds every word."""
    cases[0] += 1
    try:
        w = call()
        if w is not None:
            w.wait()
    except RuntimeError as e:
        text = str(e)
        missing = [w for w in words if w not in text]
        if missing:
            failures.append("%s: %r lacks %r" % (name, text[:300], missing))
        return
    failures.append("%s: did not raise" % name)


f32 = torch.ones(8)
for op in (R.BAND, R.BOR, R.BXOR):
    expect("allreduce %s on floats" % op, ["coll: allreduce",
                                           "non-integral dtype"],
           lambda op=op: dist.all_reduce(f32.clone(), op=op))
expect("allreduce AVG on bool", ["coll: allreduce", "AVG", "bool"],
       lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=R.AVG))
expect("reduce MAX on complex", ["coll: reduce", "complex"],
       lambda: dist.reduce(torch.ones(4, dtype=torch.complex64), dst=0,
                           op=R.MAX))
expect("sparse allreduce MAX", ["coll: allreduce", "sparse", "SUM"],
       lambda: dist.all_reduce(torch.ones(2, 2).to_sparse(), op=R.MAX))
expect("allgather mixed devices", ["coll: allgather", "different devices"],
       lambda: dist.all_gather([torch.ones(4), torch.ones(4, device="meta")],
                               torch.ones(4)))
expect("_allgather_base mixed dtypes",
       ["coll: _allgather_base", "different dtypes"],
       lambda: dist._all_gather_base(torch.ones(4 * world).double(),
                                     torch.ones(4)))
expect("allgather short list", ["coll: allgather", "output list holds 1"],
       lambda: dist.all_gather([torch.ones(4)], torch.ones(4)))
expect("allgather wrong size", ["coll: allgather", "has 3 elements"],
       lambda: dist.all_gather([torch.ones(3) for _ in range(world)],
                               torch.ones(4)))
expect("_allgather_base wrong size", ["coll: _allgather_base", "expected"],
       lambda: dist._all_gather_base(torch.ones(5), torch.ones(4)))
expect("_reduce_scatter_base wrong size",
       ["coll: _reduce_scatter_base", "expected"],
       lambda: dist._reduce_scatter_base(torch.ones(4), torch.ones(5)))
expect("broadcast root out of range", ["coll: broadcast", "root rank 5"],
       lambda: dist.broadcast(f32.clone(), src=5))
expect("reduce PREMUL_SUM", ["coll: reduce", "allreduce only"],
       lambda: dist.reduce(f32.clone(), dst=0,
                           op=dist._make_nccl_premul_sum(2.0)))
expect("premul-sum on integers", ["coll: allreduce", "floating-point"],
       lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                               op=dist._make_nccl_premul_sum(2.0)))
expect("send to self", ["coll: send", "not another rank"],
       lambda: dist.send(f32.clone(), dst=rank))
expect("send negative tag", ["coll: send", "negative"],
       lambda: dist.send(f32.clone(), dst=peer, tag=-1))
expect("send on the group's own tag", ["coll: send", "monitored_barrier"],
       lambda: dist.send(f32.clone(), dst=peer, tag=2**31 - 1))
# Refused on one rank alone: nothing is sent, so the other need not call.
pg = dist.distributed_c10d._get_default_group()
if rank == 1:
    expect("gather output list off the root", ["coll: gather", "only the root"],
           lambda: pg.gather([[torch.ones(1), torch.ones(1)]], [torch.ones(1)],
                             dist.GatherOptions()))
else:
    expect("scatter list of the wrong length", ["coll: scatter", "list holds 1"],
           lambda: dist.scatter(torch.ones(2), [torch.ones(2)], src=0))
expect("all_to_all_single bad splits", ["coll: alltoall_base", "add up"],
       lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4),
                                      [2, 2], [3, 3]))

# Ranks that disagree (here on the dtype) fail on both ranks, from libcoll,
# and the comm keeps working.
mismatch = torch.ones(8, dtype=torch.float32 if rank == 0 else torch.float64)
expect("dtype mismatch between ranks", ["coll: allreduce failed",
                                        "ERR_LENGTH_MISMATCH"],
       lambda: dist.all_reduce(mismatch, async_op=True))
# A recv shorter than what was sent fails on the receiver.
if rank == 0:
    dist.send(torch.ones(8), dst=1, tag=3)
else:
    expect("recv too short", ["coll: recv failed", "ERR_LENGTH_MISMATCH"],
           lambda: dist.recv(torch.ones(4), src=0, tag=3))

t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
if not torch.equal(t, torch.full((4,), float(world * (world + 1) // 2))):
    failures.append("the group no longer works after the refusals: %r" % t)
dist.destroy_process_group()
finish({"failures": failures, "cases": cases[0]})
