# SPDX-License-Identifier: Apache-2.0
"""Abort from another thread, requests and the objects they keep alive,
destroy with requests pending, and interpreter exit with live comms."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import coll
from conftest import ROOT


def test_abort_from_another_thread_ends_a_blocked_collective(fresh2):
    # Rank 0 enters an allreduce that rank 1 never joins. ctypes releases
    # the GIL during the call, so this thread can abort it; the call then
    # fails with AbortedError long before the comm's 60 s timeout.
    c0 = fresh2.comms[0]
    outcome = []
    entered = threading.Event()

    def blocked():
        entered.set()
        try:
            c0.allreduce(np.ones(1 << 16, dtype=np.float32))
            outcome.append("returned")
        except coll.CollError as e:
            outcome.append(e)

    h = c0.abort_handle()
    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    assert entered.wait(10)
    time.sleep(0.2)  # let it reach the wait inside libcoll
    assert t.is_alive(), "the allreduce returned without its peer: %s" % outcome
    h.abort()
    t.join(20)
    assert not t.is_alive(), "abort did not end the blocked allreduce"
    assert isinstance(outcome[0], coll.AbortedError), outcome
    assert "COLL_ERR_ABORTED" in str(outcome[0])
    assert h.aborted and h.is_aborted()
    h.abort()  # idempotent
    with pytest.raises(coll.AbortedError):  # sticky, at once
        c0.barrier()
    h.release()


def test_abort_handle_made_before_the_comm(monkeypatch):
    # A handle aborted before its comm exists: the creation that adopts it
    # fails with AbortedError, or gives a comm on which every call does.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in dict(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COLL_BACKEND", "cpu")
    with coll.abort_handle_create() as h:
        assert not h.aborted
        h.abort()
        try:
            c = coll.init_env(timeout_ms=20000, abort_handle=h)
        except coll.AbortedError:
            return
        with c:
            with pytest.raises(coll.AbortedError):
                c.allreduce(np.ones(3))


def test_request_keeps_its_buffers_alive(fresh2):
    def body(c):
        req = c.iallreduce(np.full(1000, c.rank + 1.0, dtype=np.float32))
        ref = weakref.ref(req._state.keep[0])
        gc.collect()
        alive = ref() is not None
        out = req.wait()
        return alive, out

    for alive, out in fresh2.run(body):
        assert alive
        assert np.all(out == 3.0)


def test_dropped_request_is_waited_by_its_comm(fresh2):
    def body(c):
        x = np.full(64, c.rank + 1.0, dtype=np.float32)
        c.iallreduce(x)  # the Request is dropped at once
        gc.collect()
        y = np.ones(4, dtype=np.float32)
        c.allreduce(y)  # issued after it, so it finishes first
        c.barrier()
        c.barrier()
        return x, y, len(c._state.pending)

    for x, y, pending in fresh2.run(body):
        assert np.all(x == 3.0) and np.all(y == 2.0)
        assert pending == 0


def test_destroy_with_a_pending_request(fresh2):
    c0 = fresh2.comms[0]
    buf = np.zeros(8, dtype=np.float32)
    req = c0.irecv(buf, 1, tag=1)  # rank 1 never sends
    assert not req.is_completed()
    c0.destroy()
    with pytest.raises(coll.AbortedError):
        req.wait()
    with pytest.raises(coll.AbortedError):  # the same outcome again
        req.wait()
    assert req.is_completed()


def test_comm_context_manager_and_gc():
    with coll.inproc_comms(1)[0] as c:
        assert (c.rank, c.size, c.backend) == (0, 1, "cpu")
        assert "rank 0 of 1" in repr(c)
    assert "destroyed" in repr(c)
    c = coll.inproc_comms(1)[0]
    fin = c._fin
    del c
    gc.collect()
    assert not fin.alive, "a collected comm was not destroyed"


def test_interpreter_exit_with_live_comms_and_a_blocked_thread():
    # Comms left alive, one thread blocked inside a collective: the
    # interpreter exits cleanly (no finalizer runs at exit).
    code = textwrap.dedent(
        """
        import threading, time, numpy as np, coll
        comms = coll.inproc_comms(2)
        keep = coll.inproc_comms(3)
        h = comms[0].abort_handle()
        t = threading.Thread(target=lambda: comms[0].allreduce(np.ones(4)), daemon=True)
        t.start()
        time.sleep(0.2)
        print("exiting")
        """
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "exiting" in p.stdout
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr
