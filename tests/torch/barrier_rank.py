# SPDX-License-Identifier: Apache-2.0
"""One rank of test_monitored_barrier_failures (3 ranks): a group whose
rank 1 never calls monitored_barrier. Rank 0 must raise naming rank 1 (and
with wait_all_ranks, on another group where ranks 1 and 2 stay away, both);
rank 2 must raise saying it reached the barrier but rank 0 failed it; the
default group still works afterwards. Each failing group is aborted by
rank 0, so every scenario has a group of its own. Prints a RESULT line."""
import datetime
import time

import torch
import torch.distributed as dist

from rank_setup import finish, init

rank, world, store, _ = init()
failures, texts = [], []
SHORT = datetime.timedelta(seconds=2)


def expect_raise(name, words, call):
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        texts.append("%s after %.1f s: %s" % (name, time.monotonic() - start,
                                              str(e)[:200]))
        missing = [w for w in words if w not in str(e)]
        if missing:
            failures.append("%s: %r lacks %r" % (name, str(e)[:300], missing))
        return
    failures.append("%s: did not raise" % name)


first = dist.new_group(backend="coll")
both = dist.new_group(backend="coll")
if rank == 0:
    expect_raise("rank 0, rank 1 absent", ["Rank 1 failed to pass monitoredBarrier"],
                 lambda: dist.monitored_barrier(first, timeout=SHORT))
    expect_raise("rank 0, ranks 1 and 2 absent, wait_all_ranks",
                 ["Ranks 1, 2 failed to pass monitoredBarrier"],
                 lambda: dist.monitored_barrier(both, timeout=SHORT,
                                                wait_all_ranks=True))
elif rank == 2:
    expect_raise("rank 2, rank 0 failed it",
                 ["Rank 2 successfully reached monitoredBarrier, but received "
                  "errors while waiting for send/recv from rank 0"],
                 lambda: dist.monitored_barrier(first, timeout=SHORT))
store.set("done %d" % rank, "1")
store.wait(["done %d" % r for r in range(world)], datetime.timedelta(seconds=60))
t = torch.ones(2)
dist.all_reduce(t)
if not torch.equal(t, torch.full((2,), float(world))):
    failures.append("the default group no longer works: %r" % t)
finish({"failures": failures, "texts": texts})
