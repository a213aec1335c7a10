# SPDX-License-Identifier: Apache-2.0
"""One rank of a multi-process check: a comm from the environment
(coll.init_env(): coll-run, torchrun, mpirun), every collective on NumPy
arrays (and torch tensors when torch is there) against refs.py's serial
reference, computed from every rank's inputs, which each rank can make.
Exits 0 when every result holds, 1 with a message otherwise.

    coll-run -n 4 /usr/bin/python3 tests/python/rank_script.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import numpy as np  # noqa: E402

import coll  # noqa: E402
import refs  # noqa: E402

Op = coll.Op


def expect(what, got, want):
    if got.dtype != want.dtype or got.tobytes() != want.tobytes():
        raise AssertionError("%s: got %s, want %s" % (what, got[:6], want[:6]))


def main():
    comm = coll.init_env(timeout_ms=60000, name="rank_script")
    n, me = comm.size, comm.rank
    kinds = ["numpy"]
    try:
        import torch  # noqa: F401

        kinds.append("torch")
    except ImportError:
        pass
    with comm:
        for kind in kinds:
            dts = refs.ALL if kind == "torch" else refs.NUMPY_DTYPES
            for dt in dts:
                for op in Op:
                    x = refs.make(kind, dt, refs.data(dt, op, me, 1000))
                    comm.allreduce(x, op=op)
                    want = refs.reduce(dt, op, [refs.data(dt, op, r, 1000) for r in range(n)])
                    expect("%s allreduce %s %s" % (kind, dt.name, op.name), refs.back(x), want)
                per = 5
                g = refs.make(kind, dt, np.zeros(n * per))
                comm.allgather(refs.make(kind, dt, refs.data(dt, Op.SUM, me, per)), g)
                want = np.concatenate([refs.data(dt, Op.SUM, r, per) for r in range(n)])
                expect("%s allgather %s" % (kind, dt.name), refs.back(g), want)
                rs = refs.make(kind, dt, np.zeros(per))
                comm.reduce_scatter(refs.make(kind, dt, refs.data(dt, Op.MAX, me, n * per)), rs, Op.MAX)
                full = refs.reduce(dt, Op.MAX, [refs.data(dt, Op.MAX, r, n * per) for r in range(n)])
                expect("%s reduce_scatter %s" % (kind, dt.name), refs.back(rs), full[me * per : (me + 1) * per])
                b = refs.make(kind, dt, refs.data(dt, Op.SUM, n - 1, 9) if me == n - 1 else np.zeros(9))
                comm.broadcast(b, root=n - 1)
                expect("%s broadcast %s" % (kind, dt.name), refs.back(b), refs.data(dt, Op.SUM, n - 1, 9))
                red = comm.reduce(refs.make(kind, dt, refs.data(dt, Op.SUM, me, 9)), None, Op.SUM, 0)
                if me == 0:
                    want = refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, r, 9) for r in range(n)])
                    expect("%s reduce %s" % (kind, dt.name), refs.back(red), want)
        req = comm.iallreduce(np.full(1 << 20, me + 1.0, dtype=np.float32))
        if n > 1:
            ring = np.empty(4, dtype=np.int64)
            rr = comm.irecv(ring, (me - 1) % n, tag=11)
            comm.send(np.arange(4, dtype=np.int64) + me, (me + 1) % n, tag=11)
            assert rr.wait() == 4 and list(ring) == list(np.arange(4) + (me - 1) % n), ring
        big = req.wait()
        assert np.all(big == n * (n + 1) / 2), big[:4]
        comm.barrier()
    print("rank %d of %d: ok (%s)" % (me, n, ", ".join(kinds)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a clear line instead of a traceback per rank
        print("FAILED: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
