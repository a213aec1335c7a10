# SPDX-License-Identifier: Apache-2.0
"""How coll.distributed finds the extension: COLL_TORCH_EXTENSION, else
beside COLL_LIBRARY's libcoll.so; a path that holds no module is an
ImportError naming it, and importing registers the "coll" backend."""
import os
import subprocess
import sys

from ranks import require_backend

PROBE = ("import torch.distributed as dist, coll.distributed as cd; "
         "print(dist.Backend.COLL, cd.ProcessGroupColl.__name__)")


def python(env):
    full = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    full.pop("COLL_TORCH_EXTENSION", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True,
                          text=True, env=full, timeout=60)


def extension():
    lib = os.path.abspath(os.environ["COLL_LIBRARY"])
    return os.path.join(os.path.dirname(lib), "_coll_torch.so")


def test_found_beside_coll_library_and_registered():
    require_backend()
    run = python({})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["COLL", "ProcessGroupColl"], run.stdout


def test_found_at_coll_torch_extension():
    require_backend()
    run = python({"COLL_TORCH_EXTENSION": extension(),
                  "COLL_LIBRARY": "/nonexistent/libcoll.so"})
    assert run.returncode == 0, run.stderr


def test_missing_module_is_an_import_error_naming_the_path():
    require_backend()
    run = python({"COLL_TORCH_EXTENSION": "/nonexistent/_coll_torch.so"})
    assert run.returncode != 0
    assert "ImportError" in run.stderr, run.stderr
    assert "COLL_TORCH_EXTENSION names /nonexistent/_coll_torch.so" in \
        run.stderr, run.stderr
    run = python({"COLL_LIBRARY": "/nonexistent/libcoll.so"})
    assert "beside /nonexistent/libcoll.so" in run.stderr, run.stderr
