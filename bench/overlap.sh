#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# overlap.sh: does a nonblocking allreduce finish while its ranks compute?
# For each transport, REPS runs of bench/overlap.c (a 16 MiB in-place f32 SUM
# iallreduce issued before 50 ms of CPU work, coll_test at its end, 24 tries
# a run), interleaved, as one markdown table: the tries done when the
# compute ended (summed over the runs) and the median of the runs' other
# figures.
#
#   bench/overlap.sh [N]                 (ranks; default 2)
#
# TRANSPORTS  default "shm tcp" (COLL_TRANSPORT of each row; "auto" too)
# BUILD       libcoll's build folder (default: build)
# REPS        runs of each transport (default 3)
# OVERLAP_BYTES, OVERLAP_COMPUTE_MS, OVERLAP_TRIES  the case (overlap.c)
# COLL_RUN_ARGS  more options for coll-run (e.g. "--bind none")
#
# The goal is done in >= 95 % of the tries. A run that fails, or a wrong
# result, makes the exit code 1. Run nothing else meanwhile: a busy host
# takes the cores the progress needs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
reps=${REPS:-3}
n=${1:-2}
transports=${TRANSPORTS:-shm tcp}
[ -x "$build/tools/coll-run" ] || { echo "overlap: no $build/tools/coll-run (set BUILD)" >&2; exit 2; }
case $n in '' | *[!0-9]* | 0 | 1) echo "overlap: '$n' is not a rank count of 2 or more" >&2; exit 2 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/overlap.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${CC:-cc}" -O2 -I"$root/include" -o "$work/overlap" "$root/bench/overlap.c" \
  -L"$build/src" -lcoll -Wl,-rpath,"$build/src"

med() { sort -g | awk '{a[NR]=$1} END { if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'; }
echo "ranks $n, $reps runs each, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo
failed=0
for r in $(seq "$reps"); do
  for t in $transports; do
    # shellcheck disable=SC2086
    if COLL_TRANSPORT=$t timeout 600 "$build/tools/coll-run" -n "$n" --timeout 550 \
      ${COLL_RUN_ARGS:-} "$work/overlap" >"$work/out" 2>"$work/err"; then
      grep -h '^\[0\] overlap ' "$work/out" | sed 's/^\[0\] //' >>"$work/rows.$t" || true
      echo "overlap: $t run $r: $(tail -n 1 "$work/rows.$t" 2>/dev/null)" >&2
    else
      echo "overlap: $t run $r failed: $(tail -n 3 "$work/err")" >&2
      failed=1
    fi
  done
done
echo "| transport | bytes | compute ms | alone ms | done at the end of the compute | wait after, ms (median) | (max) |"
echo "|---|---|---|---|---|---|---|"
for t in $transports; do
  f=$work/rows.$t
  if [ ! -s "$f" ]; then
    echo "| $t | failed | | | | | |"
    continue
  fi
  grep -q VERIFY-FAILED "$f" && { echo "overlap: $t: a wrong result" >&2; failed=1; }
  done_k=$(awk '{k += $11; t += $13} END {printf "%d of %d (%.0f %%)", k, t, t ? 100 * k / t : 0}' "$f")
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$(awk 'NR==1 {print $5}' "$f")" \
    "$(awk 'NR==1 {print $7}' "$f")" "$(awk '{print $9}' "$f" | med)" "$done_k" \
    "$(awk '{print $15}' "$f" | med)" "$(awk '{print $17}' "$f" | sort -g | tail -n 1)"
done
exit $failed
