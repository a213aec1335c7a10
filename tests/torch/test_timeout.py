# SPDX-License-Identifier: Apache-2.0
"""A collective that a rank never joins raises a RuntimeError (work.wait's
timeout, or the group's) instead of hanging, and aborts the comm so the
other ranks fail as well; a rank that never comes fails the group's
creation through torch's store (timeout_rank.py does the checking)."""
import pytest

from ranks import report, require_backend, run_ranks


@pytest.mark.parametrize("mode", ["wait", "group"])
def test_stuck_collective_raises(mode):
    require_backend()
    reports = report(run_ranks("timeout_rank.py", 2, [mode], timeout=90))
    for r, rep in enumerate(reports):
        assert rep["failures"] == [], "rank %d: %s" % (r, rep["failures"])
    assert reports[0]["texts"], reports  # rank 0 did see the failure
    print(reports)


def test_rank_that_never_comes_fails_the_creation():
    require_backend()
    reports = report(run_ranks("timeout_rank.py", 2, ["absent"], timeout=60,
                               ranks=[1]))
    assert reports[0]["failures"] == [], reports
    assert reports[0]["texts"], reports
    print(reports)
