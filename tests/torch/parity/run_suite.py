# SPDX-License-Identifier: Apache-2.0
"""Runs torch's process-group tests (suite.py) for one backend and world
size, each test in a process of its own with a time bound, several at
once, and writes what each did as JSON.

    run_suite.py --backend coll --world 2 [--jobs 2] [--timeout 120]
                 [--parity] [--expect FILE] [--record FILE]
                 [--out results.json] [--logs DIR] [test ...]

Each test's process is forked from this one once torch and the suite are
imported, in a process group of its own, so that a test that overruns
its bound is killed with its ranks. Outcomes: pass, skip, fail (an
assertion or an exception, in a rank or in the test's process), timeout.

--parity (with --backend coll): every test coll did not pass is run again
on gloo, and the run fails (exit 1) if gloo passes any of them: no test
that gloo passes on CPU may fail, error, hang or skip on coll. A test its
decorators skip is not run again: the decorators are gloo's, one and the
same function for both backends, so gloo skips it too. To count both
backends in full, run each with --out.

--expect FILE (with --backend coll): FILE lists, per world size, the tests
gloo passed with the installed torch (written by a gloo run with --record
FILE). Only those run, on coll, and the run fails if any of them does not
pass: the same verdict as --parity, in a third of the time, since the
tests that skip on CPU (no GPU, another backend, another world size) and
their second run on gloo are left out. Where FILE was recorded with
another torch or lacks the world size, the run falls back to --parity.
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["gloo", "coll"], required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds one test may take, its ranks included")
    p.add_argument("--out", help="write the outcomes here (JSON)")
    p.add_argument("--logs", help="keep each test's output in this folder")
    p.add_argument("--list", action="store_true",
                   help="print the test names and exit")
    p.add_argument("--parity", action="store_true",
                   help="rerun on gloo what coll did not pass; fail if gloo "
                        "passes any of it")
    p.add_argument("--expect", metavar="FILE",
                   help="run on coll only what gloo passed (recorded in FILE "
                        "by --record); fail if any of it does not pass")
    p.add_argument("--record", metavar="FILE",
                   help="(gloo) store the tests that passed in FILE, under "
                        "this world size and torch's version")
    p.add_argument("tests", nargs="*", help="run only these tests")
    return p.parse_args()


def run_one(suite, name, world, bound, log_path):
    """The body of a test's process: runs the test, and exits with 0
    (pass), 2 (skip) or 1 (fail); its output goes to log_path."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = sys.stdout
    # torch's own bound on a test's ranks, inside ours: a rank that hangs
    # gets its traceback printed before the test fails.
    suite.common_distributed.TIMEOUT_DEFAULT = max(10, int(bound) - 10)
    suite.common_distributed.TIMEOUT_OVERRIDE.clear()
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(
        suite.TestDistBackendWithFork(name))
    sys.stdout.flush()
    if result.errors or result.failures:
        code = 1
    elif result.skipped:
        code = 2
    else:
        code = 0
    os._exit(code)


def start(suite, name, world, bound, logdir):
    log_path = os.path.join(logdir, name + ".log")
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            run_one(suite, name, world, bound, log_path)
        finally:
            os._exit(1)
    return pid, log_path


def outcome_of(status):
    if os.WIFEXITED(status):
        return {0: "pass", 2: "skip"}.get(os.WEXITSTATUS(status), "fail")
    return "fail"


def skip_reason(log_path):
    with open(log_path, errors="replace") as f:
        for line in f:
            if "skipped" in line:
                return line.strip()[-200:]
    return ""


