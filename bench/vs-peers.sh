#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# vs-peers.sh: libcoll against Open MPI and Gloo on this host, every library
# in one timing loop (bench/bench_loop.h: in-place f32 SUM allreduce, 4 KiB
# to 64 MiB), runs interleaved, medians printed as one markdown table: busbw
# in GB/s, and the time per call at 4 KiB.
#
#   bench/vs-peers.sh [N ...]          (rank counts; default: 2)
#
# VARIANTS    what to run (default "coll coll:COLL_TRANSPORT=tcp mpi_tcp
#             mpi_vader gloo"):
#               coll         libcoll as it comes (shared memory on one host)
#               coll:NAME=VALUE[:NAME=VALUE...]
#                            libcoll with those environment variables, e.g.
#                            coll:COLL_TRANSPORT=tcp (TCP over loopback, as
#                            across hosts), or coll:LD_LIBRARY_PATH=DIR to
#                            compare another build's library
#               mpi_tcp      Open MPI, TCP over loopback
#               mpi_vader    Open MPI, shared memory
#               gloo         Gloo's ring allreduce, as torch's gloo backend
#               gloo_bcube   Gloo's bcube allreduce
#               plain_tcp    bench/plain_ring.c: a ring over loopback TCP with
#                            nothing around it, the floor a TCP ring stands on
# BUILD       libcoll's build folder (default: build)
# REPS        runs of each variant (default 3)
# BENCH_SECONDS  timed loop per size (default 1.0); BENCH_SIZES=a,b,...
#             bytes instead of the five sizes
# OUT         keep each run's table there (<variant>.n<N>.r<rep>.txt, which
#             tools/plot-perf.py reads as a folder), and its stderr (.err)
#
# The table's header gives the machine's mode for the sitting: one core's
# memcpy rate at 16 MiB (bench/memcpy_rate.c) before and after the runs.
# Report it, and the Open MPI vader column, with any figure.
#
# Open MPI needs openmpi-bin and libopenmpi-dev (mpirun, mpicc), Gloo needs
# libgloo-dev. A variant whose tools are missing is not dropped: its cells
# read "skipped" with the reason below the table, and the exit code is 3; a
# run that fails reads "failed" and makes it 1 (a wrong result too). Run
# nothing else meanwhile: only ratios within one sitting mean anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
reps=${REPS:-3}
variants=${VARIANTS:-coll coll:COLL_TRANSPORT=tcp mpi_tcp mpi_vader gloo}
ns=${*:-2}
export BENCH_SECONDS=${BENCH_SECONDS:-1.0}
cc_bin=${CC:-cc}
cxx_bin=${CXX:-c++}

die() {
  echo "vs-peers: $*" >&2
  exit 2
}
[ -x "$build/tools/coll-run" ] || die "no $build/tools/coll-run: build libcoll first (cmake -S . -B build && cmake --build build -j), or set BUILD"
[ -e "$build/src/libcoll.so" ] || die "no $build/src/libcoll.so (set BUILD)"
for n in $ns; do
  case $n in '' | *[!0-9]* | 0 | 1) die "'$n' is not a rank count of 2 or more" ;; esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/vs-peers.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/runs}
mkdir -p "$out"

