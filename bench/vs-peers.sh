#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# vs-peers.sh: libcoll against Open MPI in one sitting, in the peers' own
# timing loop (bench_common.h of the peer drivers: in-place f32 SUM
# allreduce, 4 KiB to 64 MiB), runs interleaved, medians printed as one
# table per rank count.
#
#   bench/vs-peers.sh [N ...]          (default: 2)
#
# PEERS_DIR   the peer drivers (default: ../shared/bench/peers beside this
#             checkout); read only, the drivers are built in a temp folder
# BUILD       libcoll's build folder (default: build)
# REPS        runs of each variant (default 3)
# VARIANTS    what to run (default: "coll mpi_tcp mpi_vader"); a variant
#             coll:NAME=VALUE[:NAME=VALUE...] runs libcoll with those
#             environment variables (e.g. coll:COLL_CHECK_MISMATCH=0, or
#             coll:COLL_TRANSPORT=tcp:LD_LIBRARY_PATH=/other/build/src to
#             compare another build's library)
#             plain_tcp is bench/plain_ring.c: a ring over loopback TCP
#             with nothing around it, the floor a TCP ring stands on
# BENCH_SECONDS  timed loop per size (default 1.0)
# OUT         keep each run's table there (<variant>.n<N>.r<rep>.txt, the
#             peers' format, which tools/plot-perf.py reads as a folder)
# Needs mpicc/mpirun (openmpi-bin, libopenmpi-dev). Run nothing else
# meanwhile: the figures are only worth their ratios within one sitting.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${PEERS_DIR:-$root/../shared/bench/peers}
build=${BUILD:-$root/build}
reps=${REPS:-3}
variants=${VARIANTS:-coll mpi_tcp mpi_vader}
ns=${*:-2}
export BENCH_SECONDS=${BENCH_SECONDS:-1.0}
[ -f "$peers/bench_common.h" ] || { echo "vs-peers: no bench_common.h in $peers (set PEERS_DIR)" >&2; exit 2; }
[ -x "$build/tools/coll-run" ] || { echo "vs-peers: no $build/tools/coll-run (set BUILD)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/runs}
mkdir -p "$out"
gcc -O2 -I"$peers" -I"$root/include" -o "$work/coll_allreduce" \
  "$root/bench/coll_allreduce.c" -L"$build/src" -lcoll -Wl,-rpath,"$build/src"
case $variants in *plain_tcp*)
  gcc -O3 -march=native -I"$peers" -o "$work/plain_ring" "$root/bench/plain_ring.c" ;;
esac
case $variants in *mpi*) mpicc -O3 -march=native -o "$work/mpi_allreduce" "$peers/mpi_allreduce.c" ;; esac

mpi="mpirun --allow-run-as-root --oversubscribe --mca pml ob1"
run() { # variant n
  case $1 in
    coll) timeout 900 "$build/tools/coll-run" -n "$2" "$work/coll_allreduce" coll ;;
    coll:*)
      # One assignment per NAME=VALUE: split at each ':' that starts one.
      mapfile -t assigns < <(printf '%s\n' "${1#coll:}" |
        sed -E 's/:([A-Za-z_][A-Za-z0-9_]*=)/\n\1/g')
      env "${assigns[@]}" timeout 900 "$build/tools/coll-run" -n "$2" "$work/coll_allreduce" "$1" ;;
    mpi_tcp) timeout 900 $mpi -np "$2" --mca btl tcp,self --mca btl_tcp_if_include lo "$work/mpi_allreduce" mpi_tcp ;;
    plain_tcp) timeout 900 "$work/plain_ring" "$2" plain_tcp ;;
    mpi_vader) timeout 900 $mpi -np "$2" --mca btl vader,self "$work/mpi_allreduce" mpi_vader ;;
    *) echo "vs-peers: unknown variant $1" >&2; return 2 ;;
  esac | sed 's/^\[[0-9]*\] //'
}
# A variant's file name: its text with anything but [A-Za-z0-9_.=:-] as _.
fname() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.=:-' '_'; }
for rep in $(seq "$reps"); do
  for n in $ns; do
    for v in $variants; do
      echo ">> rep $rep n=$n $v" >&2
      f=$(fname "$v")
      run "$v" "$n" > "$out/$f.n$n.r$rep.txt" 2> "$out/$f.n$n.r$rep.err" ||
        { echo "   failed (rc $?):" >&2; tail -3 "$out/$f.n$n.r$rep.err" >&2; }
    done
  done
done

med() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "n/a"; else printf "%.3g", (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { cat "$out/$(fname "$1").n$2".r*.txt 2>/dev/null | awk -v s="$3" -v f="$4" '$1 == s && !/VERIFY/ {print $f}' | med; }
echo "date: $(date -u +%FT%TZ)  nproc: $(nproc)  reps: $reps  BENCH_SECONDS: $BENCH_SECONDS"
for n in $ns; do
  for what in "4 busbw_GB/s" "2 time_us"; do
    set -- $what
    echo
    echo "### n=$n: median $2 over $reps runs"
    printf "| bytes |"; for v in $variants; do printf " %s |" "$v"; done; echo
    printf "|---|"; for v in $variants; do printf -- "---|"; done; echo
    for s in 4096 65536 1048576 16777216 67108864; do
      printf "| %s |" $s; for v in $variants; do printf " %s |" "$(col "$v" "$n" "$s" "$1")"; done; echo
    done
  done
done
if grep -l VERIFY-FAILED "$out"/*.txt >/dev/null 2>&1; then
  echo "VERIFY FAILED in: $(grep -l VERIFY-FAILED "$out"/*.txt | xargs -n1 basename)"; exit 1
fi