def run_all(suite, names, args, logdir, label):
    """Runs `names`, args.jobs at a time; their outcomes by name."""
    pending = list(names)
    running = {}  # pid -> (name, log, deadline, started)
    results = {}
    t0 = time.monotonic()
    while pending or running:
        while pending and len(running) < args.jobs:
            name = pending.pop(0)
            pid, log = start(suite, name, args.world, args.timeout, logdir)
            now = time.monotonic()
            running[pid] = (name, log, now + args.timeout, now)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            now = time.monotonic()
            for p, (name, log, deadline, began) in list(running.items()):
                if now > deadline:
                    try:
                        os.killpg(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    os.waitpid(p, 0)
                    del running[p]
                    results[name] = {"outcome": "timeout", "log": log,
                                     "seconds": round(now - began, 1)}
                    print("%-70s timeout" % name, flush=True)
            continue
        if pid not in running:
            continue
        name, log, _, began = running.pop(pid)
        # Ranks left behind by the test's process go with it.
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        res = {"outcome": outcome_of(status), "log": log,
               "seconds": round(time.monotonic() - began, 1)}
        if res["outcome"] == "skip":
            res["reason"] = skip_reason(log)
        results[name] = res
        print("%-70s %-7s %5.1f s" % (name, res["outcome"], res["seconds"]),
              flush=True)
    counts = {}
    for r in results.values():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print("%s w%d: %s in %.0f s (logs in %s)" % (
        label, args.world,
        ", ".join("%d %s" % (v, k) for k, v in sorted(counts.items())),
        time.monotonic() - t0, logdir), flush=True)
    return results


def recorded_passes(path, world):
    """The tests gloo passed at `world` ranks as FILE records them, or None
    (with the reason printed) where they cannot stand for this torch."""
    import torch

    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        print("run_suite: %s: %s; running --parity instead" % (path, e))
        return None
    if rec.get("torch") != torch.__version__ or str(world) not in rec:
        print("run_suite: %s holds gloo's passes for torch %s, worlds %s; "
              "this is torch %s, world %d: running --parity instead" %
              (path, rec.get("torch"), sorted(k for k in rec if k.isdigit()),
               torch.__version__, world), flush=True)
        return None
    return rec[str(world)]


def record_passes(path, world, results):
    import torch

    rec = {}
    if os.path.exists(path):
        with open(path) as f:
            rec = json.load(f)
    if rec.get("torch") != torch.__version__:
        rec = {}
    rec["torch"] = torch.__version__
    rec[str(world)] = sorted(n for n, r in results.items()
                             if r["outcome"] == "pass")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
        f.write("\n")


def expect_verdict(results, expected, world):
    """0 if every test of `expected` passed on coll, else 1 with each
    one's log."""
    lost = [n for n in expected if results[n]["outcome"] != "pass"]
    for n in lost:
        print("PARITY: %s passes on gloo but is %s on coll; its log: %s" %
              (n, results[n]["outcome"], results[n]["log"]), flush=True)
        with open(results[n]["log"], errors="replace") as f:
            print(f.read()[-3000:], flush=True)
    print("parity w%d: of the %d tests gloo passes, coll passed %d" %
          (world, len(expected), len(expected) - len(lost)), flush=True)
    return 1 if lost else 0


def main():
    args = parse()
    os.environ["WORLD_SIZE"] = str(args.world)
    sys.path.insert(0, HERE)
    try:
        import suite
    except ImportError as e:
        print("run_suite: torch's distributed test suite does not import "
              "here (%s): skipped" % e, flush=True)
        return 77

    names = args.tests or suite.test_names()
    expected = None
    if args.expect and args.backend == "coll":
        expected = recorded_passes(args.expect, args.world)
        if expected is None:
            args.parity = True
        else:
            unknown = sorted(set(expected) - set(names))
            if unknown and not args.tests:
                print("run_suite: %s names tests this torch lacks: %s" %
                      (args.expect, unknown), file=sys.stderr)
                return 2
            names = [n for n in names if n in set(expected)]
            expected = names
    if args.list:
        print("\n".join(names))
        return 0
    if args.parity and args.backend != "coll":
        print("run_suite: --parity compares coll with gloo", file=sys.stderr)
        return 2
    logdir = args.logs or tempfile.mkdtemp(prefix="torch-suite-")
    os.makedirs(os.path.join(logdir, args.backend), exist_ok=True)
    suite.use_backend(args.backend)
    results = run_all(suite, names, args, os.path.join(logdir, args.backend),
                      args.backend)
    verdict = 0
    if expected is not None:
        verdict = expect_verdict(results, expected, args.world)
    elif args.parity:
        others = [n for n, r in sorted(results.items())
                  if r["outcome"] != "pass" and not suite.skipped_by_decorator(n)]
        os.makedirs(os.path.join(logdir, "gloo"), exist_ok=True)
        suite.use_backend("gloo")
        gloo = run_all(suite, others, args, os.path.join(logdir, "gloo"),
                       "gloo (what coll did not pass)")
        lost = [n for n in others if gloo[n]["outcome"] == "pass"]
        for n in lost:
            print("PARITY: %s passes on gloo but is %s on coll; its log: %s" %
                  (n, results[n]["outcome"], results[n]["log"]), flush=True)
            with open(results[n]["log"], errors="replace") as f:
                print(f.read()[-3000:], flush=True)
        passed = sum(r["outcome"] == "pass" for r in results.values())
        print("parity w%d: %d tests, coll passed %d, %d skipped by gloo's "
              "decorators; of the other %d, gloo passes %d" %
              (args.world, len(names), passed,
               len(names) - passed - len(others), len(others), len(lost)),
              flush=True)
        verdict = 1 if lost else 0
    if args.record and args.backend == "gloo":
        record_passes(args.record, args.world, results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"backend": args.backend, "world": args.world,
                       "results": results}, f, indent=1, sort_keys=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
