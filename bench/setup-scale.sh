#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# setup-scale.sh: a comm's setup as the world grows: for each rank count,
# the wall time from the first rank's start to the last rank's comm, to the
# end of the first collective, and the descriptors per rank (setup_scale.c),
# medians of REPS runs, as a markdown table; and the requests rank 0's
# store served during the setup, from one more run with COLL_DEBUG=info
# (rank 0 logs the count as its store stops; that run is not timed).
#
#   bench/setup-scale.sh [N ...]          (default: 8 16 32 64 128 256)
#
# COLL_TRANSPORT  default tcp (set shm or auto to measure those)
# BUILD           libcoll's build folder (default: build)
# REPS            runs per rank count (default 3; 0: the store's requests only)
#
# Every rank is a process of this host; many more ranks than cores make the
# times an upper bound (ranks wait for a core). The descriptors do not depend
# on the load. Each process needs about N + 30 descriptors (ulimit -n).
# On 2 busy cores, runs of 128 and 256 ranks over TCP have failed at setup
# (handshakes refused past their 2 s first-byte bound, then the setup's
# outcome agreement lost rank 0's store): a failed run's first warnings are
# printed and its row reads "failed" (the exit code is then 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
reps=${REPS:-3}
ns=${*:-8 16 32 64 128 256}
export COLL_TRANSPORT=${COLL_TRANSPORT:-tcp}
[ -x "$build/tools/coll-run" ] || { echo "setup-scale: no $build/tools/coll-run (set BUILD)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/setup-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -I"$root/include" -o "$work/setup_scale" "$root/bench/setup_scale.c" \
  -L"$build/src" -lcoll -Wl,-rpath,"$build/src"

med() { sort -g | awk '{a[NR]=$1} END { if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'; }
echo "COLL_TRANSPORT=$COLL_TRANSPORT, medians of $reps, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo
echo "| ranks | setup s | to first collective s | descriptors per rank (max) | (mean) | store requests |"
echo "|---|---|---|---|---|---|"
failed=0
for n in $ns; do
  : >"$work/rows"
  for r in $(seq "$reps"); do
    if timeout 600 "$build/tools/coll-run" -n "$n" --timeout 550 \
      "$work/setup_scale" >"$work/out" 2>"$work/err"; then
      grep -h "ranks $n " "$work/out" | sed 's/^\[0\] //' >>"$work/rows" || true
    else
      # The first warnings say why (a late handshake, a lost store); the
      # last lines only echo the ranks that learnt of it.
      echo "setup-scale: $n ranks, run $r failed; first: $(grep -m 3 -E 'WARN|setup_scale:' "$work/err" | cut -c1-400)" >&2
      echo "setup-scale: last: $(tail -n 2 "$work/err" | cut -c1-400)" >&2
      failed=1
    fi
  done
  # The store's requests: one run more, logging at info (not timed).
  reqs=$(COLL_DEBUG=info timeout 600 "$build/tools/coll-run" -n "$n" \
    --timeout 550 "$work/setup_scale" 2>&1 >/dev/null |
    sed -n 's/.*the store served \([0-9]*\) requests.*/\1/p' | head -n 1) || true
  if [ "$reps" -eq 0 ]; then
    echo "| $n | | | | | ${reqs:-failed} |"
    continue
  fi
  if [ ! -s "$work/rows" ]; then
    echo "| $n | failed | | | | ${reqs:-} |"
    continue
  fi
  printf '| %s | %s | %s | %s | %s | %s |\n' "$n" \
    "$(awk '{print $4}' "$work/rows" | med)" "$(awk '{print $6}' "$work/rows" | med)" \
    "$(awk '{print $8}' "$work/rows" | med)" "$(awk '{print $10}' "$work/rows" | med)" \
    "${reqs:-?}"
done
exit $failed
