# SPDX-License-Identifier: Apache-2.0
"""One rank of test_features: the calls torch.distributed has beyond the
reductions, on the "coll" group, against a reference computed here from
every rank's inputs (each a function of its rank) and, where gloo has the
call, against gloo on the same tensors: gather, scatter, coalesced
allgather, all-to-all (lists, and one tensor with split sizes), receive
from any source, monitored_barrier, sparse allreduce, the bitwise ops,
bool, int16 and complex reductions, strided tensors, object collectives,
batch_isend_irecv, futures, profiler events, the group's name and
options. Prints a RESULT line with the failures found."""
import datetime
import functools
import io

import torch
import torch.distributed as dist

from rank_setup import finish, init

R = dist.ReduceOp
rank, world, store, _ = init()
gloo = dist.new_group(backend="gloo")
failures, checked = [], [0]


def check(name, got, want):
    checked[0] += 1
    if got.layout != want.layout or got.dtype != want.dtype or \
            not torch.equal(got.to_dense() if got.is_sparse else got,
                            want.to_dense() if want.is_sparse else want):
        failures.append("%s: got %s, want %s" % (name, got.flatten()[:6],
                                                 want.flatten()[:6]))


def value(r, n, dtype, seed=0):
    """Rank r's tensor: small integers that say whose it is."""
    x = (torch.arange(n, dtype=torch.int64) * 7 + r * 13 + seed) % 50
    if dtype == torch.bool:
        return x % 3 == 0
    if dtype.is_complex:
        return torch.complex(x.double(), -x.double()).to(dtype)
    return x.to(dtype)


DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int8,
          torch.uint8, torch.int16, torch.int64, torch.bool, torch.complex64]

# gather and scatter, every dtype, every root.
for dtype in DTYPES:
    for root in range(world):
        mine = value(rank, 9, dtype, root)
        outs = [torch.zeros_like(mine) for _ in range(world)] if rank == root \
            else None
        dist.gather(mine, outs, dst=root)
        if rank == root:
            check("gather %s to %d" % (dtype, root), torch.stack(outs),
                  torch.stack([value(r, 9, dtype, root) for r in range(world)]))
        ins = [value(k, 9, dtype, root + 1) for k in range(world)] \
            if rank == root else None
        out = torch.zeros_like(mine)
        dist.scatter(out, ins, src=root)
        check("scatter %s from %d" % (dtype, root), out,
              value(rank, 9, dtype, root + 1))

# A strided output list and input: copied through staging.
outs = [torch.zeros(4, 6)[:, 1] for _ in range(world)]
dist.all_gather(outs, torch.full((8,), float(rank))[::2])
check("allgather strided", torch.stack(outs),
      torch.stack([torch.full((4,), float(r)) for r in range(world)]))

# all_gather_coalesced: tensors of different sizes (torch wants one
# dtype), and gloo beside.
def coalesced_in(r):
    return [value(r, 5, torch.float64), value(r, 3, torch.float64, 1),
            value(r, 0, torch.float64)]


ins = coalesced_in(rank)
outs = [[torch.empty_like(t) for t in ins] for _ in range(world)]
dist.all_gather_coalesced(outs, ins)
g_outs = [[torch.empty_like(t) for t in ins] for _ in range(world)]
dist.all_gather_coalesced(g_outs, ins, group=gloo)
for r in range(world):
    for k, t in enumerate(ins):
        check("all_gather_coalesced rank %d part %d" % (r, k), outs[r][k],
              coalesced_in(r)[k])
        check("all_gather_coalesced against gloo", outs[r][k], g_outs[r][k])

# all_to_all with blocks of different sizes, and all_to_all_single.
ins = [value(rank, 1 + (rank + k) % 3, torch.float32, k) for k in range(world)]
outs = [torch.empty(1 + (k + rank) % 3) for k in range(world)]
dist.all_to_all(outs, ins)
for k in range(world):
    check("all_to_all from %d" % k, outs[k],
          value(k, 1 + (k + rank) % 3, torch.float32, rank))
