# SPDX-License-Identifier: Apache-2.0
"""examples/python/ddp_train.py on 4 processes: DistributedDataParallel on
the "coll" backend trains exactly as on gloo (per-step losses within 1e-6
relative in f32), and with bfloat16 gradients, which gloo cannot reduce,
it still trains (finite losses that go down)."""
import math
import os
import re
import subprocess
import sys

import pytest

from ranks import require_backend

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "examples", "python", "ddp_train.py")
TIMEOUT = 150


def losses(*args):
    cmd = [sys.executable, EXAMPLE, "--nproc", "4", "--steps", "50",
           "--timeout", str(TIMEOUT - 30)] + list(args)
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s still ran after %d s:\n%s" % (cmd, TIMEOUT, e.stdout))
    assert run.returncode == 0, run.stdout + run.stderr
    found = [float(m.group(1)) for m in
             re.finditer(r"^step +\d+ loss (\S+)$", run.stdout, re.M)]
    assert len(found) == 50, run.stdout
    assert "mean step time" in run.stdout, run.stdout
    return found


def test_ddp_coll_matches_gloo():
    require_backend()
    coll = losses("--backend", "coll")
    gloo = losses("--backend", "gloo")
    for step, (c, g) in enumerate(zip(coll, gloo)):
        assert abs(c - g) <= 1e-6 * abs(g), (step, c, g)
    assert coll[-1] < coll[0]  # it did train


def test_ddp_bf16_gradients_train():
    require_backend()
    found = losses("--backend", "coll", "--bf16-grads")
    assert all(math.isfinite(v) for v in found), found
    assert found[-1] < 0.95 * found[0], found
