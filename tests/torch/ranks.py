# SPDX-License-Identifier: Apache-2.0
"""Runs a script as N rank processes that meet through a FileStore, with
every wait bounded: a rank still running at the deadline fails the test
with every rank's output, instead of hanging CI."""
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def require_backend():
    """Skips (with the reason) where torch or the extension is absent."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError as e:
        pytest.skip("torch is not installed for %s: %s" % (sys.executable, e))
    lib = os.environ.get("COLL_LIBRARY")
    ext = os.environ.get("COLL_TORCH_EXTENSION")
    if not ext and lib:
        ext = os.path.join(os.path.dirname(os.path.abspath(lib)),
                           "_coll_torch.so")
    if not ext or not os.path.isfile(ext):
        pytest.skip("the coll torch extension is absent (set COLL_LIBRARY "
                    "to a libcoll.so built with COLL_BUILD_TORCH)")


def run_ranks(script, world, args=(), timeout=120, env=None, ranks=None):
    """Starts `script rank world store_path *args` for every rank (or only
    those in `ranks`), waits at most `timeout` seconds for all of them, and
    returns (returncode, output) per rank started."""
    tmp = tempfile.mkdtemp(prefix="coll-torch-")
    store = os.path.join(tmp, "store")
    full_env = dict(os.environ)
    full_env["PYTHONDONTWRITEBYTECODE"] = "1"
    full_env.update(env or {})
    procs, logs = [], []
    for r in (range(world) if ranks is None else ranks):
        log = open(os.path.join(tmp, "rank%d.log" % r), "w+")
        cmd = [sys.executable, os.path.join(HERE, script), str(r), str(world),
               store] + [str(a) for a in args]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                      env=full_env))
        logs.append(log)
    deadline = time.monotonic() + timeout
    late = []
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append(r)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    results = []
    for p, log in zip(procs, logs):
        log.seek(0)
        results.append((p.returncode, log.read()))
        log.close()
    if late:
        pytest.fail("ranks %s of %s still ran after %d s:\n%s" %
                    (late, script, timeout, describe(results)))
    return results


def describe(results):
    return "\n".join("---- rank %d (exit %s) ----\n%s" % (r, rc, out[-4000:])
                     for r, (rc, out) in enumerate(results))


def report(results):
    """The RESULT line every rank prints last, as a dict per rank; fails the
    test if a rank exited badly or printed none."""
    reports = []
    for r, (rc, out) in enumerate(results):
        lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
        if rc != 0 or not lines:
            pytest.fail("rank %d failed:\n%s" % (r, describe(results)))
        reports.append(json.loads(lines[-1][len("RESULT "):]))
    return reports
