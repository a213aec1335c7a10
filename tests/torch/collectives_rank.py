# SPDX-License-Identifier: Apache-2.0
"""One rank of test_collectives: runs every collective on the "coll" group
and, where gloo has it, on a gloo group with the same tensors, and checks
both against a serial reference computed here from every rank's inputs
(each rank's input is a function of its rank alone). Prints a RESULT line
with the failures found."""
import hashlib

import torch
import torch.distributed as dist

from rank_setup import finish, init

R = dist.ReduceOp
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
OPS = {"sum": R.SUM, "avg": R.AVG, "product": R.PRODUCT, "min": R.MIN,
       "max": R.MAX}
# Relative error allowed against the f64 reference, per rank added (the
# ring's summation order differs from the serial one): about the unit
# roundoff of each dtype, as f16/bf16 accumulate in f32 and round once.
RTOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 2e-7,
        torch.float64: 4e-16}
INT_RANGE = {  # (lo, hi) per dtype for sums and for products
    torch.int8: ((-20, 20), (-3, 3)), torch.uint8: ((0, 40), (1, 3)),
    torch.int32: ((-10**6, 10**6), (-50, 50)),
    torch.int64: ((-10**12, 10**12), (-1000, 1000))}

# Calls whose result differs per rank by design (not in the digest).
PER_RANK = ("reduce", "_reduce_scatter_base", "send/recv", "subgroup")

rank, world, store, _ = init()
gloo = dist.new_group(backend="gloo")
failures, checked, gloo_checked, digest = [], [0], [0], hashlib.sha256()


def data(r, dtype, n, seed, product=False):
    g = torch.Generator().manual_seed(1000003 * r + seed)
    if dtype in FLOATS:
        x = torch.randn(n, generator=g, dtype=torch.float64)
        if product:
            x = 1 + x / 8
        return x.to(dtype)
    lo, hi = INT_RANGE[dtype][1 if product else 0]
    return torch.randint(lo, hi + 1, (n,), generator=g,
                         dtype=torch.int64).to(dtype)


