# SPDX-License-Identifier: Apache-2.0
"""One rank of test_timeout. Rank 0 starts an allreduce that rank 1 never
joins, and must get a RuntimeError instead of hanging:
  wait: work.wait(timeout=1 s) on a group whose own timeout is long;
  group: a blocking call on a group whose own timeout is GROUP_S, made
  with new_group once the default group (60 s) has brought both ranks
  together, so that a loaded machine's slow start (importing torch can
  take seconds) does not eat the short timeout.
Neither may raise before its timeout; how much later is left to the
machine's load (the test's bound is 90 s).
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
# Long enough for new_group to build a comm between two ranks that arrive
# together on a loaded machine, short enough for a test of seconds.
GROUP_S = 10
mode = __import__("sys").argv[4]
failures, texts = [], []


def expect_raise(name, words, call, not_before_s=0.0):
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        took = time.monotonic() - start
        texts.append("%s after %.2f s: %s" % (name, took, str(e)[:300]))
        missing = [w for w in words if w not in str(e).lower()]
        if missing:
            failures.append("%s: %r lacks %r" % (name, str(e)[:300], missing))
        # A timeout that fires early is a defect; a late one is the load's.
        if took < not_before_s * 0.95:
            failures.append("%s: raised after %.2f s, before its %.0f s" %
                            (name, took, not_before_s))
        return
    failures.append("%s: did not raise" % name)


if mode == "absent":
    expect_raise("init without rank 0", ["coll: process group creation",
                                         "err_timeout", "did not arrive",
                                         "coll/compat/<rank>", "rank 0"],
                 lambda: init(timeout_s=2))
    finish({"failures": failures, "texts": texts})
rank, world, store, _ = init(timeout_s=60)
group = None
if mode == "group":
    group = dist.new_group(backend="coll",
                           timeout=datetime.timedelta(seconds=GROUP_S))
if rank == 0:
    t = torch.ones(16)
    if mode == "wait":
        w = dist.all_reduce(t, async_op=True)
        expect_raise("wait(timeout=1 s)", ["timed out", "aborted"],
                     lambda: w.wait(timeout=datetime.timedelta(seconds=1)),
                     not_before_s=1)
        expect_raise("the call after the abort", ["err_aborted"],
                     lambda: dist.all_reduce(torch.ones(4)))
    else:
        expect_raise("allreduce on a %d s group" % GROUP_S, ["time"],
                     lambda: dist.all_reduce(t, group=group),
                     not_before_s=GROUP_S)
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
