# SPDX-License-Identifier: Apache-2.0
"""The README's install: `python -m pip install ./python` into a fresh
venv made with --system-site-packages, offline (no index), then the
installed package imported outside the source tree and used."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT


def test_pip_install_into_a_fresh_venv(tmp_path):
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError as e:
        pytest.skip("venv/ensurepip missing (Debian: python3-venv): %s" % e)
    src = tmp_path / "src"
    shutil.copytree(
        os.path.join(ROOT, "python"), src / "python", ignore=shutil.ignore_patterns("__pycache__")
    )
    env_dir = tmp_path / "venv"
    mk = subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)],
        capture_output=True, text=True, timeout=120,
    )
    if mk.returncode != 0 and "ensurepip" in mk.stdout + mk.stderr:
        pytest.skip("venv cannot install pip here (Debian: python3-venv): %s" % mk.stdout)
    assert mk.returncode == 0, mk.stdout + mk.stderr
    py = str(env_dir / "bin" / "python")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    inst = subprocess.run(
        [py, "-m", "pip", "install", "./python"], cwd=src, env=env,
        capture_output=True, text=True, timeout=180,
    )
    assert inst.returncode == 0, inst.stdout + inst.stderr
    code = textwrap.dedent(
        """
        import threading, numpy as np, coll
        assert "site-packages" in coll.__file__, coll.__file__
        comms = coll.inproc_comms(2)
        xs = [np.full(3, r + 1.0) for r in range(2)]
        ts = [threading.Thread(target=c.allreduce, args=(x,)) for c, x in zip(comms, xs)]
        [t.start() for t in ts]
        [t.join(30) for t in ts]
        assert all((x == 3.0).all() for x in xs), xs
        print("installed", coll.__file__, coll.library_version)
        """
    )
    run = subprocess.run([py, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "installed" in run.stdout
