# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the coll package's tests: ranks as threads, with every wait
bounded.

The package is imported from the source tree (python/) unless PYTHONPATH
already leads to one; the library is COLL_LIBRARY (ctest sets it to the
build's libcoll.so).
"""
import os
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if os.path.join(ROOT, "python") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "python"))

import coll  # noqa: E402

JOIN_S = 60  # bound on one collective step of a test, all ranks together


def run_ranks(comms, fn, timeout=JOIN_S):
    """Run fn(comm) on one thread per comm; returns the results by rank and
    re-raises the first rank's exception. A rank still running after
    `timeout` seconds fails the test: every comm is aborted first so that
    no thread stays blocked."""
    results = [None] * len(comms)
    errors = [None] * len(comms)

    def body(i, c):
        try:
            results[i] = fn(c)
        except BaseException as e:  # recorded, raised on the test thread
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i, c), daemon=True) for i, c in enumerate(comms)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    if hung:
        for c in comms:
            with c.abort_handle() as h:
                h.abort()
        for t in threads:
            t.join(10)
        pytest.fail("ranks %s still running after %d s (comms aborted)" % (hung, timeout))
    for e in errors:
        if e is not None:
            raise e
    return results


class Ranks:
    """n in-process comms and a runner over them."""

    def __init__(self, n, **kw):
        self.n = n
        self.comms = coll.inproc_comms(n, **kw)

    def run(self, fn, timeout=JOIN_S):
        return run_ranks(self.comms, fn, timeout)

    def close(self):
        for c in self.comms:
            c.destroy()


@pytest.fixture(scope="module", params=[1, 2, 3, 4], ids=lambda n: "n%d" % n)
def ranks(request):
    """Comms of 1 to 4 ranks, shared by a module's tests (a test that
    breaks its comms on purpose makes its own)."""
    r = Ranks(request.param, timeout_ms=60000)
    yield r
    r.close()


@pytest.fixture
def fresh2():
    """Two comms of their own, for tests that abort or destroy them."""
    r = Ranks(2, timeout_ms=60000)
    yield r
    r.close()
