# SPDX-License-Identifier: Apache-2.0
"""_comm: the communicator (coll_comm_t): its collectives and lifetime.

Every collective takes NumPy arrays or torch tensors and passes their data
pointers: no copies. An argument error (dtype, contiguity, size, device,
read-only output, rank or tag range) raises ValueError/TypeError before
libcoll is called; a failure libcoll reports raises a CollError subclass.
"""
import ctypes
import math
import weakref

from . import _buffers, _errors, _types
from ._exchange import ExchangeMixin
from ._handles import AbortHandle, Request, _RequestState
from ._lib import Buffer, lib

_TAG_LIMIT = 0x80000000  # COLL_TAG_RESERVED: user tags are below it
_INT_MAX = 2**31 - 1


class _CommState:
    """The comm pointer and its pending requests, apart from the Comm
    object so a finalizer can destroy them without keeping Comm alive."""

    def __init__(self, handle):
        self.handle = handle
        self.pending = set()

    def destroy(self):
        """coll_comm_destroy, then wait every pending request (coll.h: they
        end with COLL_ERR_ABORTED at once and must still be waited).
        Returns the destroy's exception or None."""
        h, self.handle = self.handle, None
        if h is None:
            return None
        st = lib.coll_comm_destroy(h)
        err = _errors.error(st, "comm_destroy") if st != 0 else None
        for r in list(self.pending):
            r.finish()
        self.pending.clear()
        return err


