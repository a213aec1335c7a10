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
