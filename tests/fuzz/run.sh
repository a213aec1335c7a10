#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every fuzz target of a COLL_BUILD_FUZZERS=ON build folder, starting
# from the committed seeds (tests/fuzz/corpus/<target>/, read only), and
# prints each target's executions and time. Fails on the first crash, leak
# or sanitizer report; libFuzzer then writes the input that caused it as
# crash-* (or leak-*, timeout-*) under BUILD/fuzz-artifacts/.
#
#   tests/fuzz/run.sh BUILD [-runs=N | -max_total_time=S] [TARGET...]
#
# Default: -runs=10000000 per target. New inputs the fuzzer finds go to
# BUILD/fuzz-corpus/<target>/, so later runs start from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD [-runs=N | -max_total_time=S] [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
limit=-runs=10000000
case "${1:-}" in
-runs=* | -max_total_time=*)
  limit=$1
  shift
  ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tcp_frame tcp_handshake store_request shrink_msg)

art="$build/fuzz-artifacts"
mkdir -p "$art"
status=0
printf '%-15s %12s %8s %10s  %s\n' target executions seconds exec/s result
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "$t: $bin not built (cmake --build $build --target fuzzers)" >&2
    exit 2
  fi
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work"
  log="$art/$t.log"
  start=$(date +%s.%N)
  rc=0
  # -max_len: room for a few frames or requests; -timeout: a single input
  # taking a second is a hang worth reporting. Errors abort at once.
  "$bin" "$limit" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$art/$t-" \
    "$work" "$here/corpus/$t" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  runs=${runs:-0}
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  rate=$(awk -v n="$runs" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0) ? n / s : 0 }')
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc, log $log)"
    status=1
  fi
  printf '%-15s %12s %8s %10s  %s\n' "$t" "$runs" "$secs" "$rate" "$result"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$log" | head -20 >&2 || true
  fi
done
exit $status
