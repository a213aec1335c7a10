#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fault-harness.sh: the fault figures, from a build tree. Rank processes
# over TCP on 127.0.0.1 stream allreduces (MIB MiB each, default 16), then:
#   - kill -9 of one rank (each rank in turn), KILL_TRIALS times (default
#     20) at worlds 4 and 8: the share of survivor errors that named the
#     killed rank, and the slowest survivor's time from the kill to its
#     error; then a quarter as many SIGSTOPs with a 1 s heartbeat timeout
#     (the share that named the stopped rank unresponsive, and how soon);
#   - a watchdog thread on every rank aborts its comm at a random moment,
#     ABORT_TRIALS times (default 1000) at world 4: the share of outcomes
#     that were COLL_ERR_ABORTED.
# Usage: tools/fault-harness.sh [build-dir]. Exits nonzero if any outcome
# was wrong. Times depend on the machine: run it on a quiet one.
set -euo pipefail
build=${1:-build}
bin=$build/tests/tcp/test_tcp_blame
mib=${MIB:-16}
kills=${KILL_TRIALS:-20}
aborts=${ABORT_TRIALS:-1000}
if [ ! -x "$bin" ]; then
  echo "fault-harness: $bin not found: build the tests first" >&2
  exit 2
fi
# The ranks' own log lines (every survivor warns of the failure it saw)
# are left out; what the harness says about a wrong outcome stays.
quiet() { grep -v ' COLL WARN ' || true; }
rc=0
# With pipefail a pipeline fails when the harness does.
if ! "$bin" figures 4 "$kills" "$aborts" "$mib" 2>&1 | quiet; then rc=1; fi
if ! "$bin" figures 8 "$kills" 0 "$mib" 2>&1 | quiet; then rc=1; fi
exit $rc