x = torch.cat([value(rank, 4, torch.int32, k) for k in range(world)])
y = torch.empty_like(x)
dist.all_to_all_single(y, x)
check("all_to_all_single", y,
      torch.cat([value(k, 4, torch.int32, rank) for k in range(world)]))
g = torch.empty_like(x)
dist.all_to_all_single(g, x, group=gloo)
check("all_to_all_single against gloo", y, g)
splits_in = [(rank + k) % 2 + 1 for k in range(world)]
splits_out = [(k + rank) % 2 + 1 for k in range(world)]
x = torch.cat([value(rank, 2 * s, torch.float64, k).view(s, 2)
               for k, s in enumerate(splits_in)])
y = torch.empty(sum(splits_out), 2, dtype=torch.float64)
dist.all_to_all_single(y, x, splits_out, splits_in)
check("all_to_all_single with splits", y,
      torch.cat([value(k, 2 * s, torch.float64, rank).view(s, 2)
                 for k, s in enumerate(splits_out)]))

# Receive from any source: recv returns the sender.
if rank == 0:
    seen = []
    for _ in range(world - 1):
        t = torch.zeros(3)
        src = dist.recv(t)
        seen.append(src)
        check("recv from any source: rank %d's" % src, t,
              value(src, 3, torch.float32))
    checked[0] += 1
    if sorted(seen) != list(range(1, world)):
        failures.append("recv from any source: senders %s" % seen)
else:
    dist.send(value(rank, 3, torch.float32), 0)

# monitored_barrier, with and without wait_all_ranks.
dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
dist.monitored_barrier(timeout=datetime.timedelta(seconds=30),
                       wait_all_ranks=True)
checked[0] += 1

# Sparse allreduce: the sum of every rank's COO tensor, as gloo's.
idx = torch.tensor([[rank, 0, rank], [0, 1, 2]])
sp = torch.sparse_coo_tensor(idx, torch.ones(3, 2) * (rank + 1), (world, 3, 2))
want = functools.reduce(lambda a, b: a + b, [torch.sparse_coo_tensor(
    torch.tensor([[r, 0, r], [0, 1, 2]]), torch.ones(3, 2) * (r + 1),
    (world, 3, 2)) for r in range(world)]).coalesce()
got = sp.clone()
dist.all_reduce(got)
check("sparse allreduce", got.coalesce(), want)
g = sp.clone()
dist.all_reduce(g, group=gloo)
check("sparse allreduce against gloo", got.coalesce(), g.coalesce())

# Reductions libcoll has no op or dtype for.
for dtype in (torch.int32, torch.uint8, torch.int16, torch.bool):
    for op, fn in ((R.BAND, torch.bitwise_and), (R.BOR, torch.bitwise_or),
                   (R.BXOR, torch.bitwise_xor)):
        t = value(rank, 11, dtype, 3)
        dist.all_reduce(t, op=op)
        want = value(0, 11, dtype, 3)
        for r in range(1, world):
            want = fn(want, value(r, 11, dtype, 3))
        check("allreduce %s %s" % (dtype, op), t, want)
        if dtype in (torch.int32, torch.uint8):  # what gloo reduces
            g = value(rank, 11, dtype, 3)
            dist.all_reduce(g, op=op, group=gloo)
            check("allreduce %s %s against gloo" % (dtype, op), t, g)
for op, fn in ((R.SUM, torch.logical_or), (R.MAX, torch.logical_or),
               (R.PRODUCT, torch.logical_and), (R.MIN, torch.logical_and)):
    t = value(rank, 10, torch.bool, 1)
    dist.all_reduce(t, op=op)
    want = value(0, 10, torch.bool, 1)
    for r in range(1, world):
        want = fn(want, value(r, 10, torch.bool, 1))
    check("allreduce bool %s" % op, t, want)
