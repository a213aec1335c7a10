# SPDX-License-Identifier: Apache-2.0
"""Bad input raises ValueError/TypeError before anything is sent; libcoll's
failures raise the CollError subclass of their status, with the status
name and coll_last_error()'s text; the ctypes mirror of coll.h matches the
compiler's layout."""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import coll
from coll import _lib
from conftest import ROOT, run_ranks

try:
    import torch
except ImportError:  # the torch cases skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


# -- the ctypes mirror --------------------------------------------------------


@pytest.fixture(scope="module")
def layout():
    exe = os.environ.get("COLL_TEST_LAYOUT")
    if not exe:
        pytest.skip("COLL_TEST_LAYOUT (the layout helper ctest builds) is not set")
    out = subprocess.run([exe], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def _fields(struct):
    return {name: (getattr(struct, name).offset, getattr(struct, name).size) for name, _ in struct._fields_}


def test_config_mirror_matches_c(layout):
    c = dict(layout["config"])
    del c["end"]
    assert _fields(_lib.CommConfig) == {k: tuple(v) for k, v in c.items()}
    assert list(c) == [name for name, _ in _lib.CommConfig._fields_], "field order"
    assert ctypes.sizeof(_lib.CommConfig) == layout["config_size"]
    assert _lib.CommConfig.MAGIC == layout["magic"]
    cfg = _lib.CommConfig.init()
    assert cfg.size == layout["config_size"] and cfg.magic == layout["magic"]


def test_buffer_mirror_matches_c(layout):
    b = dict(layout["buffer"])
    del b["end"]
    assert _fields(_lib.Buffer) == {k: tuple(v) for k, v in b.items()}
    assert ctypes.sizeof(_lib.Buffer) == layout["buffer_size"]


def test_enums_and_statuses_match_c(layout):
    assert {d.name.lower(): int(d) for d in coll.DType} == layout["dtypes"]
    assert {o.name.lower(): int(o) for o in coll.Op} == layout["ops"]
    classes = dict(coll._errors.BY_STATUS)
    for name, value in layout["statuses"].items():
        if value == 0:
            continue
        cls = classes.pop(value)
        assert issubclass(cls, coll.CollError)
        assert cls(value, "x").status_name == name
    assert not classes, "exception classes for statuses coll.h lacks"
    assert layout["version"] == _lib.version
    assert layout["tag_reserved"] == 0x80000000


def _comm_create_raw(cfg):
    ts = (ctypes.c_void_p * 1)()
    coll._errors.check(_lib.lib.coll_inproc_create(1, ts))
    out = ctypes.c_void_p()
    st = _lib.lib.coll_comm_create(ts[0], ctypes.byref(cfg), ctypes.byref(out))
    if st == 0:
        _lib.lib.coll_comm_destroy(out)
    return st, _lib.last_error()


def test_config_without_init_is_refused():
    # A config whose magic was not set (the INIT step forgotten) and one
    # whose size is no layout's are refused, naming COLL_COMM_CONFIG_INIT,
    # so a drifted mirror could never pass silently.
    bad = _lib.CommConfig.init()
    bad.magic = 0
    st, text = _comm_create_raw(bad)
    assert st == coll.InvalidArgError.status and "COLL_COMM_CONFIG_INIT" in text
    odd = _lib.CommConfig.init()
    odd.size = 12
    st, text = _comm_create_raw(odd)
    assert st == coll.InvalidArgError.status and "COLL_COMM_CONFIG_INIT" in text
    assert _comm_create_raw(_lib.CommConfig.init())[0] == 0


# -- loading the library ------------------------------------------------------


def _import_with(library):
    env = dict(os.environ, COLL_LIBRARY=library, PYTHONPATH=os.path.join(ROOT, "python"))
    code = "import coll"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_import_refuses_another_major_version():
    fake = os.environ.get("COLL_TEST_FAKE_LIB")
    if not fake:
        pytest.skip("COLL_TEST_FAKE_LIB (built by ctest) is not set")
    p = _import_with(fake)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "libcoll 1.0.0" in p.stderr, p.stderr


@pytest.mark.parametrize(
    "library,message",
    [("/nonexistent/libcoll.so.0", "cannot be loaded"), ("libm.so.6", "is not libcoll")],
)
def test_import_names_a_bad_library(library, message):
    p = _import_with(library)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and message in p.stderr, p.stderr


# -- exceptions ---------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,builtin",
    [
        (coll.InvalidArgError, ValueError),
        (coll.NoMemoryError, MemoryError),
        (coll.UnsupportedError, NotImplementedError),
        (coll.AbortedError, RuntimeError),
        (coll.TimeoutError, TimeoutError),
        (coll.PeerLostError, ConnectionError),
        (coll.LengthMismatchError, ValueError),
        (coll.SystemCallError, OSError),
    ],
)
def test_exception_classes_subclass_builtins(cls, builtin):
    e = cls(cls.status, "the detail", "allreduce")
    assert isinstance(e, coll.CollError) and isinstance(e, builtin)
    assert e.status == cls.status
    assert str(e) == "allreduce: COLL_%s (%s): the detail" % (
        e.status_name,
        _lib.lib.coll_strerror(cls.status).decode(),
    )