class Comm(ExchangeMixin):
    """One rank of a communicator. Use it from one thread at a time; the
    abort handle (abort_handle()) is the part any thread may use. Destroy
    it with destroy() or a `with` block; one that is garbage collected is
    destroyed then (never at interpreter exit, when another thread may
    still be inside it)."""

    def __init__(self, handle):
        self._state = _CommState(handle)
        self._fin = weakref.finalize(self, _CommState.destroy, self._state)
        self._fin.atexit = False
        self._rank = lib.coll_comm_rank(handle)
        self._size = lib.coll_comm_size(handle)
        self._backend = lib.coll_comm_backend(handle).decode()

    # -- the comm itself ---------------------------------------------------

    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    @property
    def backend(self):
        """"cpu" or "nccl"."""
        return self._backend

    @property
    def raw(self):
        """The coll_comm_t pointer as an int (for a C extension)."""
        return self._live("raw")

    def destroy(self):
        """Destroy the comm (idempotent). Pending requests end with
        AbortedError, raised by their wait()."""
        if not self._fin.alive:
            return
        self._fin.detach()
        err = self._state.destroy()
        if err is not None:
            raise err

    def abort_handle(self):
        """A new AbortHandle on this comm, for a watchdog thread."""
        h = ctypes.c_void_p()
        _errors.check(
            lib.coll_comm_abort_handle(self._live("abort_handle"), ctypes.byref(h)),
            "abort_handle",
        )
        return AbortHandle(h.value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __repr__(self):
        if self._state.handle is None:
            return "<coll.Comm destroyed>"
        return "<coll.Comm rank %d of %d, %s>" % (self._rank, self._size, self._backend)

    # -- plumbing ----------------------------------------------------------

    def _live(self, what):
        h = self._state.handle
        if h is None:
            raise ValueError("coll: %s on a destroyed comm" % what)
        return h

    def _forget(self, req_state):
        self._state.pending.discard(req_state)

    def _reap(self):
        """Wait the dropped requests that finished, so their buffers go."""
        for r in [r for r in self._state.pending if r.orphan]:
            if r.done():
                r.finish()
                self._state.pending.discard(r)

    def _run(self, name, args, keep, result, nonblocking):
        """Call coll_<name> (or coll_i<name>) on this comm."""
        h = self._live(name)
        if self._state.pending:
            self._reap()
        if not nonblocking:
            _errors.check(getattr(lib, "coll_" + name)(h, *args), name)
            return result()
        req = ctypes.c_void_p()
        st = getattr(lib, "coll_i" + name)(h, *args, ctypes.byref(req))
        _errors.check(st, "i" + name)
        state = _RequestState(req.value, keep, result, name)
        self._state.pending.add(state)
        return Request(self, state)

    def _stream(self, views, what):
        """Check the buffers' devices against the backend; the stream."""
        _buffers.same_device(views, what)
        v = views[0]
        if self._backend == "nccl" and not v.is_cuda:
            raise ValueError("coll: %s: host memory on an NCCL comm; pass CUDA tensors" % what)
        return _buffers.stream_of(v)

    def _rank_arg(self, value, what):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError("coll: %s must be an int" % what)
        if not 0 <= value < self._size:
            raise ValueError("coll: %s %d is outside 0..%d" % (what, value, self._size - 1))
        return value

    @staticmethod
    def _tag_arg(tag):
        if not isinstance(tag, int) or isinstance(tag, bool):
            raise TypeError("coll: tag must be an int")
        if not 0 <= tag < _TAG_LIMIT:
            raise ValueError(
                "coll: tag %d is outside 0..0x7fffffff (higher tags are libcoll's)" % tag
            )
        return tag

    def _send_recv_pair(self, send, recv, what):
        """(send view, recv view) of an elementwise call; recv None or the
        same memory means in place."""
        s = _buffers.view(send, "send", writable=recv is None)
        if recv is None or recv is send:
            return s, s
        r = _buffers.view(recv, "recv", writable=True)
        _buffers.same_kind([s, r], what)
        if tuple(s.obj.shape) != tuple(r.obj.shape):
            raise ValueError(
                "coll: %s: send has shape %s but recv has shape %s"
                % (what, tuple(s.obj.shape), tuple(r.obj.shape))
            )
        return s, r

    # -- collectives -------------------------------------------------------

    def _allreduce(self, send, recv, op, nb):
        op = _types.op_of(op)
        s, r = self._send_recv_pair(send, recv, "allreduce")
        stream = self._stream([s, r], "allreduce")
        args = (s.ptr, r.ptr, s.count, s.dtype, op, stream)
        return self._run("allreduce", args, (s.obj, r.obj), lambda: r.obj, nb)

    def allreduce(self, send, recv=None, op=_types.Op.SUM):
        """recv = op over every rank's send; in place when recv is None or
        send itself. Returns the result buffer."""
        return self._allreduce(send, recv, op, False)

    def iallreduce(self, send, recv=None, op=_types.Op.SUM):
        return self._allreduce(send, recv, op, True)

    def _buffer_list(self, bufs, what):
        if isinstance(bufs, (list, tuple)):
            items = list(bufs)
        else:
            raise TypeError("coll: %s takes a list of arrays/tensors" % what)
        views = [_buffers.view(b, "%s buffer %d" % (what, i), True) for i, b in enumerate(items)]
        arr = (Buffer * max(1, len(views)))()
        for i, v in enumerate(views):
            arr[i] = Buffer(v.ptr, v.count, v.dtype)
        stream = None
        if views:
            stream = self._stream(views, what)
        return items, views, arr, stream

    def _allreduce_batch(self, bufs, op, nb):
        op = _types.op_of(op)
        items, views, arr, stream = self._buffer_list(bufs, "allreduce_batch")
        args = (arr, len(views), op, stream)
        return self._run("allreduce_batch", args, (items, arr), lambda: items, nb)

    def allreduce_batch(self, bufs, op=_types.Op.SUM):
        """Allreduce every buffer of the list in place, as one collective
        (dtypes may differ). Returns the list."""
        return self._allreduce_batch(bufs, op, False)

    def iallreduce_batch(self, bufs, op=_types.Op.SUM):
        return self._allreduce_batch(bufs, op, True)

    def _premul_sum(self, bufs, factor, nb):
        if not isinstance(factor, (int, float)) or isinstance(factor, bool):
            raise TypeError("coll: factor must be a float")
        if not math.isfinite(factor):
            raise ValueError("coll: factor %r is not finite" % factor)
        items, views, arr, stream = self._buffer_list(bufs, "allreduce_premul_sum")
        args = (arr, len(views), float(factor), stream)
        return self._run("allreduce_premul_sum", args, (items, arr), lambda: items, nb)

    def allreduce_premul_sum(self, bufs, factor):
        """In place: every rank's buffers times its own factor, summed over
        the ranks (floating-point dtypes). Returns the list."""
        return self._premul_sum(bufs, factor, False)

    def iallreduce_premul_sum(self, bufs, factor):
        return self._premul_sum(bufs, factor, True)

    premul_sum = allreduce_premul_sum
    ipremul_sum = iallreduce_premul_sum

    def _broadcast(self, buf, root, nb):
        root = self._rank_arg(root, "root")
        v = _buffers.view(buf, "buf", writable=True)
        stream = self._stream([v], "broadcast")
        args = (v.ptr, v.count, v.dtype, root, stream)
        return self._run("broadcast", args, (v.obj,), lambda: v.obj, nb)

    def broadcast(self, buf, root=0):
        """root's buf into every rank's buf. Returns buf."""
        return self._broadcast(buf, root, False)

    def ibroadcast(self, buf, root=0):
        return self._broadcast(buf, root, True)

    def _allgather(self, send, recv, nb):
        r = _buffers.view(recv, "recv", writable=True)
        if send is None:
            if r.count % self._size:
                raise ValueError(
                    "coll: allgather in place: recv has %d elements, not a multiple "
                    "of the %d ranks" % (r.count, self._size)
                )
            per = r.count // self._size
            sptr = r.ptr + self._rank * per * (r.nbytes // max(1, r.count))
            keep = (r.obj,)
        else:
            s = _buffers.view(send, "send", writable=False)
            _buffers.same_kind([s, r], "allgather")
            per = s.count
            if r.count != per * self._size:
                raise ValueError(
                    "coll: allgather: recv has %d elements but needs %d (%d ranks x %d)"
                    % (r.count, per * self._size, self._size, per)
                )
            sptr = s.ptr
            keep = (s.obj, r.obj)
        stream = self._stream([r], "allgather")
        args = (sptr, r.ptr, per, r.dtype, stream)
        return self._run("allgather", args, keep, lambda: r.obj, nb)

    def allgather(self, send, recv):
        """recv holds size x send.size elements, rank r's block at r;
        send None means in place (this rank's block of recv is the input).
        Returns recv."""
        return self._allgather(send, recv, False)

    def iallgather(self, send, recv):
        return self._allgather(send, recv, True)

    def _reduce_scatter(self, send, recv, op, nb):
        op = _types.op_of(op)
        s = _buffers.view(send, "send", writable=recv is None)
        if recv is None:
            if s.count % self._size:
                raise ValueError(
                    "coll: reduce_scatter in place: send has %d elements, not a "
                    "multiple of the %d ranks" % (s.count, self._size)
                )
            per = s.count // self._size
            rptr = s.ptr + self._rank * per * (s.nbytes // max(1, s.count))
            flat = s.obj.reshape(-1)
            out = flat[self._rank * per : (self._rank + 1) * per]
            keep = (s.obj,)
        else:
            r = _buffers.view(recv, "recv", writable=True)
            _buffers.same_kind([s, r], "reduce_scatter")
            per = r.count
            if s.count != per * self._size:
                raise ValueError(
                    "coll: reduce_scatter: send has %d elements but needs %d (%d ranks x %d)"
                    % (s.count, per * self._size, self._size, per)
                )
            rptr, out, keep = r.ptr, r.obj, (s.obj, r.obj)
        stream = self._stream([s], "reduce_scatter")
        args = (s.ptr, rptr, per, s.dtype, op, stream)
        return self._run("reduce_scatter", args, keep, lambda: out, nb)

    def reduce_scatter(self, send, recv=None, op=_types.Op.SUM):
        """send holds size x n elements; rank r gets the reduction of block
        r in recv (n elements). recv None: in place, the result is this
        rank's block of send (returned as a view). Returns the result."""
        return self._reduce_scatter(send, recv, op, False)

    def ireduce_scatter(self, send, recv=None, op=_types.Op.SUM):
        return self._reduce_scatter(send, recv, op, True)

    def _reduce(self, send, recv, op, root, nb):
        op = _types.op_of(op)
        root = self._rank_arg(root, "root")
        on_root = self._rank == root
        if on_root:
            s, r = self._send_recv_pair(send, recv, "reduce")
            rptr, out = r.ptr, r.obj
        else:
            s = _buffers.view(send, "send", writable=False)
            r = None
            if recv is not None and recv is not send:
                r = _buffers.view(recv, "recv", writable=True)
                _buffers.same_kind([s, r], "reduce")
                if r.count != s.count:
                    raise ValueError(
                        "coll: reduce: send has %d elements but recv %d" % (s.count, r.count)
                    )
            rptr, out = None, None
        stream = self._stream([s], "reduce")
        args = (s.ptr, rptr, s.count, s.dtype, op, root, stream)
        keep = (s.obj, out)
        return self._run("reduce", args, keep, lambda: out, nb)

    def reduce(self, send, recv=None, op=_types.Op.SUM, root=0):
        """The reduction lands on root only: in recv, or in send when recv
        is None. Returns the result on root, None on the other ranks (their
        recv is never written)."""
        return self._reduce(send, recv, op, root, False)

    def ireduce(self, send, recv=None, op=_types.Op.SUM, root=0):
        return self._reduce(send, recv, op, root, True)

    def barrier(self):
        """Returns once every rank called it."""
        return self._run("barrier", (), (), lambda: None, False)

    def ibarrier(self):
        return self._run("barrier", (), (), lambda: None, True)

    # -- point-to-point ----------------------------------------------------

    def _peer(self, peer):
        peer = self._rank_arg(peer, "peer")
        if peer == self._rank:
            raise ValueError("coll: peer %d is this rank; copy the buffer instead" % peer)
        return peer

    def _send(self, buf, peer, tag, nb):
        peer, tag = self._peer(peer), self._tag_arg(tag)
        v = _buffers.view(buf, "buf", writable=False)
        self._stream([v], "send")
        args = (v.ptr, v.count, v.dtype, peer, tag)
        return self._run("send", args, (v.obj,), lambda: None, nb)

    def send(self, buf, peer, tag=0):
        """Send buf's elements to peer on tag (0..0x7fffffff)."""
        return self._send(buf, peer, tag, False)

    def isend(self, buf, peer, tag=0):
        return self._send(buf, peer, tag, True)

    def _recv(self, buf, peer, tag, nb):
        peer, tag = self._peer(peer), self._tag_arg(tag)
        v = _buffers.view(buf, "buf", writable=True)
        self._stream([v], "recv")
        got = ctypes.c_size_t(0)
        args = (v.ptr, v.count, v.dtype, peer, tag, ctypes.byref(got))
        return self._run("recv", args, (v.obj, got), lambda: got.value, nb)

    def recv(self, buf, peer, tag=0):
        """Receive from peer on tag into buf; returns the element count
        that arrived (at most buf's; a longer message is
        LengthMismatchError, and the comm stays usable)."""
        return self._recv(buf, peer, tag, False)

    def irecv(self, buf, peer, tag=0):
        """Request whose wait() returns the element count received."""
        return self._recv(buf, peer, tag, True)

    # -- CPU-comm extras ---------------------------------------------------

    def _negotiate(self, local, nb):
        local = _types.dtype_of(local)
        out = ctypes.c_int(-1)
        args = (local, ctypes.byref(out))
        return self._run(
            "negotiate_dtype", args, (out,), lambda: _types.DType(out.value), nb
        )

    def negotiate_dtype(self, local):
        """The dtype every rank should reduce in: the shared one if all
        agree, else F64 if any rank holds F64, else F32."""
        return self._negotiate(local, False)

    def inegotiate_dtype(self, local):
        return self._negotiate(local, True)

    def _fedavg(self, data, deadline_ms, nb):
        if not isinstance(deadline_ms, int) or isinstance(deadline_ms, bool):
            raise TypeError("coll: deadline_ms must be an int")
        v = _buffers.view(data, "data", writable=True)
        if v.dtype != _types.DType.F32:
            raise TypeError("coll: federated_average takes float32 data, not %s" % v.dtype.name)
        self._stream([v], "federated_average")
        n = ctypes.c_int(0)
        args = (v.ptr, v.count, deadline_ms, ctypes.byref(n))
        return self._run("federated_average", args, (v.obj, n), lambda: n.value, nb)

    def federated_average(self, data, deadline_ms):
        """Rank 0 averages the contributions that arrive within deadline_ms
        and broadcasts the mean into every rank's data (float32). Returns
        the number of ranks averaged."""
        return self._fedavg(data, deadline_ms, False)

    def ifederated_average(self, data, deadline_ms):
        return self._fedavg(data, deadline_ms, True)
