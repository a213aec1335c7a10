# SPDX-License-Identifier: Apache-2.0
"""_create: making comms: ranks as threads of this process
(coll_inproc_create + coll_comm_create) or one per process from the
environment (coll_comm_init_env), and the config they take."""
import ctypes

from . import _errors
from ._comm import Comm
from ._handles import AbortHandle
from ._lib import CommConfig, lib


def _config(timeout_ms, name, abort_handle):
    cfg = CommConfig.init()
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
        raise TypeError("coll: timeout_ms must be an int (ms; 0 default, < 0 forever)")
    if not -(2**63) <= timeout_ms < 2**63:
        raise ValueError("coll: timeout_ms %d does not fit in int64" % timeout_ms)
    cfg.timeout_ms = timeout_ms
    if name is not None:
        if not isinstance(name, str):
            raise TypeError("coll: name must be a str")
        cfg.name = name.encode()
    if abort_handle is not None:
        if not isinstance(abort_handle, AbortHandle):
            raise TypeError("coll: abort_handle must come from coll.abort_handle_create()")
        cfg.abort_handle = abort_handle.raw
    return cfg



def inproc_comms(n, timeout_ms=0, name=None):
    """n comms over the in-process transport: ranks 0..n-1 of one
    communicator, to hand one to each of n threads."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError("coll: inproc_comms takes an int number of ranks")
    if not 1 <= n <= 4096:
        raise ValueError("coll: inproc_comms: %d ranks is outside 1..4096" % n)
    cfg = _config(timeout_ms, name, None)
    ts = (ctypes.c_void_p * n)()
    _errors.check(lib.coll_inproc_create(n, ts), "inproc_create")
    comms = []
    try:
        for i in range(n):
            out = ctypes.c_void_p()
            t, ts[i] = ts[i], None  # the comm owns it from here, also on failure
            _errors.check(lib.coll_comm_create(t, ctypes.byref(cfg), ctypes.byref(out)), "comm_create")
            comms.append(Comm(out.value))
    except BaseException:
        for c in comms:
            c.destroy()
        for i in range(n):
            if ts[i]:
                lib.coll_transport_destroy(ts[i])
        raise
    return comms


def init_env(timeout_ms=0, name=None, abort_handle=None):
    """This process's comm from the environment (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, as coll-run, torchrun and mpirun set them).
    Blocks until every rank arrived, bounded by the timeout."""
    cfg = _config(timeout_ms, name, abort_handle)
    out = ctypes.c_void_p()
    _errors.check(lib.coll_comm_init_env(ctypes.byref(cfg), ctypes.byref(out)), "init_env")
    return Comm(out.value)
