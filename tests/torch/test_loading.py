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


def link(tmp_path, *names):
    """A directory holding links to the built files `names`."""
    for name in names:
        os.symlink(os.path.join(os.path.dirname(extension()), name),
                   os.path.join(str(tmp_path), name))
    return str(tmp_path)


def test_found_at_coll_torch_extension(tmp_path):
    require_backend()
    where = link(tmp_path, "_coll_torch.so", "libcoll.so.0")
    run = python({"COLL_TORCH_EXTENSION": os.path.join(where,
                                                       "_coll_torch.so")})
    assert run.returncode == 0, run.stderr


def test_missing_module_is_an_import_error_naming_the_path(tmp_path):
    require_backend()
    run = python({"COLL_TORCH_EXTENSION": "/nonexistent/_coll_torch.so"})
    assert run.returncode != 0
    assert "ImportError" in run.stderr, run.stderr
    assert "COLL_TORCH_EXTENSION names /nonexistent/_coll_torch.so" in \
        run.stderr, run.stderr
    # A libcoll.so with no extension beside it.
    where = link(tmp_path, "libcoll.so", "libcoll.so.0")
    run = python({"COLL_LIBRARY": os.path.join(where, "libcoll.so")})
    assert run.returncode != 0
    assert "beside %s" % os.path.join(where, "libcoll.so") in run.stderr, \
        run.stderr
