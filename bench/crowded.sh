#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# crowded.sh: a host with more ranks than cores: the time of a small
# allreduce (default 4 bytes, in-place f32 SUM, bench/bench_loop.h) over
# shared memory and over TCP loopback, runs interleaved, medians, as one
# markdown table with their ratio (the goal: shared memory <= TCP's time).
#
#   bench/crowded.sh [N ...]             (ranks; default 8 16 32 64)
#
# TRANSPORTS  default "shm tcp" (the COLL_TRANSPORT of each column; the
#             ratio is the first over the second)
# BUILD       libcoll's build folder (default: build)
# REPS        runs of each (default 3)
# BENCH_SECONDS  timed loop per run (default 1.0); CROWDED_BYTES the size
#             (default 4; a multiple of 4)
# COLL_RUN_ARGS  more options for coll-run (its default binds rank r to CPU
#             r mod C, as the crowded case is measured)
#
# A run that fails or a wrong result makes the exit code 1. Run nothing
# else meanwhile: on a crowded host every other process is one more rank.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
reps=${REPS:-3}
ns=${*:-8 16 32 64}
transports=${TRANSPORTS:-shm tcp}
export BENCH_SECONDS=${BENCH_SECONDS:-1.0}
export BENCH_SIZES=${CROWDED_BYTES:-4}
[ -x "$build/tools/coll-run" ] || { echo "crowded: no $build/tools/coll-run (set BUILD)" >&2; exit 2; }
for n in $ns; do
  case $n in '' | *[!0-9]* | 0 | 1) echo "crowded: '$n' is not a rank count of 2 or more" >&2; exit 2 ;; esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/crowded.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${CC:-cc}" -O2 -I"$root/bench" -I"$root/include" -o "$work/coll_allreduce" \
  "$root/bench/coll_allreduce.c" -L"$build/src" -lcoll -Wl,-rpath,"$build/src"

med() { sort -g | awk '{a[NR]=$1} END { if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'; }
echo "time per $BENCH_SIZES-byte allreduce in us, medians of $reps, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), BENCH_SECONDS=$BENCH_SECONDS"
echo
failed=0
for n in $ns; do
  for r in $(seq "$reps"); do
    for t in $transports; do
      # shellcheck disable=SC2086
      if COLL_TRANSPORT=$t timeout 600 "$build/tools/coll-run" -n "$n" --timeout 550 \
        ${COLL_RUN_ARGS:-} "$work/coll_allreduce" "$t" >"$work/out" 2>"$work/err"; then
        # Rank 0's row: "bytes time_us algbw busbw [VERIFY-FAILED]".
        row=$(grep -hE "^\[0\] +$BENCH_SIZES " "$work/out" | sed -E "s/^\[0\] +//" || true)
        case $row in
          '') echo "crowded: $n ranks, $t, run $r printed no row" >&2; failed=1 ;;
          *VERIFY-FAILED*) echo "crowded: $n ranks, $t, run $r: a wrong result" >&2; failed=1 ;;
          *) echo "$row" | awk '{print $2}' >>"$work/t.$n.$t" ;;
        esac
        echo "crowded: $n ranks, $t, run $r: ${row:-no row}" >&2
      else
        echo "crowded: $n ranks, $t, run $r failed: $(tail -n 3 "$work/err")" >&2
        failed=1
      fi
    done
  done
done
set -- $transports
head="| ranks |"
rule="|---|"
for t in "$@"; do
  head="$head $t us |"
  rule="$rule---|"
done
[ $# -ge 2 ] && head="$head $1 / $2 |" && rule="$rule---|"
echo "$head"
echo "$rule"
for n in $ns; do
  line="| $n |"
  for t in "$@"; do
    v=$( [ -s "$work/t.$n.$t" ] && med <"$work/t.$n.$t" || echo failed)
    line="$line $v |"
    eval "v_$t=\$v"
  done
  if [ $# -ge 2 ]; then
    a=$(eval echo "\$v_$1")
    b=$(eval echo "\$v_$2")
    line="$line $(awk -v a="$a" -v b="$b" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }') |"
  fi
  echo "$line"
done
exit $failed
