# SPDX-License-Identifier: Apache-2.0
"""_torch_ext: imports torch for coll.distributed and finds the C++
extension _coll_torch, with errors that say what to do.

The extension is built beside libcoll.so and installed beside it, so it is
looked for, first match wins:

1. at COLL_TORCH_EXTENSION, the path of the module file (_coll_torch.so);
2. beside the libcoll.so that COLL_LIBRARY names;
3. beside the libcoll.so the coll package loaded (coll.library_path, the
   file the loader mapped, wherever the loader found it);
4. in the library directories of a system install: this interpreter's
   prefix (a virtual environment libcoll was installed into), /usr/local
   and /usr (lib, lib64, lib/<multiarch>);
5. as a module _coll_torch importable from sys.path.
"""
import importlib
import importlib.util
import os
import sys

from . import _lib

MODULE = "_coll_torch"
FILE = MODULE + ".so"


def _interpreter():
    return "%s (Python %d.%d)" % (sys.executable or "python", sys.version_info[0],
                                  sys.version_info[1])


def missing_module(name, package, detail):
    """The ImportError for a module this package needs that the running
    interpreter lacks: which interpreter, and the two ways to fix it."""
    return ImportError(
        "coll: %s is not installed for the interpreter in use, %s (%s). "
        "Debian's %s serves /usr/bin/python3 only: make the environment "
        "from it (/usr/bin/python3 -m venv --system-site-packages .venv) "
        "and run .venv/bin/python, or install %s into this one "
        "(%s -m pip install %s)."
        % (name, _interpreter(), detail, package, name, sys.executable or "python",
           name))


def import_torch_distributed():
    """torch.distributed, or an ImportError naming the interpreter. A
    folder named torch/ in the working directory (libcoll's own source
    tree has one) shadows a missing torch as a namespace package: said so."""
    try:
        import torch
    except ImportError as e:
        raise missing_module("torch", "python3-torch", e) from e
    if getattr(torch, "__file__", None) is None:
        where = ", ".join(getattr(torch, "__path__", []) or ["?"])
        raise missing_module(
            "torch", "python3-torch",
            "Python took the folder %s for it, which is not PyTorch: run "
            "from another folder to see the real error" % where)
    import torch.distributed as dist

    return dist


def _candidates():
    """(path, why) in the order of the rules above."""
    path = os.environ.get("COLL_TORCH_EXTENSION")
    if path:
        yield path, "COLL_TORCH_EXTENSION"
        return
    if os.environ.get("COLL_LIBRARY"):
        lib = os.path.abspath(os.environ["COLL_LIBRARY"])
        yield os.path.join(os.path.dirname(lib), FILE), "beside %s (COLL_LIBRARY)" % lib
    lib = _lib.path
    if os.path.isabs(lib):
        yield os.path.join(os.path.dirname(lib), FILE), "beside %s (the loaded libcoll)" % lib
    prefixes = [sys.prefix, "/usr/local", "/usr"]
    for prefix in dict.fromkeys(prefixes):
        for d in _lib.prefix_libdirs(prefix):
            yield os.path.join(d, FILE), "in %s" % d


def load():
    """The _coll_torch module, or an ImportError that lists every place
    looked at and what to do."""
    tried = []
    for path, why in _candidates():
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(MODULE, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        if why == "COLL_TORCH_EXTENSION":
            raise ImportError(
                "coll.distributed: COLL_TORCH_EXTENSION names %s, which does "
                "not exist (build libcoll with COLL_BUILD_TORCH)" % path)
        tried.append("%s: %s" % (why, path))
    try:
        return importlib.import_module(MODULE)
    except ImportError as e:
        tried.append("sys.path: %s" % e)
    raise ImportError(
        "coll.distributed: the extension %s was not found. It is built beside "
        "libcoll.so when CMake finds libtorch-dev, python3-dev and "
        "pybind11-dev (COLL_BUILD_TORCH), and installed beside it; "
        "COLL_TORCH_EXTENSION names its path directly. Looked %s"
        % (FILE, "; ".join(tried)))
