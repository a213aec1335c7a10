#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fault-harness.sh: the fault figures, from a build tree.
#
# 1. TCP streams (tests/tcp/test_tcp_blame): rank processes over 127.0.0.1
#    stream allreduces (MIB MiB each, default 16), then kill -9 of one rank
#    (each in turn), KILL_TRIALS times (default 20) at worlds 4 and 8: the
#    share of survivor errors that named the killed rank, and the slowest
#    survivor's time from the kill; a quarter as many SIGSTOPs with a 1 s
#    heartbeat timeout; a watchdog thread on every rank aborting its comm
#    at a random moment, ABORT_TRIALS times (default 1000) at world 4.
# 2. Every path a job takes on one machine (tests/faults/fault_tool):
#    shared memory (the default), TCP, and the two-level path (two hosts,
#    shared memory within each):
#    - late: kill -9 and abort of a waiting rank and of the late one while
#      the others wait on the late rank, LATE_TRIALS times (default 20)
#      each: how soon every waiting rank is released, naming the origin;
#    - stall: an idle rank stopped for 1.5 T (T = FJ_HB_MS, default 2000),
#      STALL_TRIALS times (default 10): when every other rank names it, as
#      a share of T, and whether the resumed rank names itself;
#    - soak: SOAK_TRIALS (default 1000) jobs with one random fault each
#      (kill, stop, abort, garbage, partition), a random rank late or not:
#      hangs, wrong sums, origins named (FJ_SEED repeats a sequence).
# 3. Where this runs as root: a network cut between network namespaces
#    in the middle of a job (tests/faults/netns_faults.sh), else skipped.
#
# Usage: tools/fault-harness.sh [build-dir]. Exits nonzero if any outcome
# was wrong. Times depend on the machine: run it on a quiet one (the soak
# takes about a second a trial).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
blame=$build/tests/tcp/test_tcp_blame
tool=$build/tests/faults/fault_tool
mib=${MIB:-16}
kills=${KILL_TRIALS:-20}
aborts=${ABORT_TRIALS:-1000}
for bin in "$blame" "$tool"; do
  if [ ! -x "$bin" ]; then
    echo "fault-harness: $bin not found: build the tests first" >&2
    exit 2
  fi
done
# The ranks' own log lines (every survivor warns of the failure it saw)
# are left out; what the harness says about a wrong outcome stays.
quiet() { grep -v ' COLL WARN ' || true; }
rc=0
echo "== TCP streams: kill -9, stop, watchdog aborts"
# With pipefail a pipeline fails when the harness does.
if ! "$blame" figures 4 "$kills" "$aborts" "$mib" 2>&1 | quiet; then rc=1; fi
if ! "$blame" figures 8 "$kills" 0 "$mib" 2>&1 | quiet; then rc=1; fi
echo "== a rank killed or aborted while the others wait on a late one"
if ! "$tool" late "${LATE_TRIALS:-20}" 2>&1 | quiet; then rc=1; fi
echo "== a stopped rank"
if ! "$tool" stall "${STALL_TRIALS:-10}" 2>&1 | quiet; then rc=1; fi
echo "== random faults"
if ! "$tool" soak "${SOAK_TRIALS:-1000}" 2>&1 | quiet; then rc=1; fi
echo "== a network cut between namespaces"
set +e
"$here/../tests/faults/netns_faults.sh" "$tool" "${FJ_HB_MS:-2000}" 2>&1 | quiet
netns=${PIPESTATUS[0]}
set -e
if [ "$netns" != 0 ] && [ "$netns" != 77 ]; then rc=1; fi
exit $rc
