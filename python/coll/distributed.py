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


# torch.distributed.monitored_barrier refuses every backend but gloo by
# name, though the process group call it makes (monitored_barrier) is
# part of every ProcessGroup. For a coll group it is called directly;
# every other group goes to torch's own function.
_torch_monitored_barrier = getattr(dist.monitored_barrier, "_coll_torch_own",
                                   dist.monitored_barrier)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier, for coll groups too: every rank
    reports to rank 0, which raises naming the ranks that did not arrive
    within timeout (all of them with wait_all_ranks, else the first) and
    then aborts the group, so the other ranks raise as well."""
    from torch.distributed import distributed_c10d as c10d

    if group is None or group is c10d.GroupMember.WORLD:
        pg = c10d._get_default_group()
    else:
        pg = group
    if isinstance(pg, ProcessGroupColl) and not c10d._rank_not_in_group(group):
        if timeout is None:
            timeout = c10d.default_pg_timeout
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)
    return _torch_monitored_barrier(group, timeout, wait_all_ranks)


monitored_barrier._coll_torch_own = _torch_monitored_barrier
dist.monitored_barrier = monitored_barrier
dist.distributed_c10d.monitored_barrier = monitored_barrier