# Builds what each kind of variant needs, once; records why not otherwise.
declare -A skip_why=()
build_driver() { # kind: coll plain mpi gloo
  local log=$work/build-$1.log
  case $1 in
    coll)
      "$cc_bin" -O2 -I"$root/bench" -I"$root/include" -o "$work/coll_allreduce" \
        "$root/bench/coll_allreduce.c" -L"$build/src" -lcoll \
        -Wl,-rpath,"$build/src" >"$log" 2>&1 ||
        skip_why[coll]="building bench/coll_allreduce.c failed ($cc_bin): $(head -c 300 "$log")" ;;
    plain)
      "$cc_bin" -O3 -march=native -I"$root/bench" -o "$work/plain_ring" \
        "$root/bench/plain_ring.c" >"$log" 2>&1 ||
        skip_why[plain]="building bench/plain_ring.c failed ($cc_bin): $(head -c 300 "$log")" ;;
    mpi)
      if ! command -v mpirun >/dev/null 2>&1; then
        skip_why[mpi]="no mpirun (Debian: apt-get install openmpi-bin)"
      elif ! command -v mpicc >/dev/null 2>&1; then
        skip_why[mpi]="no mpicc (Debian: apt-get install libopenmpi-dev)"
      elif ! mpicc -O3 -march=native -I"$root/bench" -o "$work/mpi_allreduce" \
        "$root/bench/mpi_allreduce.c" >"$log" 2>&1; then
        skip_why[mpi]="mpicc failed (Debian: apt-get install libopenmpi-dev): $(head -c 300 "$log")"
      fi ;;
    gloo)
      "$cxx_bin" -O3 -march=native -std=c++17 -I"$root/bench" -o "$work/gloo_allreduce" \
        "$root/bench/gloo_allreduce.cc" -lgloo -pthread >"$log" 2>&1 ||
        skip_why[gloo]="building bench/gloo_allreduce.cc failed (Debian: apt-get install libgloo-dev): $(head -c 300 "$log")" ;;
  esac
}
kind() { # variant -> the driver it needs
  case $1 in
    coll | coll:*) echo coll ;;
    plain_tcp) echo plain ;;
    mpi_tcp | mpi_vader) echo mpi ;;
    gloo | gloo_bcube) echo gloo ;;
    *) die "unknown variant '$1' (coll, coll:NAME=VALUE, mpi_tcp, mpi_vader, gloo, gloo_bcube, plain_tcp)" ;;
  esac
}
declare -A built=()
for v in $variants; do
  k=$(kind "$v")
  [ -n "${built[$k]:-}" ] || { build_driver "$k"; built[$k]=1; }
done

mpi="mpirun --allow-run-as-root --oversubscribe --mca pml ob1"
run() { # variant n
  case $1 in
    coll) timeout 900 "$build/tools/coll-run" -n "$2" "$work/coll_allreduce" coll ;;
    coll:*)
      # One assignment per NAME=VALUE: split at each ':' that starts one.
      mapfile -t assigns < <(printf '%s\n' "${1#coll:}" |
        sed -E 's/:([A-Za-z_][A-Za-z0-9_]*=)/\n\1/g')
      env "${assigns[@]}" timeout 900 "$build/tools/coll-run" -n "$2" "$work/coll_allreduce" "$1" ;;
    mpi_tcp) timeout 900 $mpi -np "$2" -x BENCH_SECONDS -x BENCH_SIZES=${BENCH_SIZES:-} \
      --mca btl tcp,self --mca btl_tcp_if_include lo "$work/mpi_allreduce" mpi_tcp ;;
    mpi_vader) timeout 900 $mpi -np "$2" -x BENCH_SECONDS -x BENCH_SIZES=${BENCH_SIZES:-} \
      --mca btl vader,self "$work/mpi_allreduce" mpi_vader ;;
    gloo) timeout 900 "$work/gloo_allreduce" "$2" ring gloo ;;
    gloo_bcube) timeout 900 "$work/gloo_allreduce" "$2" bcube gloo_bcube ;;
    plain_tcp) timeout 900 "$work/plain_ring" "$2" plain_tcp ;;
  esac | sed 's/^\[[0-9]*\] //'
}
# A variant's file name: its text with anything but [A-Za-z0-9_.=:-] as _.
fname() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.=:-' '_'; }

# The machine's mode, before the runs (and after, below the loop).
"$cc_bin" -O2 -o "$work/memcpy_rate" "$root/bench/memcpy_rate.c" >"$work/build-memcpy.log" 2>&1 ||
  die "building bench/memcpy_rate.c failed ($cc_bin): $(head -c 300 "$work/build-memcpy.log")"
mode_before=$("$work/memcpy_rate")

