# SPDX-License-Identifier: Apache-2.0
"""torch.distributed's "coll" backend: importing this module registers it.

    import coll.distributed
    torch.distributed.init_process_group("coll", ...)

The process group lives in the C++ extension _coll_torch, found beside the
libcoll.so the package loaded, wherever the loader found it (the rules are
in coll._torch_ext).
"""
import datetime

from . import _torch_ext

dist = _torch_ext.import_torch_distributed()

BACKEND = "coll"


_ext = _torch_ext.load()
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
