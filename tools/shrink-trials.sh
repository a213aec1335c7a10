#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shrink-trials.sh: the shrink figure, from a build tree. Each trial starts
# examples/elastic_tcp on WORLD ranks (default 4) under coll-run
# --keep-going, waits until every rank trains, then kills one rank chosen
# at random with kill -9 at a random moment while they train. A trial is
# correct when coll-run exits 0, every survivor printed "match" (its
# weights are those of a single process that ran every step, and identical
# on all survivors) and nothing else failed.
# Usage: tools/shrink-trials.sh [build-dir] [trials (default 100)].
# Exits nonzero unless every trial was correct.
set -euo pipefail
build=${1:-build}
trials=${2:-100}
world=${WORLD:-4}
steps=${STEPS:-300}
step_ms=${STEP_MS:-5}
run=$build/tools/coll-run
prog=$build/examples/elastic_tcp
if [ ! -x "$run" ] || [ ! -x "$prog" ]; then
  echo "shrink-trials: $run or $prog not found: build first" >&2
  exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The pid of the rank process whose RANK is $2, among coll-run $1's children.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# A progress line on stderr every 10 s or so, so a long run shows it lives.
start=$(date +%s) last=$start
progress() { # trial
  local now
  now=$(date +%s)
  if [ $((now - last)) -ge 10 ] || [ "$1" -eq "$trials" ]; then
    last=$now
    echo "shrink-trials: $1 of $trials trials done, $good correct," \
      "$((now - start)) s so far" >&2
  fi
}

good=0
echo "shrink-trials: $trials trials of kill -9 at $world ranks" >&2
for ((t = 1; t <= trials; t++)); do
  log=$out/trial.$t
  : >"$log"
  "$run" -n "$world" --keep-going --timeout 120 "$prog" --steps "$steps" \
    --step-ms "$step_ms" >"$log" 2>&1 &
  runpid=$!
  # Until every rank trains (bounded: 30 s).
  for ((i = 0; i < 3000; i++)); do
    [ "$(grep -c ': training,' "$log" || true)" -ge "$world" ] && break
    sleep 0.01
  done
  victim=$((RANDOM % world))
  # Somewhere in the first two thirds of the training.
  sleep "$(awk -v r=$RANDOM -v s="$steps" -v m="$step_ms" \
    'BEGIN { printf "%.3f", r / 32768 * s * m / 1000 * 2 / 3 }')"
  pid=$(rank_pid "$runpid" "$victim" || true)
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rc=0
  wait "$runpid" || rc=$?
  matches=$(grep -c ': match$' "$log" || true)
  if [ "$rc" -eq 0 ] && [ "$matches" -eq $((world - 1)) ] &&
    grep -q "rank $victim was killed by signal 9" "$log"; then
    good=$((good + 1))
  else
    echo "trial $t: victim rank $victim, coll-run exit $rc, $matches matches:"
    grep -v ' COLL WARN ' "$log" | tail -20
  fi
  progress "$t"
done
echo "shrink: $good of $trials trials of kill -9 of a random rank mid-training" \
  "at $world ranks: the survivors agreed, continued and matched the reference"
[ "$good" -eq "$trials" ]
