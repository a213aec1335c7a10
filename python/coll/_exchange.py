# SPDX-License-Identifier: Apache-2.0
"""_exchange: the comm's gather, scatter, all-to-all and receive from any
source (coll_gather, coll_scatter, coll_alltoall, coll_alltoallv,
coll_recv_any and their i-forms), mixed into Comm. Arguments are checked
here before libcoll is called, as for the other calls."""
import ctypes
from ctypes import POINTER as P
from ctypes import c_int, c_size_t, c_uint32, c_void_p

from . import _buffers
from ._lib import lib

_S = c_int
_SIZES = P(c_size_t)
_PROTOTYPES = {
    "coll_gather": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "coll_scatter": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "coll_alltoall": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "coll_alltoallv": (_S, [c_void_p, c_void_p, _SIZES, _SIZES, c_void_p, _SIZES, _SIZES,
                            c_int, c_void_p]),
    "coll_recv_any": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_uint32, P(c_int),
                           P(c_size_t)]),
}
for _name, (_res, _args) in list(_PROTOTYPES.items()):
    _PROTOTYPES["coll_i" + _name[5:]] = (_res, _args + [P(c_void_p)])
for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError as e:
        raise ImportError("coll: the loaded libcoll lacks %s (older than this "
                          "package)" % _name) from e
    _fn.restype = _res
    _fn.argtypes = _args


def _counts(values, n, what):
    """A ctypes array of n counts (ints >= 0)."""
    values = list(values)
    if len(values) != n:
        raise ValueError("coll: alltoallv: %s has %d entries, not %d (one per rank)"
                         % (what, len(values), n))
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError("coll: alltoallv: %s holds %r, not a count >= 0" % (what, v))
    return (c_size_t * n)(*values)


def _packed(counts):
    """Displacements that place the blocks one after the other."""
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