nv=$(echo $variants | wc -w)
total=$((reps * $(echo $ns | wc -w) * nv))
step=0 start=$(date +%s) failed=0
for rep in $(seq "$reps"); do
  for n in $ns; do
    for v in $variants; do
      step=$((step + 1))
      f=$out/$(fname "$v").n$n.r$rep
      k=$(kind "$v")
      if [ -n "${skip_why[$k]:-}" ]; then
        echo "[$step/$total] rep $rep, $n ranks, $v: skipped" >&2
        continue
      fi
      echo "[$step/$total] rep $rep, $n ranks, $v ($(($(date +%s) - start)) s so far)" >&2
      if ! run "$v" "$n" >"$f.txt" 2>"$f.err" || ! grep -q '^ *[0-9]' "$f.txt"; then
        echo "   failed:" >&2
        tail -n 3 "$f.err" >&2
        mv "$f.txt" "$f.failed"
        failed=1
      fi
    done
  done
done

mode_after=$("$work/memcpy_rate")

med() {
  sort -g | awk '{a[NR]=$1} END {
    if (NR == 0) exit
    m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2
    if (m >= 1000) printf "%d", m + 0.5; else printf "%.3g", m }'
}
col() { # variant n bytes field
  { cat "$out/$(fname "$1").n$2".r*.txt 2>/dev/null || true; } |
    awk -v s="$3" -v f="$4" '$1 == s && !/VERIFY/ {print $f}' | med
}
label() {
  case $1 in
    coll) echo "coll" ;;
    coll:COLL_TRANSPORT=tcp) echo "coll TCP" ;;
    coll:*) echo "coll ${1#coll:}" ;;
    mpi_tcp) echo "Open MPI TCP" ;;
    mpi_vader) echo "Open MPI vader" ;;
    gloo) echo "Gloo" ;;
    gloo_bcube) echo "Gloo bcube" ;;
    plain_tcp) echo "plain TCP ring" ;;
  esac
}
sizes=${BENCH_SIZES:-4096,65536,1048576,16777216,67108864}
size_text() {
  awk -v b="$1" 'BEGIN {
    if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576
    else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024
    else printf "%d B", b }'
}
echo
echo "busbw in GB/s (4 KiB: time per allreduce), medians of $reps, $(date -u +%FT%TZ), $(nproc) CPUs, BENCH_SECONDS=$BENCH_SECONDS"
echo "machine's mode: one core's $mode_before before the runs, $mode_after after"
echo
printf "| ranks | bytes |"
for v in $variants; do printf " %s |" "$(label "$v")"; done
echo
printf "|---|---|"
for v in $variants; do printf -- "---|"; done
echo
for n in $ns; do
  for s in ${sizes//,/ }; do
    printf "| %s | %s |" "$n" "$(size_text "$s")"
    for v in $variants; do
      k=$(kind "$v")
      if [ -n "${skip_why[$k]:-}" ]; then
        printf " skipped |"
        continue
      fi
      if [ "$s" = 4096 ]; then cell=$(col "$v" "$n" "$s" 2) unit=" us"; else cell=$(col "$v" "$n" "$s" 4) unit=""; fi
      if [ -z "$cell" ]; then printf " failed |"; else printf " %s%s |" "$cell" "$unit"; fi
    done
    echo
  done
done
code=0
if [ "$failed" = 1 ]; then
  echo
  echo "failed runs: their stderr is in ${OUT:-a temporary folder (set OUT to keep it)}"
  code=1
fi
if grep -l VERIFY-FAILED "$out"/*.txt >/dev/null 2>&1; then
  echo "VERIFY FAILED in: $(grep -l VERIFY-FAILED "$out"/*.txt | xargs -n1 basename)"
  code=1
fi
if [ ${#skip_why[@]} -gt 0 ]; then
  echo
  for k in "${!skip_why[@]}"; do echo "skipped ($k): ${skip_why[$k]}"; done
  [ $code != 0 ] || code=3
fi
exit $code
