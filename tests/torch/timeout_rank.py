# SPDX-License-Identifier: Apache-2.0
"""One rank of test_timeout. Rank 0 starts an allreduce that rank 1 never
joins, and must get a RuntimeError instead of hanging:
  wait: work.wait(timeout=1 s) on a group whose own timeout is long;
  group: a blocking call on a group created with a 2 s timeout.
Rank 1 waits (bounded) until rank 0 is done, then sees its comm fail too
in "wait" (rank 0 aborted it), at the latest in its second allreduce.
  absent: rank 0 never starts; rank 1's init_process_group, waiting in
  torch's store for rank 0's compatibility record, fails after the
  group's 2 s, naming rank 0.
Prints a RESULT line."""
import datetime
import time

import torch
import torch.distributed as dist

from rank_setup import finish, init

BOUND = datetime.timedelta(seconds=60)
mode = __import__("sys").argv[4]
failures, texts = [], []


def expect_raise(name, words, call):
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        texts.append("%s after %.2f s: %s" % (name, time.monotonic() - start,
                                              str(e)[:300]))
        missing = [w for w in words if w not in str(e).lower()]
        if missing:
            failures.append("%s: %r lacks %r" % (name, str(e)[:300], missing))
        return
    failures.append("%s: did not raise" % name)


if mode == "absent":
    expect_raise("init without rank 0", ["coll: process group creation",
                                         "err_timeout", "did not arrive",
                                         "coll/compat/<rank>", "rank 0"],
                 lambda: init(timeout_s=2))
    finish({"failures": failures, "texts": texts})
rank, world, store, _ = init(timeout_s=60 if mode == "wait" else 2)
if rank == 0:
    t = torch.ones(16)
    if mode == "wait":
        w = dist.all_reduce(t, async_op=True)
        expect_raise("wait(timeout=1 s)", ["timed out", "aborted"],
                     lambda: w.wait(timeout=datetime.timedelta(seconds=1)))
        expect_raise("the call after the abort", ["err_aborted"],
                     lambda: dist.all_reduce(torch.ones(4)))
    else:
        expect_raise("allreduce on a 2 s group", ["time"],
                     lambda: dist.all_reduce(t))
    store.set("rank0 done", "1")
else:
    store.wait(["rank0 done"], BOUND)
    if mode == "wait":
        # Over shared memory (one host's default) rank 0 posted its part of
        # the allreduce before it aborted, and a small allreduce needs
        # nothing more of it: rank 1's first call may complete with it
        # when rank 1 has not yet heard of the abort. The next one cannot.
        def twice():
            dist.all_reduce(torch.ones(16))
            dist.all_reduce(torch.ones(16))

        expect_raise("allreduce after the peer aborted",
                     ["coll: allreduce failed"], twice)
finish({"failures": failures, "texts": texts})
