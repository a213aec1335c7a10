# SPDX-License-Identifier: Apache-2.0
"""torch's own process-group tests (DistributedTest._DistTestBase, from the
installed torch) made runnable here, for gloo and for coll alike.

Importing this module sets the suite up; the same steps run for both
backends, so a difference between them is the backend's:

- expecttest (a test-only dependency Debian's python3-torch lacks) is
  replaced by a stub: the suite only needs its TestCase base class.
- DDP's experimental ReplicatedTensor mode, which torch's test harness
  turns on in every rank process, is kept off: its module does not import
  under Python 3.11 (a dataclass with a mutable default).
- gloo's rules: the suite's decorators are evaluated with BACKEND=gloo,
  so every test that gloo runs on CPU runs, and is skipped where gloo's
  is. For coll the module's BACKEND then becomes "coll", so every group
  the tests create is a coll group and the names they compare are coll's,
  but the tests' own branches on the backend ("if BACKEND == 'gloo'":
  a CPU model, gloo's expected error texts) still take gloo's path; and
  "coll" joins gloo in torch's lists of backends whose features and
  profiling events the tests check.
- Rank processes are forked from the test's process, which has imported
  torch and the suite once, instead of spawned (each spawn imports torch
  again, seconds per rank and test)."""
import os
import sys
import types
import unittest

_argv = sys.argv
sys.argv = sys.argv[:1]  # torch's common_utils parses the command line
os.environ["BACKEND"] = "gloo"
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("INIT_METHOD", "file:///dev/null")  # set per test

if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        stub.ACCEPT = False
        sys.modules["expecttest"] = stub

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.parallel._replicated_tensor_ddp_utils as _rt  # noqa: E402

_rt._set_ddp_with_replicated_tensor = lambda value: None

from torch.testing._internal import common_distributed  # noqa: E402
# Imported by every test's setUp otherwise, in every test's process.
from torch.testing._internal import common_device_type  # noqa: E402,F401
from torch.testing._internal.distributed import distributed_test  # noqa: E402

sys.argv = _argv


class _UnderGlooRules(str):
    """The backend's name, equal to "gloo" as well in the tests' branches;
    a str of its own ("coll") everywhere else."""

    def __eq__(self, other):
        return other == "gloo" or str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


def use_backend(name):
    """Makes the tests create groups of backend `name` ("gloo" or "coll");
    may be called again to switch."""
    distributed_test.BACKEND = "gloo"
    if name == "coll":
        import coll.distributed  # noqa: F401  (registers the backend)

        for key in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
            common_distributed.DistTestCases.backend_feature[key].add("coll")
        for lst in (distributed_test.PROFILING_SUPPORTED_BACKENDS,
                    distributed_test.CUDA_PROFILING_SUPPORTED_BACKENDS,
                    distributed_test.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
            if "coll" not in lst:
                lst.append("coll")
        distributed_test.BACKEND = _UnderGlooRules("coll")


class TestDistBackendWithFork(distributed_test.TestDistBackend,
                              distributed_test.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # A file of this test's own for the tests that initialize again.
        distributed_test.INIT_METHOD = os.environ["INIT_METHOD"]
        self._start_processes(torch.multiprocessing.get_context("fork").Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def skipped_by_decorator(name):
    """1 if the test's own decorators skip it (before any rank starts)."""
    return bool(getattr(getattr(TestDistBackendWithFork, name),
                        "__unittest_skip__", False))


def test_names():
    return sorted(n for n in dir(TestDistBackendWithFork)
                  if n.startswith("test_"))