def test_unknown_status_is_plain_collerror():
    e = coll._errors.error(99, "x", "why")
    assert type(e) is coll.CollError and e.status == 99 and "why" in str(e)


# -- bad input: refused before anything is sent -------------------------------


def _bad_calls(c):
    """(label, callable, expected exception) on a 2-rank comm's rank 0."""
    f32 = np.ones(8, dtype=np.float32)
    ro = np.ones(8, dtype=np.float32)
    ro.flags.writeable = False
    cases = [
        ("list, not an array", lambda: c.allreduce([1.0, 2.0]), TypeError),
        ("complex dtype", lambda: c.allreduce(np.ones(4, dtype=np.complex64)), TypeError),
        ("bool dtype", lambda: c.allreduce(np.ones(4, dtype=bool)), TypeError),
        ("big-endian", lambda: c.allreduce(np.ones(4, dtype=">f4")), TypeError),
        ("dtypes differ", lambda: c.allreduce(f32, np.ones(8)), TypeError),
        ("non-contiguous", lambda: c.allreduce(np.ones(16, dtype=np.float32)[::2]), ValueError),
        ("non-contiguous recv", lambda: c.allreduce(f32, np.ones((8, 2), np.float32)[:, 0]), ValueError),
        ("shapes differ", lambda: c.allreduce(f32, np.ones((2, 4), np.float32)), ValueError),
        ("sizes differ", lambda: c.allreduce(f32, np.ones(9, np.float32)), ValueError),
        ("read-only in place", lambda: c.allreduce(ro), ValueError),
        ("read-only recv", lambda: c.allreduce(f32, ro), ValueError),
        ("read-only broadcast", lambda: c.broadcast(ro, 0), ValueError),
        ("read-only recv buffer", lambda: c.recv(ro, 1), ValueError),
        ("read-only batch", lambda: c.allreduce_batch([f32, ro]), ValueError),
        ("batch not a list", lambda: c.allreduce_batch(f32), TypeError),
        ("allgather recv size", lambda: c.allgather(f32, np.ones(15, np.float32)), ValueError),
        ("allgather in place size", lambda: c.allgather(None, np.ones(7, np.float32)), ValueError),
        ("reduce_scatter send size", lambda: c.reduce_scatter(np.ones(15, np.float32), f32), ValueError),
        ("reduce_scatter in place", lambda: c.reduce_scatter(np.ones(7, np.float32)), ValueError),
        ("root out of range", lambda: c.broadcast(f32, 2), ValueError),
        ("negative root", lambda: c.reduce(f32, None, "sum", -1), ValueError),
        ("root not an int", lambda: c.broadcast(f32, 0.0), TypeError),
        ("peer is self", lambda: c.send(f32, 0), ValueError),
        ("peer out of range", lambda: c.send(f32, 5), ValueError),
        ("reserved tag", lambda: c.send(f32, 1, tag=0x80000000), ValueError),
        ("negative tag", lambda: c.recv(f32, 1, tag=-1), ValueError),
        ("unknown op", lambda: c.allreduce(f32, op="mean"), ValueError),
        ("op number", lambda: c.allreduce(f32, op=9), ValueError),
        ("op type", lambda: c.allreduce(f32, op=1.5), TypeError),
        ("factor not finite", lambda: c.allreduce_premul_sum([f32], float("inf")), ValueError),
        ("factor type", lambda: c.allreduce_premul_sum([f32], "2"), TypeError),
        ("fedavg dtype", lambda: c.federated_average(np.ones(4), 10), TypeError),
        ("negotiate dtype", lambda: c.negotiate_dtype(np.complex64), TypeError),
    ]
    if torch is not None:
        t = torch.ones(8)
        cases += [
            ("torch non-contiguous", lambda: c.allreduce(torch.ones(4, 4).t()), ValueError),
            ("torch complex", lambda: c.allreduce(torch.ones(4, dtype=torch.complex64)), TypeError),
            ("torch bool", lambda: c.allreduce(torch.ones(4, dtype=torch.bool)), TypeError),
            ("torch dtypes differ", lambda: c.allreduce(t, torch.ones(8, dtype=torch.bfloat16)), TypeError),
            ("torch shapes differ", lambda: c.allreduce(t, torch.ones(2, 4)), ValueError),
            ("torch device", lambda: c.allreduce(torch.ones(8, device="meta")), ValueError),
            ("torch sparse", lambda: c.allreduce(torch.ones(8).to_sparse()), TypeError),
            ("torch allgather size", lambda: c.allgather(t, torch.ones(15)), ValueError),
        ]
    return cases