class ExchangeMixin:
    """gather, scatter, alltoall, alltoallv and recv_any for Comm."""

    def _rooted(self, name, full, mine, root, nb):
        """gather (full is recv) and scatter (full is send): `mine` is this
        rank's block, `full` the root's size x block; mine None on the root
        means in place (the root's own block of full)."""
        root = self._rank_arg(root, "root")
        on_root = self._rank == root
        writes_full = name == "gather"
        if on_root:
            f = _buffers.view(full, "recv" if writes_full else "send", writable=writes_full)
            if mine is None:
                if f.count % self._size:
                    raise ValueError("coll: %s in place: %d elements are not a multiple of "
                                     "the %d ranks" % (name, f.count, self._size))
                per = f.count // self._size
                mptr = f.ptr + root * per * (f.nbytes // max(1, f.count))
                out_mine = f.obj.reshape(-1)[root * per:(root + 1) * per]
                views, keep = [f], (f.obj,)
            else:
                m = _buffers.view(mine, "send" if writes_full else "recv",
                                  writable=not writes_full)
                _buffers.same_kind([m, f], name)
                per = m.count
                if f.count != per * self._size:
                    raise ValueError("coll: %s: the root's buffer has %d elements but needs "
                                     "%d (%d ranks x %d)"
                                     % (name, f.count, per * self._size, self._size, per))
                mptr, out_mine, views, keep = m.ptr, m.obj, [m, f], (m.obj, f.obj)
            fptr, dtype = f.ptr, f.dtype
        else:
            if mine is None:
                raise ValueError("coll: %s: only the root may pass None (in place)" % name)
            m = _buffers.view(mine, "send" if writes_full else "recv", writable=not writes_full)
            per, mptr, out_mine, views, keep = m.count, m.ptr, m.obj, [m], (m.obj,)
            fptr, dtype = None, m.dtype
        stream = self._stream(views, name)
        if writes_full:
            args = (mptr, fptr, per, dtype, root, stream)
            result = (lambda: full) if on_root else (lambda: None)
        else:
            args = (fptr, mptr, per, dtype, root, stream)
            result = lambda: out_mine  # noqa: E731
        return self._run(name, args, keep, result, nb)

    def gather(self, send, recv=None, root=0):
        """root's recv gets size x send.size elements, rank r's at block r;
        recv is ignored elsewhere. On the root send None means in place
        (its own block of recv is its input). Returns recv on the root,
        None on the other ranks."""
        return self._rooted("gather", recv, send, root, False)

    def igather(self, send, recv=None, root=0):
        return self._rooted("gather", recv, send, root, True)

    def scatter(self, send, recv, root=0):
        """root's send holds size x n elements; rank r gets block r in recv
        (n elements). send is ignored off the root; on the root recv None
        means in place (its own block of send, returned as a view).
        Returns the block received."""
        return self._rooted("scatter", send, recv, root, False)

    def iscatter(self, send, recv, root=0):
        return self._rooted("scatter", send, recv, root, True)

    def _alltoall(self, send, recv, nb):
        s = _buffers.view(send, "send", writable=False)
        r = _buffers.view(recv, "recv", writable=True)
        _buffers.same_kind([s, r], "alltoall")
        if s.count != r.count or s.count % self._size:
            raise ValueError("coll: alltoall: send and recv hold %d and %d elements; both "
                             "must be the same multiple of the %d ranks"
                             % (s.count, r.count, self._size))
        stream = self._stream([s, r], "alltoall")
        args = (s.ptr, r.ptr, s.count // self._size, s.dtype, stream)
        return self._run("alltoall", args, (s.obj, r.obj), lambda: r.obj, nb)

    def alltoall(self, send, recv):
        """send holds size blocks, block r for rank r; recv gets block r
        from rank r. No in-place form. Returns recv."""
        return self._alltoall(send, recv, False)

    def ialltoall(self, send, recv):
        return self._alltoall(send, recv, True)

    def _alltoallv(self, send, send_counts, recv, recv_counts, send_displs, recv_displs,
                   nb):
        n = self._size
        s = _buffers.view(send, "send", writable=False)
        r = _buffers.view(recv, "recv", writable=True)
        _buffers.same_kind([s, r], "alltoallv")
        sc, rc = _counts(send_counts, n, "send_counts"), _counts(recv_counts, n, "recv_counts")
        sd = _counts(_packed(sc) if send_displs is None else send_displs, n, "send_displs")
        rd = _counts(_packed(rc) if recv_displs is None else recv_displs, n, "recv_displs")
        for cnt, dsp, v, side in ((sc, sd, s, "send"), (rc, rd, r, "recv")):
            for i in range(n):
                if cnt[i] and dsp[i] + cnt[i] > v.count:
                    raise ValueError("coll: alltoallv: the %s block of rank %d ends at "
                                     "element %d, past the %d of %s"
                                     % (side, i, dsp[i] + cnt[i], v.count, side))
        stream = self._stream([s, r], "alltoallv")
        args = (s.ptr, sc, sd, r.ptr, rc, rd, s.dtype, stream)
        return self._run("alltoallv", args, (s.obj, r.obj, sc, sd, rc, rd), lambda: r.obj, nb)

    def alltoallv(self, send, send_counts, recv, recv_counts, send_displs=None,
                  recv_displs=None):
        """send_counts[r] elements at send_displs[r] go to rank r;
        recv_counts[r] from rank r land at recv_displs[r] (displacements
        in elements; None: the blocks packed in rank order). Rank i's
        send_counts[j] must equal rank j's recv_counts[i], else
        LengthMismatchError on every rank. Returns recv."""
        return self._alltoallv(send, send_counts, recv, recv_counts, send_displs,
                               recv_displs, False)

    def ialltoallv(self, send, send_counts, recv, recv_counts, send_displs=None,
                   recv_displs=None):
        return self._alltoallv(send, send_counts, recv, recv_counts, send_displs,
                               recv_displs, True)

    def _recv_any(self, buf, tag, nb):
        tag = self._tag_arg(tag)
        v = _buffers.view(buf, "buf", writable=True)
        self._stream([v], "recv_any")
        src, got = c_int(-1), c_size_t(0)
        args = (v.ptr, v.count, v.dtype, tag, ctypes.byref(src), ctypes.byref(got))
        return self._run("recv_any", args, (v.obj, src, got),
                         lambda: (src.value, got.value), nb)

    def recv_any(self, buf, tag=0):
        """Receive the first message on tag from any other rank into buf;
        returns (source rank, element count). Receives on a tag match in
        the order they were issued. CPU comms over libcoll's own
        transports."""
        return self._recv_any(buf, tag, False)

    def irecv_any(self, buf, tag=0):
        """Request whose wait() returns (source rank, element count)."""
        return self._recv_any(buf, tag, True)
