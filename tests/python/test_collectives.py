# SPDX-License-Identifier: Apache-2.0
"""Every collective, every dtype and op, on NumPy arrays and torch tensors,
1 to 4 ranks as threads, against the serial reference of refs.py:
bit-exact (see refs.py for why each case is), and bit-identical on every
rank."""
import numpy as np
import pytest

import coll
import refs
from conftest import Ranks

D, Op = coll.DType, coll.Op
KINDS = ["numpy", "torch"]


@pytest.fixture(params=KINDS)
def kind(request):
    if request.param == "torch":
        pytest.importorskip("torch")
    return request.param


def dtypes_of(kind):
    return refs.ALL if kind == "torch" else refs.NUMPY_DTYPES


def ops_of(dt):
    return list(Op)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check(case, got, want):
    assert same_bits(got, want), "%s: got %s, want %s" % (case, got[:8], want[:8])


@pytest.mark.parametrize("count", [37, 70001], ids=["small", "ring"])
def test_allreduce_every_dtype_and_op(ranks, kind, count):
    n = ranks.n
    cases = [(dt, op) for dt in dtypes_of(kind) for op in ops_of(dt)]

    def body(c):
        out = {}
        for dt, op in cases:
            x = refs.make(kind, dt, refs.data(dt, op, c.rank, count))
            assert c.allreduce(x, op=op) is x
            out[dt, op, "in"] = refs.back(x)
            src = refs.make(kind, dt, refs.data(dt, op, c.rank, count))
            dst = refs.make(kind, dt, np.zeros(count))
            assert c.allreduce(src, dst, op) is dst
            out[dt, op, "out"] = refs.back(dst)
            assert same_bits(refs.back(src), refs.data(dt, op, c.rank, count)), "send changed"
        return out

    results = ranks.run(body)
    for dt, op in cases:
        want = refs.reduce(dt, op, [refs.data(dt, op, r, count) for r in range(n)])
        for r in range(n):
            for mode in ("in", "out"):
                check("rank %d %s %s %s" % (r, dt.name, op.name, mode), results[r][dt, op, mode], want)


def test_allreduce_random_floats_two_ranks_bit_exact(kind):
    # At 2 ranks each element is rounded once whatever the algorithm, so
    # even random data must match the reference bit for bit.
    r2 = Ranks(2)
    try:
        cases = [(dt, op) for dt in dtypes_of(kind) if dt in refs.FLOATS for op in Op]

        def body(c):
            out = {}
            for dt, op in cases:
                x = refs.make(kind, dt, refs.random_floats(dt, c.rank, 1001))
                out[dt, op] = refs.back(c.allreduce(x, op=op))
            return out

        res = r2.run(body)
        for dt, op in cases:
            want = refs.reduce(dt, op, [refs.random_floats(dt, r, 1001) for r in range(2)])
            for r in range(2):
                check("rank %d %s %s" % (r, dt.name, op.name), res[r][dt, op], want)
    finally:
        r2.close()


def test_allreduce_random_f32_within_bound_and_identical(ranks):
    # More than 2 ranks: the order of summation is the algorithm's, so the
    # result is within (n-1) roundings of the exact sum, the same on every
    # rank bit for bit.
    n, count = ranks.n, 100000
    inputs = [refs.random_floats(D.F32, r, count) for r in range(n)]
    res = ranks.run(lambda c: c.allreduce(inputs[c.rank].copy()))
    exact = sum(x.astype(np.float64) for x in inputs)
    bound = max(n - 1, 1) * np.finfo(np.float32).eps * sum(np.abs(x.astype(np.float64)) for x in inputs)
    assert np.all(np.abs(res[0] - exact) <= bound)
    for r in range(1, n):
        assert same_bits(res[r], res[0])


def test_batch_and_premul_sum(ranks, kind):
    n = ranks.n
    dts = [dt for dt in dtypes_of(kind)]
    fdts = [dt for dt in dts if dt in refs.FLOATS]

    def body(c):
        bufs = [refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 5 + i)) for i, dt in enumerate(dts)]
        assert c.allreduce_batch(bufs, Op.SUM) == bufs
        fb = [refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 9)) for dt in fdts]
        c.allreduce_premul_sum(fb, 0.5 * (c.rank + 1))
        empty = c.allreduce_batch([])
        return [refs.back(b) for b in bufs], [refs.back(b) for b in fb], empty

    res = ranks.run(body)
    for i, dt in enumerate(dts):
        want = refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, r, 5 + i) for r in range(n)])
        for r in range(n):
            check("batch %s rank %d" % (dt.name, r), res[r][0][i], want)
    for i, dt in enumerate(fdts):
        scaled = [refs.data(dt, Op.SUM, r, 9).astype(np.float64) * 0.5 * (r + 1) for r in range(n)]
        want = refs.round_to(dt, sum(scaled))
        for r in range(n):
            check("premul %s rank %d" % (dt.name, r), res[r][1][i], want)
        assert res[0][2] == []


