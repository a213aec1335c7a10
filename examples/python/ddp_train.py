#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a small model with DistributedDataParallel on the "coll" backend
(or "gloo", to compare), printing each step's loss and the mean step time.

    # N local processes, started by this script:
    .venv/bin/python examples/python/ddp_train.py --nproc 4 --backend coll
    # or under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR/PORT:
    build/tools/coll-run -n 4 .venv/bin/python examples/python/ddp_train.py
    .venv/bin/python -m torch.distributed.run --standalone \
        --nproc_per_node 4 --redirects 1 --tee 1 examples/python/ddp_train.py

The data is synthetic and deterministic (seeded per rank), so two runs
with the same world size see the same numbers; --bf16-grads reduces the
gradients in bfloat16 (a DDP comm hook), which gloo cannot do. For coll,
the package coll must be importable (.venv above: docs/python.md), and
it finds libcoll and the torch extension beside it (docs/pytorch.md).
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["coll", "gloo"], default="coll")
    p.add_argument("--nproc", type=int, default=0,
                   help="start this many local processes (default: run as "
                        "one rank of a launcher's job)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hidden", type=int, default=64, help="layer width")
    p.add_argument("--batch", type=int, default=32, help="samples per rank")
    p.add_argument("--bf16-grads", action="store_true",
                   help="allreduce the gradients in bfloat16")
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds every rank may take, and the group's "
                        "timeout")
    p.add_argument("--init-method", default="env://", help=argparse.SUPPRESS)
    return p.parse_args()


def launch(args):
    """Runs this script as args.nproc ranks meeting through a file store;
    returns the worst exit status. Bounded by args.timeout."""
    store = os.path.join(tempfile.mkdtemp(prefix="ddp-train-"), "store")
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--nproc") if "--nproc" in argv else None
    if i is not None:
        del argv[i:i + 2]
    argv = [a for a in argv if not a.startswith("--nproc=")]
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv,
             "--init-method", "file://" + store], env=env))
    deadline = time.monotonic() + args.timeout
    status = 0
    for rank, p in enumerate(procs):
        try:
            status = max(status, abs(p.wait(timeout=max(
                0.1, deadline - time.monotonic()))))
        except subprocess.TimeoutExpired:
            print("ddp_train: rank %d still ran after %g s; stopping all" %
                  (rank, args.timeout), file=sys.stderr)
            for q in procs:
                q.kill()
            return 1
    return status


def bf16_allreduce_hook(group, bucket):
    """DDP comm hook: averages a gradient bucket in bfloat16, half the
    bytes of float32, and hands DDP the float32 result."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    grads = bucket.buffer().to(torch.bfloat16).div_(world)
    fut = dist.all_reduce(grads, group=group, async_op=True).get_future()

    def decompress(f):
        out = bucket.buffer()
        out.copy_(f.value()[0])
        return out

    return fut.then(decompress)


def train(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if args.backend == "coll":
        import coll.distributed  # noqa: F401  (registers "coll")
    dist.init_process_group(args.backend, init_method=args.init_method,
                            rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]),
                            timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank
    torch.set_num_threads(1)  # ranks share the host's cores
    h = args.hidden
    model = nn.Sequential(nn.Linear(16, h), nn.ReLU(), nn.Linear(h, h),
                          nn.ReLU(), nn.Linear(h, 1))
    ddp = DDP(model)
    if args.bf16_grads:
        # torch's own bf16_compress_hook insists on NCCL; this one is the
        # same idea for any backend that reduces bfloat16.
        ddp.register_comm_hook(None, bf16_allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(args.batch, 16, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    times = []
    for step in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        if rank == 0:
            print("step %3d loss %r" % (step, loss.item()), flush=True)
    if rank == 0:
        warm = times[5:] or times
        print("mean step time %.3f ms (backend %s, %d ranks, steps %d-%d)" %
              (1000 * sum(warm) / len(warm), args.backend,
               dist.get_world_size(), args.steps - len(warm), args.steps - 1),
              flush=True)
    dist.destroy_process_group()


def main():
    args = parse()
    if args.nproc > 0 and "RANK" not in os.environ:
        sys.exit(launch(args))
    train(args)


if __name__ == "__main__":
    main()
