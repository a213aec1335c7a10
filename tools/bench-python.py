#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench-python.py: the Python package's overhead on allreduce, against the
C API measured by coll-perf with the same sizes, loop and ranks.

Both sides run under coll-run, f32 SUM, in place, over TCP: coll-perf's
in-place column, and this script's own rank loop (warm-up, a barrier, the
timed loop of comm.allreduce(x), the slowest rank's time, as coll-perf
takes it). Prints one row per size and the ratio python/C.

    tools/bench-python.py --build build            # 2 ranks, 4 KiB and 16 MiB
    tools/bench-python.py --build build -n 4 --sizes 4K,1M,16M --iters 50

Run it on a quiet machine for figures worth quoting.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def strip_rank(line):
    """coll-run prefixes every line with "[rank] "."""
    if line.startswith("[") and "] " in line:
        return line.split("] ", 1)[1]
    return line


def rank_loop(sizes, iters, warmup):
    """One rank of the Python side; rank 0 prints one JSON line."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np

    import coll

    rows = []
    with coll.init_env(name="bench-python") as comm:
        for size in sizes:
            x = np.zeros(size // 4, dtype=np.float32)
            for _ in range(warmup):
                comm.allreduce(x)
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                comm.allreduce(x)
            t = np.array([(time.perf_counter() - t0) / iters * 1e6])
            comm.allreduce(t, op=coll.MAX)
            rows.append({"size": size, "time_us": float(t[0])})
        if comm.rank == 0:
            print(json.dumps({"tool": "bench-python", "ranks": comm.size, "results": rows}))


def run_json(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("bench-python: %s failed (exit %d):\n%s%s" % (cmd[0], p.returncode, p.stdout, p.stderr))
    text = "\n".join(strip_rank(line) for line in p.stdout.splitlines())
    return json.loads(text[text.index("{") :])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build folder (default: build)")
    ap.add_argument("-n", "--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="4K,16M", help="comma-separated sizes in bytes (K, M, G)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=300, help="bound on each job, in s")
    ap.add_argument("--rank-loop", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    if a.rank_loop:
        return rank_loop(sizes, a.iters, a.warmup)
    coll_run = os.path.join(a.build, "tools", "coll-run")
    coll_perf = os.path.join(a.build, "tools", "coll-perf")
    lib = os.path.join(a.build, "src", "libcoll.so.0")
    for path in (coll_run, coll_perf, lib):
        if not os.path.exists(path):
            sys.exit("bench-python: %s not found; build first or pass --build" % path)
    os.environ.setdefault("COLL_LIBRARY", os.path.abspath(lib))
    launch = [coll_run, "-n", str(a.ranks), "--timeout", str(a.timeout)]
    c_times = {}
    for size in sizes:
        perf = run_json(
            launch + [coll_perf, "-b", str(size), "-e", str(size), "-n", str(a.iters),
                      "-w", str(a.warmup), "-c", "0", "--json"],
            a.timeout + 30,
        )
        c_times[size] = perf["results"][0]["in_place"]["time_us"]
    py = run_json(
        launch + [sys.executable, os.path.abspath(__file__), "--rank-loop", "--sizes", a.sizes,
                  "--iters", str(a.iters), "--warmup", str(a.warmup)],
        a.timeout + 30,
    )
    print("# allreduce f32 sum in place, %d ranks under coll-run, %d iters (%d warm-up)"
          % (a.ranks, a.iters, a.warmup))
    print("%12s  %12s  %12s  %8s" % ("bytes", "C (us)", "python (us)", "ratio"))
    for row in py["results"]:
        c = c_times[row["size"]]
        print("%12d  %12.2f  %12.2f  %8.3f" % (row["size"], c, row["time_us"], row["time_us"] / c))


if __name__ == "__main__":
    main()
