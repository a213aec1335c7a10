# SPDX-License-Identifier: Apache-2.0
"""Ranks as processes: rank_script.py under coll-run (2 and 4 ranks, TCP
on 127.0.0.1, coll.init_env()), and under mpirun when MPIRUN is set."""
import os
import subprocess
import sys

import pytest

from conftest import HERE

SCRIPT = os.path.join(HERE, "rank_script.py")


def _run(cmd, n, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "exit %d:\n%s" % (p.returncode, out)
    for r in range(n):
        assert "rank %d of %d: ok" % (r, n) in out, out


@pytest.mark.parametrize("n", [2, 4])
def test_coll_run(n):
    coll_run = os.environ.get("COLL_RUN")
    if not coll_run:
        pytest.skip("COLL_RUN (path of coll-run) is not set")
    # coll-run's own bound ends a hung job (exit 124) before ours does.
    _run([coll_run, "-n", str(n), "--timeout", "90", sys.executable, SCRIPT], n, 120)


def test_mpirun_four_ranks():
    # Open MPI's mpirun sets OMPI_COMM_WORLD_RANK/SIZE, which
    # coll_comm_init_env reads when RANK and WORLD_SIZE are unset; the
    # rendezvous still needs MASTER_ADDR and MASTER_PORT, passed with -x.
    mpirun = os.environ.get("MPIRUN")
    if not mpirun:
        pytest.skip("MPIRUN (path of Open MPI's mpirun) is not set")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               COLL_TIMEOUT_MS="60000", COLL_BACKEND="cpu")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(var, None)  # they would take precedence over mpirun's
    cmd = [mpirun]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")  # Open MPI refuses root otherwise
    cmd += ["--oversubscribe", "--mca", "plm", "isolated", "-np", "4"]
    for var in ("MASTER_ADDR", "MASTER_PORT", "COLL_TIMEOUT_MS", "COLL_BACKEND",
                "COLL_LIBRARY", "PYTHONPATH"):
        if var in env:
            cmd += ["-x", var]
    cmd += [sys.executable, SCRIPT]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "mpirun exit %d:\n%s" % (p.returncode, out)
    for r in range(4):
        assert "rank %d of 4: ok" % r in out, out