for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX):
    t = value(rank, 10, torch.int16, 2) * 300
    dist.all_reduce(t, op=op)
    xs = torch.stack([value(r, 10, torch.int16, 2) * 300 for r in range(world)])
    want = {R.SUM: xs.sum(0), R.PRODUCT: xs.prod(0), R.MIN: xs.min(0).values,
            R.MAX: xs.max(0).values}[op].to(torch.int16)
    check("allreduce int16 %s (wrapping)" % op, t, want)
t = value(rank, 6, torch.complex128)
dist.all_reduce(t)
check("allreduce complex128", t,
      sum(value(r, 6, torch.complex128) for r in range(world)))
t = torch.zeros(world * 2, 3)
t[::2] = value(rank, world * 3, torch.float32).view(world, 3)
view = t[::2]  # strided: every other row
dist.all_reduce(view)
check("allreduce strided", t[::2],
      sum(value(r, world * 3, torch.float32) for r in range(world)).view(
          world, 3))
check("allreduce strided leaves the rows between", t[1::2],
      torch.zeros(world, 3))
outs = torch.zeros(world)
dist.reduce_scatter(outs[rank:rank + 1],
                    [torch.full((1,), float(rank + k)) for k in range(world)])
check("reduce_scatter into a view", outs[rank:rank + 1],
      torch.full((1,), float(sum(r + rank for r in range(world)))))

# Object collectives.
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
checked[0] += 1
if objs != [{"rank": r, "s": "x" * r} for r in range(world)]:
    failures.append("all_gather_object: %r" % objs)
got = [None] * world if rank == 0 else None
dist.gather_object(("from", rank), got, dst=0)
checked[0] += 1
if rank == 0 and got != [("from", r) for r in range(world)]:
    failures.append("gather_object: %r" % got)
out = [None]
dist.scatter_object_list(out, [("to", r) for r in range(world)]
                         if rank == 0 else None, src=0)
checked[0] += 1
if out != [("to", rank)]:
    failures.append("scatter_object_list: %r" % out)
lst = [io.BytesIO(b"abc").getvalue(), 3] if rank == 1 % world else [None, None]
dist.broadcast_object_list(lst, src=1 % world)
checked[0] += 1
if lst != [b"abc", 3]:
    failures.append("broadcast_object_list: %r" % lst)

# batch_isend_irecv around a ring.
right, left = (rank + 1) % world, (rank - 1) % world
got = torch.zeros(5)
reqs = dist.batch_isend_irecv([
    dist.P2POp(dist.isend, value(rank, 5, torch.float32), right),
    dist.P2POp(dist.irecv, got, left)])
for r in reqs:
    r.wait()
check("batch_isend_irecv", got, value(left, 5, torch.float32))

# Every Work has a future that completes.
pg = dist.distributed_c10d._get_default_group()
works = {"barrier": pg.barrier(),
         "broadcast": dist.broadcast(torch.ones(2), 0, async_op=True),
         "gather": dist.gather(torch.ones(1), [torch.ones(1)] * world
                               if rank == 0 else None, 0, async_op=True),
         "alltoall": dist.all_to_all_single(torch.empty(world),
                                            torch.ones(world), async_op=True)}
for name, w in works.items():
    w.get_future().wait()
    checked[0] += 1
    if not w.is_completed():
        failures.append("%s: its future completed, the work not" % name)

# Profiler events, named as gloo's are with the backend's name.
with torch.autograd.profiler.profile(record_shapes=True) as prof:
    dist.all_reduce(torch.ones(4, 2))
    dist.all_gather([torch.zeros(3) for _ in range(world)], torch.ones(3))
names = [e.name for e in prof.function_events]
for want in ("coll:all_reduce", "coll:all_gather"):
    checked[0] += 1
    if want not in names:
        failures.append("profiler: no %s event in %s" % (want, names))

# The group's name and options, as torch's own groups answer.
checked[0] += 1
if pg.name() != "coll" or pg.options.backend != "coll" or \
        pg.options._timeout != datetime.timedelta(seconds=60):
    failures.append("name %r, options %r/%r" % (pg.name(), pg.options.backend,
                                                pg.options._timeout))

dist.destroy_process_group()
finish({"failures": failures, "checked": checked[0]})