def test_bad_input_raises_before_sending(fresh2):
    def body(c):
        caught = []
        if c.rank == 0:
            for label, call, exc in _bad_calls(c):
                try:
                    call()
                except exc as e:
                    caught.append((label, type(e), str(e)))
                    continue
                except BaseException as e:
                    caught.append((label, type(e), "unexpected: %r" % e))
                    continue
                caught.append((label, None, "no exception"))
        # Nothing was issued on rank 0, so this pairs with rank 1's call.
        x = np.full(5, c.rank + 1.0, dtype=np.float32)
        c.allreduce(x)
        return caught, x

    res = fresh2.run(body, timeout=20)
    expected = {label: exc for label, _, exc in _bad_calls(fresh2.comms[0])}
    for label, got, text in res[0][0]:
        assert got is not None and issubclass(got, expected[label]), "%s: %s" % (label, text)
        assert not issubclass(got, coll.CollError), "%s: reached libcoll: %s" % (label, text)
        assert text.startswith("coll: "), "%s: %s" % (label, text)
    assert len(res[0][0]) == len(expected)
    for caught, x in res:
        assert np.all(x == 3.0)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError):
        coll.inproc_comms(0)
    with pytest.raises(TypeError):
        coll.inproc_comms("2")
    with pytest.raises(TypeError):
        coll.inproc_comms(2, timeout_ms=1.5)
    with pytest.raises(TypeError):
        coll.inproc_comms(2, name=b"x")
    with pytest.raises(TypeError):
        coll.init_env(abort_handle=object())


def test_destroyed_comm_and_released_handle():
    (c,) = coll.inproc_comms(1)
    h = c.abort_handle()
    c.destroy()
    c.destroy()  # idempotent
    with pytest.raises(ValueError, match="destroyed comm"):
        c.allreduce(np.ones(2))
    h.abort()  # a no-op once the comm is gone
    assert not h.aborted
    h.release()
    h.release()
    with pytest.raises(ValueError, match="released"):
        h.abort()


# -- libcoll's statuses -------------------------------------------------------


def test_long_message_is_length_mismatch_and_comm_stays_usable(fresh2):
    def body(c):
        if c.rank == 0:
            c.send(np.arange(10, dtype=np.int32), 1, tag=4)
            c.send(np.arange(3, dtype=np.int32), 1, tag=4)
            return None
        small = np.zeros(4, dtype=np.int32)
        with pytest.raises(coll.LengthMismatchError) as ei:
            c.recv(small, 0, tag=4)
        again = np.zeros(4, dtype=np.int32)
        return ei.value, c.recv(again, 0, tag=4), again

    err, n, again = fresh2.run(body)[1]
    assert err.status == 9 and err.status_name == "ERR_LENGTH_MISMATCH"
    assert "COLL_ERR_LENGTH_MISMATCH" in str(err) and err.detail and err.detail in str(err)
    assert isinstance(err, ValueError)
    assert n == 3 and list(again) == [0, 1, 2, 0]


def test_ranks_that_disagree_get_length_mismatch_on_every_rank(fresh2):
    def body(c):
        with pytest.raises(coll.LengthMismatchError) as ei:
            c.allreduce(np.ones(4 + c.rank, dtype=np.float32))
        y = np.ones(3, dtype=np.float32)
        c.allreduce(y)  # the comm keeps working
        return ei.value.detail, y

    for detail, y in fresh2.run(body):
        assert detail
        assert np.all(y == 2.0)


def test_overlapping_buffers_are_refused_by_libcoll():
    (c,) = coll.inproc_comms(1)
    with c:
        base = np.zeros(16, dtype=np.float32)
        with pytest.raises(coll.InvalidArgError) as ei:
            c.allreduce(base[:8], base[4:12])
        assert "overlap" in ei.value.detail
        assert "COLL_ERR_INVALID_ARG" in str(ei.value)


def test_init_env_names_the_missing_variable(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(coll.InvalidArgError) as ei:
        coll.init_env(timeout_ms=5000)
    assert "RANK" in str(ei.value)


def test_peer_gone_is_peer_lost():
    a, b = coll.inproc_comms(2, timeout_ms=60000)
    b.destroy()
    with a:
        with pytest.raises(coll.CollError) as ei:
            run_ranks([a], lambda c: c.allreduce(np.ones(4, dtype=np.float32)))
        assert isinstance(ei.value, coll.PeerLostError), str(ei.value)
        assert isinstance(ei.value, ConnectionError)
        # sticky: the next call fails the same way, at once
        with pytest.raises(coll.PeerLostError):
            a.barrier()


def test_nccl_comm_refuses_host_memory_before_sending():
    # No NCCL here: fake the backend name to check the device rule.
    (c,) = coll.inproc_comms(1)
    with c:
        c._backend = "nccl"
        with pytest.raises(ValueError, match="host memory on an NCCL comm"):
            c.allreduce(np.ones(2, dtype=np.float32))
