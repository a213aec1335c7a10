# SPDX-License-Identifier: Apache-2.0
"""Every collective of the "coll" backend against a serial reference and,
where gloo has the call, against gloo on the same tensors in the same
processes (collectives_rank.py does the checking)."""
import pytest

from ranks import report, require_backend, run_ranks


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_match_reference_and_gloo(world):
    require_backend()
    reports = report(run_ranks("collectives_rank.py", world, timeout=240))
    for r, rep in enumerate(reports):
        assert rep["failures"] == [], "rank %d: %s" % (r, rep["failures"])
        # Every collective ran: a test that checked nothing cannot pass.
        assert rep["checked"] >= 100, rep
        assert rep["gloo_checked"] >= 40, rep
    # Results that are the same on every rank are so bit for bit.
    assert len({rep["digest"] for rep in reports}) == 1, reports
