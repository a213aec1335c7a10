# SPDX-License-Identifier: Apache-2.0
"""torch.distributed's "coll" backend: importing this module registers it.

    import coll.distributed
    torch.distributed.init_process_group("coll", ...)

The process group lives in the C++ extension _coll_torch, found by these
rules, first match wins:

1. COLL_TORCH_EXTENSION: the path of the module file (_coll_torch.so).
2. COLL_LIBRARY: the path of libcoll.so; the module sits beside it (both
   are built into, and installed to, the same directory).
3. Beside the libcoll.so the coll package loaded (coll.library_path),
   where the package tells it.
4. A module _coll_torch importable from sys.path.
"""
import datetime
import importlib
import importlib.util
import os

import torch.distributed as dist

BACKEND = "coll"
_MODULE = "_coll_torch"


def _load_extension():
    path = os.environ.get("COLL_TORCH_EXTENSION")
    why = "COLL_TORCH_EXTENSION"
    if not path and os.environ.get("COLL_LIBRARY"):
        lib = os.path.abspath(os.environ["COLL_LIBRARY"])
        path = os.path.join(os.path.dirname(lib), _MODULE + ".so")
        why = "COLL_LIBRARY (beside %s)" % lib
    if not path:
        import coll

        lib = getattr(coll, "library_path", None)
        if lib and os.path.isfile(os.path.join(os.path.dirname(lib),
                                               _MODULE + ".so")):
            path = os.path.join(os.path.dirname(lib), _MODULE + ".so")
            why = "coll.library_path"
    if path:
        if not os.path.isfile(path):
            raise ImportError(
                "coll.distributed: %s names %s, which does not exist "
                "(build libcoll with COLL_BUILD_TORCH)" % (why, path))
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(_MODULE)
    except ImportError as e:
        raise ImportError(
            "coll.distributed: the extension %s was not found: set "
            "COLL_TORCH_EXTENSION to its path, or COLL_LIBRARY to the "
            "libcoll.so it was built beside (%s)" % (_MODULE, e)) from e


_ext = _load_extension()
ProcessGroupColl = _ext.ProcessGroupColl


def _timeout_ms(timeout):
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(timeout * 1000)


def create_process_group(store, rank, world_size, timeout):
    """The backend's creator, as torch.distributed calls it: meets the other
    ranks through torch's store and returns the process group."""
    return ProcessGroupColl(store, rank, world_size, _timeout_ms(timeout))


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, create_process_group)
