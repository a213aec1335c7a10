# SPDX-License-Identifier: Apache-2.0
"""Refusals (unsupported op or dtype, non-contiguous or foreign-device
tensors, bad sizes, ranks, tags) raise RuntimeErrors that name the problem,
and the group keeps working (errors_rank.py does the checking)."""
from ranks import report, require_backend, run_ranks


def test_errors_raise_and_leave_the_group_working():
    require_backend()
    reports = report(run_ranks("errors_rank.py", 2, timeout=120))
    for r, rep in enumerate(reports):
        assert rep["failures"] == [], "rank %d: %s" % (r, rep["failures"])
        assert rep["cases"] >= 20, rep
