# SPDX-License-Identifier: Apache-2.0
"""gather, scatter, alltoall, alltoallv and recv_any through the package,
on NumPy arrays and torch tensors, 1 to 4 ranks as threads, blocking and
nonblocking, against a serial reference: block (from, to) holds values
that say who sent it to whom. Then the package's own refusals and a
mismatch between ranks' counts."""
import numpy as np
import pytest

import coll
import refs
from conftest import Ranks

D = coll.DType
KINDS = ["numpy", "torch"]
DTYPES = (D.U8, D.F32, D.I64)


@pytest.fixture(params=KINDS)
def kind(request):
    if request.param == "torch":
        pytest.importorskip("torch")
    return request.param


def block(dt, frm, to, n):
    """What rank frm sends rank to: n values that name both."""
    v = (np.arange(n) * 7 + frm * 31 + to * 5) % 100
    return refs.round_to(dt, v)


def same(got, want, what):
    got = refs.back(got)
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (
        "%s: got %s, want %s" % (what, got[:6], want[:6]))


@pytest.mark.parametrize("nb", [False, True], ids=["blocking", "nonblocking"])
def test_gather_scatter(ranks, kind, nb):
    n, per = ranks.n, 5

    def body(c):
        for dt in DTYPES:
            for root in range(n):
                mine = refs.make(kind, dt, block(dt, c.rank, root, per))
                full = refs.make(kind, dt, np.zeros(n * per)) if c.rank == root else None
                r = c.igather(mine, full, root) if nb else c.gather(mine, full, root)
                got = r.wait() if nb else r
                if c.rank == root:
                    assert got is full
                    for k in range(n):
                        same(full[k * per:(k + 1) * per], block(dt, k, root, per), "gather")
                else:
                    assert got is None
                # scatter: the root's block r goes to rank r
                src = (refs.make(kind, dt, np.concatenate(
                    [block(dt, root, k, per) for k in range(n)])) if c.rank == root else None)
                out = refs.make(kind, dt, np.zeros(per))
                r = c.iscatter(src, out, root) if nb else c.scatter(src, out, root)
                got = r.wait() if nb else r
                assert got is out
                same(out, block(dt, root, c.rank, per), "scatter")
        return True

    assert all(ranks.run(body))


def test_gather_scatter_in_place(ranks, kind):
    n, per, dt = ranks.n, 3, D.F32

    def body(c):
        for root in range(n):
            if c.rank == root:
                full = refs.make(kind, dt, np.zeros(n * per))
                full[root * per:(root + 1) * per] = refs.make(kind, dt, block(dt, root, root, per))
                assert c.gather(None, full, root) is full
                for k in range(n):
                    same(full[k * per:(k + 1) * per], block(dt, k, root, per), "gather in place")
                src = refs.make(kind, dt, np.concatenate([block(dt, root, k, per) for k in range(n)]))
                mine = c.scatter(src, None, root)
                same(mine, block(dt, root, root, per), "scatter in place")
            else:
                c.gather(refs.make(kind, dt, block(dt, c.rank, root, per)), None, root)
                out = refs.make(kind, dt, np.zeros(per))
                c.scatter(None, out, root)
                same(out, block(dt, root, c.rank, per), "scatter to a non-root")
        return True

    assert all(ranks.run(body))


@pytest.mark.parametrize("nb", [False, True], ids=["blocking", "nonblocking"])
def test_alltoall_and_v(ranks, kind, nb):
    n, per = ranks.n, 4

    def cnt(frm, to):
        return (frm * 3 + to) % 4  # zero for some pairs

    def body(c):
        for dt in DTYPES:
            send = refs.make(kind, dt, np.concatenate([block(dt, c.rank, k, per) for k in range(n)]))
            recv = refs.make(kind, dt, np.zeros(n * per))
            r = c.ialltoall(send, recv) if nb else c.alltoall(send, recv)
            assert (r.wait() if nb else r) is recv
            for k in range(n):
                same(recv[k * per:(k + 1) * per], block(dt, k, c.rank, per), "alltoall")
            sc = [cnt(c.rank, k) for k in range(n)]
            rc = [cnt(k, c.rank) for k in range(n)]
            send = refs.make(kind, dt, np.concatenate(
                [block(dt, c.rank, k, sc[k]) for k in range(n)] + [np.zeros(1)]))
            recv = refs.make(kind, dt, np.zeros(sum(rc) + 1))
            r = (c.ialltoallv(send, sc, recv, rc) if nb else c.alltoallv(send, sc, recv, rc))
            assert (r.wait() if nb else r) is recv
            at = 0
            for k in range(n):
                same(recv[at:at + rc[k]], block(dt, k, c.rank, rc[k]), "alltoallv")
                at += rc[k]
        return True

    assert all(ranks.run(body))


def test_recv_any(kind):
    r3 = Ranks(3, timeout_ms=60000)
    try:
        def body(c):
            if c.rank == 0:
                seen = {}
                for _ in range(4):
                    buf = refs.make(kind, D.I32, np.zeros(2))
                    src, count = c.recv_any(buf, tag=9)
                    assert count == 2
                    same(buf, block(D.I32, src, seen.get(src, 0), 2), "recv_any")
                    seen[src] = seen.get(src, 0) + 1
                req = c.irecv_any(refs.make(kind, D.I32, np.zeros(2)), tag=10)
                src, count = req.wait()
                assert src in (1, 2) and count == 2
                return seen
            for i in range(2):
                c.send(refs.make(kind, D.I32, block(D.I32, c.rank, i, 2)), 0, tag=9)
            if c.rank == 1:
                c.send(refs.make(kind, D.I32, block(D.I32, 1, 0, 2)), 0, tag=10)
            return None

        res = r3.run(body)
        assert res[0] == {1: 2, 2: 2}
    finally:
        r3.close()


def test_refusals_and_mismatch(fresh2):
    c0 = fresh2.comms[0]
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="root"):
        c0.gather(x, np.zeros(8, np.float32), root=2)
    with pytest.raises(ValueError, match="needs 8"):
        c0.gather(x, np.zeros(7, np.float32), root=0)
    with pytest.raises(ValueError, match="only the root"):
        c0.scatter(x, None, root=1)
    with pytest.raises(ValueError, match="multiple"):
        c0.alltoall(np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="dtypes differ"):
        c0.alltoall(np.zeros(4, np.float32), np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="entries"):
        c0.alltoallv(x, [1], x, [1, 1])
    with pytest.raises(ValueError, match="past"):
        c0.alltoallv(x, [2, 3], x, [2, 2])
    with pytest.raises(coll.InvalidArgError, match="alltoall"):
        c0.alltoall(x, x)  # no in-place form

    # Counts that differ between the ranks: every rank is told, and the
    # comm keeps working.
    def body(c):
        sc = [2, 3] if c.rank == 0 else [2, 2]
        try:
            c.alltoallv(np.ones(5, np.int32), sc, np.zeros(4, np.int32), [2, 2])
        except coll.LengthMismatchError as e:
            ok = "alltoallv" in str(e)
        else:
            ok = False
        out = np.zeros(2, np.int32)
        c.alltoall(np.full(2, c.rank, np.int32), out)
        return ok and list(out) == [0, 1]

    assert fresh2.run(body) == [True, True]
