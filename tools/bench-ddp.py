#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DistributedDataParallel on the "coll" backend against gloo: step time,
and how much of the gradient allreduce hides behind the backward pass.

    tools/bench-ddp.py [--nproc 2 4] [--sizes small medium large]
                       [--runs 5] [--steps 60] [--json out.json]

For each world size and model size, the backends run in turn, `runs`
times each, interleaved (coll, gloo, coll, ...) in one sitting, and the
medians are printed. Each run is one job of `nproc` local processes that
measures, after warm-up steps, per step:
  step      a DDP training step (forward, backward with DDP's bucketed
            allreduce overlapping it, optimizer);
  compute   the same step inside ddp.no_sync(): no communication;
  comm      the gradients' allreduce alone: every bucket of DDP's
            bucket size (25 MiB) allreduced one after the other;
  overlap   (compute + comm - step) / min(compute, comm), clamped to
            [0, 1]: 1 when the shorter of the two hides entirely.
The models (MLPs on synthetic data, float32, batch 32 per rank) are
sized so that communication matters: small (4 layers 512 wide, 0.56 M
parameters, 2.2 MB of gradients: latency-bound), medium (4 x 1536, 4.8 M,
19 MB: one bucket), large (6 x 2560, 26 M, 106 MB: five buckets, the
allreduce bandwidth-bound). Take figures on a quiet machine;
a busy one halves any number.

coll needs the package and the torch extension (docs/pytorch.md);
COLL_LIBRARY or an installed libcoll tells where. PYTHON (default: this
interpreter) runs the ranks."""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = {"small": (512, 4), "medium": (1536, 4), "large": (2560, 6)}
BUCKET_BYTES = 25 * 1024 * 1024


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    p.add_argument("--sizes", nargs="+", default=list(SIZES),
                   choices=list(SIZES))
    p.add_argument("--backends", nargs="+", default=["coll", "gloo"],
                   choices=["coll", "gloo"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", help="also write every run's figures here")
    p.add_argument("--rank-run", nargs=4, metavar=("BACKEND", "SIZE", "STORE",
                                                   "OUT"),
                   help=argparse.SUPPRESS)
    return p.parse_args()


def rank_main(args):
    """One rank of one run: the three timings, rank 0 writes them."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    backend, size, store_path, out = args.rank_run
    if backend == "coll":
        import coll.distributed  # noqa: F401  (registers "coll")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend, init_method="file://" + store_path,
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    torch.set_num_threads(1)  # the ranks share the host's cores
    torch.manual_seed(0)
    width, depth = SIZES[size]
    layers = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 1))
    model = nn.Sequential(*layers)
    ddp = DDP(model, bucket_cap_mb=BUCKET_BYTES // (1024 * 1024))
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(32, 64, generator=g)
    y = torch.randn(32, 1, generator=g)

    def step(sync):
        opt.zero_grad()
        if sync:
            nn.functional.mse_loss(ddp(x), y).backward()
        else:
            with ddp.no_sync():
                nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    nparams = sum(p.numel() for p in model.parameters())
    buckets, left = [], nparams
    while left > 0:
        n = min(left, BUCKET_BYTES // 4)
        buckets.append(torch.ones(n))
        left -= n

    def comm():
        for b in buckets:
            dist.all_reduce(b)

    def timed(fn):
        for _ in range(args.warmup):
            fn()
        dist.barrier()
        t = []
        for _ in range(args.steps):
            s = time.perf_counter()
            fn()
            t.append(time.perf_counter() - s)
        return statistics.median(t) * 1000

    res = {"step_ms": timed(lambda: step(True)),
           "compute_ms": timed(lambda: step(False)),
           "comm_ms": timed(comm), "params": nparams}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def one_run(args, backend, size, nproc):
    """Runs one job; its rank 0's figures, or None (with why on stderr)."""
    tmp = tempfile.mkdtemp(prefix="bench-ddp-")
    store, out = os.path.join(tmp, "store"), os.path.join(tmp, "out.json")
    python = os.environ.get("PYTHON", sys.executable)
    procs = [subprocess.Popen(
        [python, os.path.abspath(__file__), "--steps", str(args.steps),
         "--warmup", str(args.warmup), "--timeout", str(args.timeout),
         "--rank-run", backend, size, store, out],
        env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc)))
        for r in range(nproc)]
    deadline = time.monotonic() + args.timeout
    bad = False
    # Rank 0 writes the figures before the process group is torn down; once
    # they are there, ranks still in teardown (gloo's destroy has been seen
    # to hang after its peer left, rank 0's too) get 10 s, then are stopped
    # without failing the run.
    while any(p.poll() is None for p in procs):
        if any(p.returncode not in (None, 0) for p in procs):
            bad = True
            break
        if os.path.exists(out):
            deadline = min(deadline, time.monotonic() + 10)
        if time.monotonic() > deadline:
            if os.path.exists(out):
                print("bench-ddp: %s %s at %d ranks: a rank still tearing "
                      "down 10 s after rank 0 wrote its figures; stopped" %
                      (backend, size, nproc), file=sys.stderr)
            else:
                bad = True
            break
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    bad |= any(p.returncode not in (0, -9) for p in procs)
    if bad or not os.path.exists(out):
        print("bench-ddp: %s %s at %d ranks failed" % (backend, size, nproc),
              file=sys.stderr)
        return None
    with open(out) as f:
        return json.load(f)


def overlap(r):
    hidden = r["compute_ms"] + r["comm_ms"] - r["step_ms"]
    return max(0.0, min(1.0, hidden / max(1e-9, min(r["compute_ms"],
                                                     r["comm_ms"]))))


def main():
    args = parse()
    if args.rank_run:
        rank_main(args)
        return 0
    every, t0 = [], time.monotonic()
    print("%-6s %-7s %-5s %10s %10s %10s %8s  (medians of %d runs)" %
          ("ranks", "model", "backend", "step ms", "compute", "comm",
           "overlap", args.runs), flush=True)
    for nproc in args.nproc:
        for size in args.sizes:
            runs = {b: [] for b in args.backends}
            for k in range(args.runs):
                for b in args.backends:
                    print("bench-ddp: %d ranks, %s, %s, run %d of %d (%.0f s "
                          "so far)" % (nproc, size, b, k + 1, args.runs,
                                       time.monotonic() - t0),
                          file=sys.stderr, flush=True)
                    r = one_run(args, b, size, nproc)
                    if r is not None:
                        r["overlap"] = overlap(r)
                        runs[b].append(r)
                        every.append(dict(r, backend=b, size=size,
                                          nproc=nproc))
            for b in args.backends:
                if not runs[b]:
                    continue
                med = {k: statistics.median(x[k] for x in runs[b])
                       for k in ("step_ms", "compute_ms", "comm_ms",
                                 "overlap")}
                print("%-6d %-7s %-5s %10.2f %10.2f %10.2f %8.2f" %
                      (nproc, size, b, med["step_ms"], med["compute_ms"],
                       med["comm_ms"], med["overlap"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(every, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
