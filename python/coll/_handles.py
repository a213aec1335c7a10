# SPDX-License-Identifier: Apache-2.0
"""_handles: abort handles and nonblocking requests.

Finalizers never run at interpreter exit (atexit=False): another thread may
still be inside libcoll with the object then, and freeing it under that
thread would be a use after free. The process's exit reclaims it instead.
"""
import ctypes
import weakref

from . import _errors
from ._lib import lib


class AbortHandle:
    """A reference to a comm's abort handle (coll_abort_handle_t). abort()
    and is_aborted() may be called from any thread at any time, also while
    another thread is blocked in a collective on the comm, and after the
    comm was destroyed (then abort() is a no-op). release() (or leaving a
    `with` block, or garbage collection) drops the reference."""

    def __init__(self, handle):
        self._h = handle
        self._fin = weakref.finalize(self, lib.coll_abort_handle_release, handle)
        self._fin.atexit = False

    def _live(self):
        if not self._fin.alive:
            raise ValueError("coll: abort handle already released")
        return self._h

    def abort(self):
        """Abort the comm: calls in flight and later ones fail with
        AbortedError. Idempotent; never waits for peers."""
        _errors.check(lib.coll_abort(self._live()), "abort")

    @property
    def aborted(self):
        """True once abort() was called while the comm existed."""
        return bool(lib.coll_is_aborted(self._live()))

    def is_aborted(self):
        return self.aborted

    def release(self):
        """Drop this reference (idempotent)."""
        self._fin()

    @property
    def raw(self):
        """The coll_abort_handle_t pointer as an int (for a C extension)."""
        return self._live()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        if not self._fin.alive:
            return "<coll.AbortHandle released>"
        return "<coll.AbortHandle aborted=%s>" % self.aborted


def abort_handle_create():
    """A handle bound to no comm yet (coll_abort_handle_create), to pass as
    `abort_handle=` when making a comm, so a watchdog can end the creation
    too. One handle serves one comm, once."""
    h = ctypes.c_void_p()
    _errors.check(lib.coll_abort_handle_create(ctypes.byref(h)), "abort_handle_create")
    return AbortHandle(h.value)


class _RequestState:
    """What libcoll needs kept until coll_wait: the request pointer and
    every object whose memory the request uses. Held by the comm (so
    buffers outlive a dropped Request) until waited."""

    __slots__ = ("handle", "keep", "result", "where", "value", "error", "orphan")

    def __init__(self, handle, keep, result, where):
        self.handle = handle
        self.keep = keep
        self.result = result
        self.where = where
        self.value = None
        self.error = None
        self.orphan = False

    def finish(self):
        """coll_wait (frees the request); the outcome is stored."""
        if self.handle is None:
            return
        h, self.handle = self.handle, None
        st = lib.coll_wait(h)
        if st != 0:
            self.error = _errors.error(st, self.where)
        else:
            self.value = self.result()
        self.keep = self.result = None

    def done(self):
        if self.handle is None:
            return True
        flag = ctypes.c_int(0)
        _errors.check(lib.coll_test(self.handle, ctypes.byref(flag)), self.where)
        return bool(flag.value)


class Request:
    """A nonblocking call in flight. wait() blocks until it ended and
    returns what the blocking call returns (or raises its CollError);
    is_completed() polls (coll_test). The request keeps its buffers (and
    its comm) alive until waited. Waiting again returns the same outcome.
    A request dropped without wait() is waited by its comm later. Use it
    from the comm's thread."""

    def __init__(self, comm, state):
        self._comm = comm
        self._state = state

    def wait(self):
        st = self._state
        if st.handle is not None:
            st.finish()
            self._comm._forget(st)
        if st.error is not None:
            raise st.error
        return st.value

    def is_completed(self):
        return self._state.done()

    def __del__(self):
        st = getattr(self, "_state", None)
        if st is not None and st.handle is not None:
            st.orphan = True

    def __repr__(self):
        return "<coll.Request %s%s>" % (
            self._state.where,
            " pending" if self._state.handle is not None else " waited",
        )
