#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""plot-perf.py: bus bandwidth against message size, several runs on one
plot, to a PNG (matplotlib).

    tools/plot-perf.py -o busbw.png [--ranks N] [--peers a,b] [LABEL=]INPUT...

Each INPUT is one of (the format is told from the content):
  - the output of `coll-perf --json` (as coll-run prints it too, with its
    "[rank] " prefixes); the in-place busbw is drawn (--variant
    out_of_place for the other column);
  - a table of bench/'s drivers, as bench/vs-peers.sh keeps them in OUT
    (`<variant>.n<N>.r<rep>.txt`: "# peer=NAME n=N ..." then rows of bytes,
    time_us, algbw_GBps, busbw_GBps), or that folder: the runs of one peer and rank
    count are merged, the median busbw per size drawn (--peers and --ranks
    choose which);
  - a CSV with a header naming the columns `bytes` and `busbw_gbps` (and an
    optional `label` column: one line per label).
LABEL= names a run in the legend; otherwise the label comes from the input.
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys


class InputError(Exception):
    pass


def strip_rank(line):
    m = re.match(r"^\[\d+\] ?", line)
    return line[m.end():] if m else line


def read_coll_perf(text, source, variant):
    body = "\n".join(strip_rank(line) for line in text.splitlines())
    try:
        doc = json.loads(body[body.index("{"):])
    except ValueError as e:
        raise InputError("%s: not coll-perf JSON (%s)" % (source, e))
    pts = []
    for row in doc.get("results", []):
        v = row.get(variant)
        if v is not None and v.get("busbw_gbps") is not None:
            pts.append((int(row["size"]), float(v["busbw_gbps"])))
    if not pts:
        raise InputError("%s: no %s results" % (source, variant))
    label = "libcoll %s, %d ranks (%s)" % (doc.get("backend", "?"), doc.get("ranks", 0), doc.get("mode", "?"))
    return [(label, doc.get("ranks"), pts)]


PEER_HEAD = re.compile(r"^#\s*peer=(\S+)\s+n=(\d+)")


def read_peer_table(text, source):
    m = PEER_HEAD.match(text)
    if not m:
        raise InputError("%s: not a peer table (no '# peer=NAME n=N' line)" % source)
    pts = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if not f or f[0].startswith("#") or not f[0].isdigit():
            continue
        if len(f) < 4:
            raise InputError("%s: row %r has fewer than 4 columns" % (source, line))
        pts.append((int(f[0]), float(f[3])))
    return m.group(1), int(m.group(2)), pts


def read_csv(text, source):
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or "bytes" not in rows[0] or "busbw_gbps" not in rows[0]:
        raise InputError("%s: CSV needs the columns bytes and busbw_gbps" % source)
    runs = {}
    for r in rows:
        label = r.get("label") or os.path.splitext(os.path.basename(source))[0]
        runs.setdefault(label, []).append((int(r["bytes"]), float(r["busbw_gbps"])))
    return [(label, None, pts) for label, pts in runs.items()]


def merge_peers(tables, peers, ranks):
    """{(peer, n): [points of each run]} -> runs with the median per size."""
    groups = {}
    for peer, n, pts in tables:
        if peers and peer not in peers:
            continue
        if ranks and n != ranks:
            continue
        groups.setdefault((peer, n), []).append(pts)
    runs = []
    for (peer, n), reps in sorted(groups.items()):
        by_size = {}
        for pts in reps:
            for size, bw in pts:
                by_size.setdefault(size, []).append(bw)
        pts = [(s, statistics.median(v)) for s, v in sorted(by_size.items())]
        label = "%s, %d ranks" % (peer, n) + (" (median of %d)" % len(reps) if len(reps) > 1 else "")
        runs.append((label, n, pts))
    return runs


def read_input(arg, a):
    label = None
    if "=" in arg and not os.path.exists(arg):
        label, arg = arg.split("=", 1)
    if os.path.isdir(arg):
        tables = []
        for name in sorted(os.listdir(arg)):
            if name.endswith(".txt"):
                with open(os.path.join(arg, name)) as f:
                    text = f.read()
                if PEER_HEAD.match(text):
                    tables.append(read_peer_table(text, name))
        runs = merge_peers(tables, a.peers, a.ranks)
        if not runs:
            raise InputError("%s: no peer tables match (--peers, --ranks)" % arg)
    else:
        try:
            with open(arg) as f:
                text = f.read()
        except OSError as e:
            raise InputError("%s: %s" % (arg, e.strerror))
        if PEER_HEAD.match(text):
            runs = merge_peers([read_peer_table(text, arg)], None, None)
        elif "{" in text and '"coll-perf"' in text:
            runs = read_coll_perf(text, arg, a.variant)
        elif text.lstrip().startswith(("bytes", "label")) or "busbw_gbps" in text.split("\n", 1)[0]:
            runs = read_csv(text, arg)
        else:
            raise InputError("%s: neither coll-perf JSON, a peer table nor a bytes,busbw_gbps CSV" % arg)
    if label is not None:
        if len(runs) != 1:
            raise InputError("%s: LABEL= names one run, but the input holds %d" % (arg, len(runs)))
        runs = [(label, runs[0][1], runs[0][2])]
    return runs


def size_text(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d%s" % (b // div, unit)
    return str(b)


def plot(runs, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    sizes = set()
    for label, _, pts in runs:
        pts = sorted(pts)
        sizes.update(s for s, _ in pts)
        ax.plot([s for s, _ in pts], [b for _, b in pts], marker="o", markersize=4, label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_text(s) for s in ticks], rotation=45 if len(ticks) > 8 else 0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="busbw against message size, from coll-perf --json, peer tables or CSV, to a PNG"
    )
    ap.add_argument("inputs", nargs="+", metavar="[LABEL=]INPUT")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="allreduce bus bandwidth")
    ap.add_argument("--ranks", type=int, help="peer tables: only this rank count")
    ap.add_argument("--peers", type=lambda s: set(s.split(",")), help="peer tables: only these peers")
    ap.add_argument("--variant", default="in_place", choices=["in_place", "out_of_place"],
                    help="coll-perf column (default in_place, as the peers run)")
    a = ap.parse_args(argv)
    try:
        runs = []
        for arg in a.inputs:
            runs.extend(read_input(arg, a))
    except InputError as e:
        print("plot-perf: %s" % e, file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot-perf: matplotlib is missing (Debian: python3-matplotlib)", file=sys.stderr)
        return 3
    plot(runs, a.out, a.title)
    print("plot-perf: %d runs -> %s" % (len(runs), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
