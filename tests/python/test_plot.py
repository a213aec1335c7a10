# SPDX-License-Identifier: Apache-2.0
"""tools/plot-perf.py on canned inputs (data/): a coll-perf --json run as
coll-run prints it, a folder of peer tables, a CSV; what it reads, and the
PNG it writes."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import HERE, ROOT

TOOL = os.path.join(ROOT, "tools", "plot-perf.py")
DATA = os.path.join(HERE, "data")


def load_tool():
    spec = importlib.util.spec_from_file_location("plot_perf", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Args:
    peers = None
    ranks = None
    variant = "in_place"


def test_reads_each_format():
    pp = load_tool()
    (label, n, pts), = pp.read_input(os.path.join(DATA, "coll-perf-n2.json"), Args)
    assert n == 2 and "libcoll cpu, 2 ranks" in label
    assert pts == [(4096, 0.0397), (65536, 0.3347), (1048576, 0.9529)]
    oop = Args()
    oop.variant = "out_of_place"
    assert pp.read_input(os.path.join(DATA, "coll-perf-n2.json"), oop)[0][2][0] == (4096, 0.052)
    runs = pp.read_input(os.path.join(DATA, "peers"), Args)
    assert [r[0] for r in runs] == ["gloo_ring, 4 ranks", "mpi_tcp, 2 ranks (median of 3)"]
    assert runs[1][2] == [(4096, 0.293), (65536, 2.048), (1048576, 3.495)]  # medians
    only2 = Args()
    only2.ranks = 2
    assert len(pp.read_input(os.path.join(DATA, "peers"), only2)) == 1
    (label, _, pts), = pp.read_input("mine=" + os.path.join(DATA, "busbw.csv"), Args)
    assert label == "mine" and pts[-1] == (1048576, 1.5)


def test_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib missing (Debian: python3-matplotlib)")
    out = tmp_path / "busbw.png"
    p = subprocess.run(
        [sys.executable, TOOL, "-o", str(out), os.path.join(DATA, "coll-perf-n2.json"),
         os.path.join(DATA, "peers"), os.path.join(DATA, "busbw.csv")],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "4 runs" in p.stdout
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.mark.parametrize(
    "args,message",
    [
        (["missing.json"], "No such file"),
        ([os.path.join(DATA, "peers", "..", "layout-not-here")], "No such file"),
        (["x=" + os.path.join(DATA, "peers")], "LABEL= names one run"),
        ([os.path.join(HERE, "conftest.py")], "neither coll-perf JSON"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    out = tmp_path / "x.png"
    p = subprocess.run([sys.executable, TOOL, "-o", str(out)] + args, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert not out.exists()
