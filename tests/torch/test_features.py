# SPDX-License-Identifier: Apache-2.0
"""The calls beyond the reductions (gather, scatter, all-to-all, receive
from any source, monitored_barrier, sparse and bitwise reductions, object
collectives, ...) against a reference and against gloo (features_rank.py
checks), and monitored_barrier's failures naming the ranks that did not
come (barrier_rank.py)."""
import pytest

from ranks import report, require_backend, run_ranks


@pytest.mark.parametrize("world", [2, 3])
def test_features_match_reference_and_gloo(world):
    require_backend()
    reports = report(run_ranks("features_rank.py", world, timeout=240))
    for r, rep in enumerate(reports):
        assert rep["failures"] == [], "rank %d: %s" % (r, rep["failures"])
        assert rep["checked"] >= 60, rep


def test_monitored_barrier_failures():
    require_backend()
    reports = report(run_ranks("barrier_rank.py", 3, timeout=120))
    for r, rep in enumerate(reports):
        assert rep["failures"] == [], "rank %d: %s" % (r, rep["failures"])
    print(reports)