def test_broadcast_every_root(ranks, kind):
    n = ranks.n

    def body(c):
        out = []
        for root in range(n):
            for dt in dtypes_of(kind):
                vals = refs.data(dt, Op.SUM, root, 33) if c.rank == root else np.zeros(33)
                b = refs.make(kind, dt, vals)
                assert c.broadcast(b, root=root) is b
                out.append((root, dt, refs.back(b)))
        return out

    for r, res in enumerate(ranks.run(body)):
        for root, dt, got in res:
            check("rank %d root %d %s" % (r, root, dt.name), got, refs.data(dt, Op.SUM, root, 33))


def test_allgather_in_and_out_of_place(ranks, kind):
    n, per = ranks.n, 11

    def body(c):
        out = {}
        for dt in dtypes_of(kind):
            mine = refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, per))
            all_ = refs.make(kind, dt, np.zeros(n * per))
            assert c.allgather(mine, all_) is all_
            out[dt, "out"] = refs.back(all_)
            buf = np.zeros(n * per, dtype=refs.carrier(dt))
            buf[c.rank * per : (c.rank + 1) * per] = refs.data(dt, Op.SUM, c.rank, per)
            inplace = refs.make(kind, dt, buf)
            assert c.allgather(None, inplace) is inplace
            out[dt, "in"] = refs.back(inplace)
        return out

    res = ranks.run(body)
    for dt in dtypes_of(kind):
        want = np.concatenate([refs.data(dt, Op.SUM, r, per) for r in range(n)])
        for r in range(n):
            for mode in ("in", "out"):
                check("rank %d %s %s" % (r, dt.name, mode), res[r][dt, mode], want)


def test_reduce_scatter_in_and_out_of_place(ranks, kind):
    n, per = ranks.n, 7
    cases = [(dt, op) for dt in dtypes_of(kind) for op in Op]

    def body(c):
        out = {}
        for dt, op in cases:
            send = refs.make(kind, dt, refs.data(dt, op, c.rank, n * per))
            recv = refs.make(kind, dt, np.zeros(per))
            assert c.reduce_scatter(send, recv, op) is recv
            out[dt, op, "out"] = refs.back(recv)
            both = refs.make(kind, dt, refs.data(dt, op, c.rank, n * per))
            out[dt, op, "in"] = refs.back(c.reduce_scatter(both, None, op))
        return out

    res = ranks.run(body)
    for dt, op in cases:
        full = refs.reduce(dt, op, [refs.data(dt, op, r, n * per) for r in range(n)])
        for r in range(n):
            for mode in ("in", "out"):
                check("rank %d %s %s %s" % (r, dt.name, op.name, mode), res[r][dt, op, mode], full[r * per : (r + 1) * per])


def test_reduce_to_every_root(ranks, kind):
    n, count = ranks.n, 13
    dts = dtypes_of(kind)

    def body(c):
        out = []
        for root in range(n):
            for dt in dts:
                for op in (Op.SUM, Op.MAX, Op.AVG):
                    send = refs.make(kind, dt, refs.data(dt, op, c.rank, count))
                    recv = refs.make(kind, dt, np.zeros(count))
                    got = c.reduce(send, recv, op, root)
                    if c.rank == root:
                        assert got is recv
                        out.append((root, dt, op, refs.back(recv)))
                    else:
                        assert got is None
                        assert not np.any(refs.back(recv)), "recv written on a non-root rank"
                    inplace = refs.make(kind, dt, refs.data(dt, op, c.rank, count))
                    got = c.reduce(inplace, None, op, root)
                    if c.rank == root:
                        out.append((root, dt, op, refs.back(got)))
        return out

    for r, res in enumerate(ranks.run(body)):
        assert len(res) == 2 * len(dts) * 3, "rank %d got %d results as root" % (r, len(res))
        for root, dt, op, got in res:
            want = refs.reduce(dt, op, [refs.data(dt, op, q, count) for q in range(n)])
            check("root %d %s %s" % (root, dt.name, op.name), got, want)