def reference(inputs, op, dtype):
    """The serial reduction of every rank's input, in f64 or exact ints."""
    if dtype in FLOATS:
        xs = [x.to(torch.float64) for x in inputs]
    else:
        xs = [x.to(torch.int64) for x in inputs]
    out = xs[0].clone()
    for x in xs[1:]:
        if op in ("sum", "avg"):
            out = out + x
        elif op == "product":
            out = out * x
        elif op == "min":
            out = torch.minimum(out, x)
        else:
            out = torch.maximum(out, x)
    if op == "avg":
        if dtype in FLOATS:
            out = out / world
        elif dtype in (torch.int8, torch.uint8):
            # the exact sum / n, rounded to nearest, ties away from zero
            out = torch.sign(out) * ((2 * out.abs() + world) // (2 * world))
        else:  # i32/i64: the sum / n, truncated toward zero
            out = torch.sign(out) * (out.abs() // world)
    return out


def bound(inputs, op, dtype):
    if dtype not in FLOATS or op in ("min", "max"):
        return None
    mags = sum(x.to(torch.float64).abs() for x in inputs)
    if op == "product":
        mags = torch.ones_like(mags) * 2 ** world
    if op == "avg":
        mags = mags / world
    return RTOL[dtype] * world * mags + 1e-300


def check(name, got, ref, tol=None):
    checked[0] += 1
    if not name.startswith(PER_RANK):  # the same result on every rank
        digest.update(name.encode())
        digest.update(got.contiguous().view(torch.uint8).numpy().tobytes())
    if tol is None:
        if not torch.equal(got.to(ref.dtype), ref):
            failures.append("%s: differs from the reference" % name)
        return
    err = (got.to(torch.float64) - ref.to(torch.float64)).abs()
    if not bool((err <= tol).all()):
        i = int((err - tol).argmax())
        failures.append("%s: element %d is %r, reference %r" %
                        (name, i, float(got[i]), float(ref[i])))


def with_gloo(name, coll_result, run_gloo, tol=None):
    """Runs the same call on the gloo group; gloo's refusals are skipped."""
    try:
        g = run_gloo()
    except RuntimeError as e:
        if "does not support" in str(e) or "Unsupported" in str(e) or \
                "not supported" in str(e) or "Invalid" in str(e):
            return
        raise
    gloo_checked[0] += 1
    # Two ranks: the same two-term sums in both, so bit-equal.
    if world == 2 or tol is None:
        if not torch.equal(coll_result, g):
            failures.append("%s: differs from gloo" % name)
    elif not bool(((coll_result.to(torch.float64) - g.to(torch.float64))
                   .abs() <= 2 * tol).all()):
        failures.append("%s: beyond the tolerance of gloo" % name)


def all_inputs(dtype, n, seed, product=False):
    return [data(r, dtype, n, seed, product) for r in range(world)]


seed = 0
# allreduce: every dtype and op, a small and (f32) a ring-sized count.
for dtype in FLOATS + INTS:
    for opname, op in OPS.items():
        for n in ([257, 70001] if dtype == torch.float32 else [257]):
            seed += 1
            ins = all_inputs(dtype, n, seed, opname == "product")
            t = ins[rank].clone()
            dist.all_reduce(t, op=op)
            name = "allreduce %s %s n=%d" % (dtype, opname, n)
            tol = bound(ins, opname, dtype)
            check(name, t, reference(ins, opname, dtype), tol)
            if opname != "avg":  # gloo has no AVG
                def run(x=ins[rank].clone(), op=op):
                    dist.all_reduce(x, op=op, group=gloo)
                    return x
                with_gloo(name, t, run, tol)

# premul-sum: each rank's own factor.
for dtype in FLOATS:
    seed += 1
    ins = all_inputs(dtype, 129, seed)
    factors = [0.5 * (r + 1) for r in range(world)]
    t = ins[rank].clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(factors[rank]))
    scaled = [(x.to(torch.float64) * f) for x, f in zip(ins, factors)]
    check("premul_sum %s" % dtype, t, reference(scaled, "sum", torch.float64),
          bound(scaled, "sum", dtype) * 2)

# allreduce_coalesced: several tensors as one collective.
seed += 1
parts = [all_inputs(torch.float32, n, seed + n) for n in (100, 7, 33)]
mine = [p[rank].clone() for p in parts]
dist.all_reduce_coalesced(mine)
for i, p in enumerate(parts):
    tol = bound(p, "sum", torch.float32)
    check("allreduce_coalesced part %d" % i, mine[i],
          reference(p, "sum", torch.float32), tol)
g_mine = [p[rank].clone() for p in parts]
with_gloo("allreduce_coalesced", torch.cat(mine),
          lambda: (dist.all_reduce_coalesced(g_mine, group=gloo),
                   torch.cat(g_mine))[1], torch.cat([bound(p, "sum",
                                                     torch.float32)
                                               for p in parts]))

# broadcast: every dtype, and dtypes libcoll lacks (they travel as bytes).
root = world - 1
for dtype in FLOATS + INTS + [torch.bool, torch.int16, torch.complex64]:
    seed += 1
    src = data(root, torch.float64 if dtype == torch.complex64 else
               (torch.int64 if dtype in (torch.bool, torch.int16)
                else dtype), 301, seed)
    src = src.to(dtype)
    t = src.clone() if rank == root else torch.zeros_like(src)
    dist.broadcast(t, src=root)
    check("broadcast %s" % dtype, t, src)
    g = src.clone() if rank == root else torch.zeros_like(src)
    with_gloo("broadcast %s" % dtype, t,
              lambda g=g: (dist.broadcast(g, src=root, group=gloo), g)[1])

# allgather (list of outputs) and _allgather_base (one flat output).
for dtype in FLOATS + INTS + [torch.bool]:
    seed += 1
    base = torch.int64 if dtype == torch.bool else dtype
    ins = [data(r, base, 65, seed).to(dtype) for r in range(world)]
    outs = [torch.zeros_like(ins[0]) for _ in range(world)]
    dist.all_gather(outs, ins[rank].clone())
    check("allgather %s" % dtype, torch.cat(outs), torch.cat(ins))
    g_outs = [torch.zeros_like(ins[0]) for _ in range(world)]
    with_gloo("allgather %s" % dtype, torch.cat(outs),
              lambda: (dist.all_gather(g_outs, ins[rank].clone(), group=gloo),
                       torch.cat(g_outs))[1])
for dtype in (torch.float32, torch.bfloat16, torch.int64):
    seed += 1
    ins = all_inputs(dtype, 40, seed)
    out = torch.zeros(world * 40, dtype=dtype)
    dist._all_gather_base(out, ins[rank].clone())
    check("_allgather_base %s" % dtype, out, torch.cat(ins))

# reduce_scatter (list of inputs) and _reduce_scatter_base (one flat input).
for dtype in FLOATS + INTS:
    for opname in ("sum", "max", "avg"):
        seed += 1
        n = 33
        ins = all_inputs(dtype, world * n, seed)
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter(out, list(ins[rank].clone().split(n)),
                            op=OPS[opname])
        blocks = [x[rank * n:(rank + 1) * n] for x in ins]
        tol = bound(blocks, opname, dtype)
        name = "reduce_scatter %s %s" % (dtype, opname)
        check(name, out, reference(blocks, opname, dtype), tol)
        if opname != "avg":
            g_out = torch.zeros(n, dtype=dtype)
            with_gloo(name, out, lambda: (dist.reduce_scatter(
                g_out, list(ins[rank].clone().split(n)), op=OPS[opname],
                group=gloo), g_out)[1], tol)
for dtype in (torch.float32, torch.bfloat16):
    seed += 1
    ins = all_inputs(dtype, world * 50, seed)
    out = torch.zeros(50, dtype=dtype)
    dist._reduce_scatter_base(out, ins[rank].clone())
    blocks = [x[rank * 50:(rank + 1) * 50] for x in ins]
    check("_reduce_scatter_base %s" % dtype, out,
          reference(blocks, "sum", dtype), bound(blocks, "sum", dtype))

# reduce: the result on the root only.
for dtype, opname in ((torch.float32, "sum"), (torch.int32, "max"),
                      (torch.bfloat16, "sum")):
    seed += 1
    ins = all_inputs(dtype, 77, seed)
    t = ins[rank].clone()
    rroot = 1 % world
    dist.reduce(t, dst=rroot, op=OPS[opname])
    g = ins[rank].clone()
    try:
        dist.reduce(g, dst=rroot, op=OPS[opname], group=gloo)
    except RuntimeError:
        g = None  # gloo refuses bf16, on every rank
    if rank == rroot:
        tol = bound(ins, opname, dtype)
        name = "reduce %s %s" % (dtype, opname)
        check(name, t, reference(ins, opname, dtype), tol)
        if g is not None:
            with_gloo(name, t, lambda: g, tol)

# barrier, blocking and asynchronous.
dist.barrier()
w = dist.barrier(async_op=True)
w.wait()
checked[0] += 1

# send/recv around a ring, both directions posted before either waits.
for dtype in (torch.float32, torch.bfloat16, torch.bool):
    seed += 1
    base = torch.int64 if dtype == torch.bool else dtype
    mine = data(rank, base, 513, seed).to(dtype)
    left = (rank - 1) % world
    expect = data(left, base, 513, seed).to(dtype)
    got = torch.zeros_like(mine)
    reqs = [dist.irecv(got, src=left, tag=7),
            dist.isend(mine, dst=(rank + 1) % world, tag=7)]
    for req in reqs:
        req.wait()
    check("send/recv %s" % dtype, got, expect)

# Work and future: the future completes with the output tensor.
seed += 1
ins = all_inputs(torch.float32, 64, seed)
t = ins[rank].clone()
w = dist.all_reduce(t, async_op=True)
value = w.get_future().wait()
if not (isinstance(value, list) and len(value) == 1 and
        value[0].data_ptr() == t.data_ptr()):
    failures.append("future: completed with %r, not [the tensor]" % (value,))
if not (w.is_completed() and w.is_success()):
    failures.append("work: not completed and successful after its future")
check("allreduce via future", t, reference(ins, "sum", torch.float32),
      bound(ins, "sum", torch.float32))

# A second coll group, of ranks 0 and 1, beside the default one: its comm
# meets under its own prefix of the store.
sub = dist.new_group(ranks=[0, 1], backend="coll")
if rank in (0, 1):
    seed += 1
    ins = [data(r, torch.float32, 100, seed) for r in (0, 1)]
    t = ins[rank].clone()
    dist.all_reduce(t, group=sub)
    check("subgroup allreduce", t, ins[0] + ins[1])

dist.destroy_process_group()
finish({"failures": failures, "checked": checked[0],
        "gloo_checked": gloo_checked[0], "digest": digest.hexdigest()})