def test_nonblocking_forms(ranks, kind):
    n = ranks.n
    dt = D.F32

    def body(c):
        x = refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 64))
        reqs = [c.iallreduce(x)]
        b = refs.make(kind, dt, refs.data(dt, Op.SUM, 0, 8) if c.rank == 0 else np.zeros(8))
        reqs.append(c.ibroadcast(b, 0))
        g = refs.make(kind, dt, np.zeros(n * 3))
        reqs.append(c.iallgather(refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 3)), g))
        rs = refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, n * 2))
        reqs.append(c.ireduce_scatter(rs, None))
        red = refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 4))
        reqs.append(c.ireduce(red, None, Op.SUM, 0))
        reqs.append(c.ibarrier())
        bb = [refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 5))]
        reqs.append(c.iallreduce_batch(bb))
        pm = [refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 5))]
        reqs.append(c.iallreduce_premul_sum(pm, 2.0))
        reqs.append(c.inegotiate_dtype(D.F16 if c.rank == 0 else D.F32))
        vals = [r.wait() for r in reqs]
        assert all(r.is_completed() for r in reqs)
        assert vals[0] is x and vals[1] is b and vals[2] is g and vals[5] is None
        return [None if v is None else refs.back(v) for v in vals[:5]], vals[6], vals[7], vals[8], refs.back(bb[0]), refs.back(pm[0])

    res = ranks.run(body)
    s64 = refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, r, 64) for r in range(n)])
    rs = refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, r, n * 2) for r in range(n)])
    for r in range(n):
        arrs = res[r][0]
        check("iallreduce", arrs[0], s64)
        check("ibroadcast", arrs[1], refs.data(dt, Op.SUM, 0, 8))
        check("iallgather", arrs[2], np.concatenate([refs.data(dt, Op.SUM, q, 3) for q in range(n)]))
        check("ireduce_scatter", arrs[3], rs[r * 2 : r * 2 + 2])
        if r == 0:
            check("ireduce", arrs[4], refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, q, 4) for q in range(n)]))
        assert res[r][3] == (D.F16 if n == 1 else D.F32)
        check("iallreduce_batch", res[r][4], refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, q, 5) for q in range(n)]))
        check("iallreduce_premul_sum", res[r][5], refs.reduce(dt, Op.SUM, [refs.data(dt, Op.SUM, q, 5) * 2 for q in range(n)]))


def test_negotiate_and_federated_average(ranks):
    n = ranks.n

    def body(c):
        agreed = c.negotiate_dtype(D.F64 if c.rank == n - 1 else D.F16)
        same = c.negotiate_dtype(np.float32)
        w = np.full(6, float(c.rank + 1), dtype=np.float32)
        took = c.federated_average(w, 30000)
        return agreed, same, took, w

    for agreed, same, took, w in ranks.run(body):
        assert agreed == (D.F64)
        assert same == D.F32
        assert took == n
        assert np.all(w == np.float32(sum(range(1, n + 1)) / n))


def test_point_to_point(ranks, kind):
    n = ranks.n
    if n < 2:
        pytest.skip("point-to-point needs 2 ranks")

    def body(c):
        nxt, prv = (c.rank + 1) % n, (c.rank - 1) % n
        out = {}
        for dt in dtypes_of(kind):
            mine = refs.make(kind, dt, refs.data(dt, Op.SUM, c.rank, 20))
            got = refs.make(kind, dt, np.zeros(25))
            rr = c.irecv(got, prv, tag=7)
            sr = c.isend(mine, nxt, tag=7)
            out[dt] = (rr.wait(), sr.wait())
            out[dt, "buf"] = refs.back(got)
        # blocking, on another tag, in an order that cannot deadlock
        b = np.arange(3, dtype=np.int64) + 100 * c.rank
        if c.rank == 0:
            c.send(b, 1, tag=3)
        elif c.rank == 1:
            r = np.zeros(3, dtype=np.int64)
            out["blocking"] = (c.recv(r, 0, tag=3), r)
        return out

    res = ranks.run(body)
    for r in range(n):
        prv = (r - 1) % n
        for dt in dtypes_of(kind):
            assert res[r][dt] == (20, None)
            want = np.zeros(25, dtype=refs.carrier(dt))
            want[:20] = refs.data(dt, Op.SUM, prv, 20)
            check("p2p %s rank %d" % (dt.name, r), res[r][dt, "buf"], want)
    count, got = res[1]["blocking"]
    assert count == 3 and list(got) == [0, 1, 2]
