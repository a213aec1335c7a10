#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tcp-profile.sh: where a TCP allreduce spends its calls, counted rather than
# timed, so that it holds on a loaded machine: per allreduce and rank, the
# system calls by name, the context switches (all of them, and how many of
# those were preemptions: switched out while still runnable; the rest are
# sleeps), the CPU time, and on rank 0 the bytes each send and receive call
# moved, for libcoll over TCP beside Open MPI's TCP BTL, both in bench/'s
# timing loop (bench_loop.h: in-place f32 SUM). The time per call (rank 0's
# table) is printed too: on a loaded machine it is only a rough figure.
#
#   bench/tcp-profile.sh [N [BYTES ...]]   (default: 4 ranks, 65536 1048576)
#
# VARIANTS   default "coll:COLL_TRANSPORT=tcp mpi_tcp"; coll:NAME=VALUE[:...]
#            runs libcoll with those variables (as in vs-peers.sh)
# BUILD      libcoll's build folder (default: build)
# BENCH_SECONDS  timed loop per size (default 2)
# PERF_RECORD=1  also samples where each variant's rank 0 spends its CPU
#            (perf record -e cpu-clock -g; the report's top lines follow)
# BYTES=1    also records rank 0's send and receive calls as they return
#            (the syscall exit tracepoints) and prints, per variant and
#            size, the calls that moved bytes, the bytes per such call and
#            the calls that moved nothing (EAGAIN), each way; needs python3.
#            Recording slows rank 0 a little, so it is off by default.
#
# Each rank runs under perf stat with the kernel's syscall tracepoints (root,
# or perf_event_paranoid <= 1); without them the script exits 3 (skipped).
# A run that fails makes the exit code 1. The counts cover the whole process (setup,
# warm-up, calibration); with BENCH_SECONDS of a second or more the timed
# loop dominates them. CPU time per call includes waiting that spins.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
n=${1:-4}
shift || true
sizes=${*:-65536 1048576}
variants=${VARIANTS:-coll:COLL_TRANSPORT=tcp mpi_tcp}
export BENCH_SECONDS=${BENCH_SECONDS:-2}

die() {
  echo "tcp-profile: $*" >&2
  exit 2
}
skip() {
  echo "tcp-profile: skipped: $*" >&2
  exit 3
}
command -v perf >/dev/null || skip "no perf (Debian: apt-get install linux-perf)"
perf stat -e raw_syscalls:sys_enter -o /dev/null -- true 2>/dev/null ||
  skip "perf cannot count the syscall tracepoints here (root, or kernel.perf_event_paranoid <= 1)"
[ -x "$build/tools/coll-run" ] || die "no $build/tools/coll-run (set BUILD)"

work=$(mktemp -d "${TMPDIR:-/tmp}/tcp-profile.XXXXXX")
trap 'rm -rf "$work"' EXIT

cc -O2 -I"$root/bench" -I"$root/include" -o "$work/coll_allreduce" \
  "$root/bench/coll_allreduce.c" -L"$build/src" -lcoll -Wl,-rpath,"$build/src"
have_mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
  mpicc -O3 -I"$root/bench" -o "$work/mpi_allreduce" \
    "$root/bench/mpi_allreduce.c" 2>"$work/mpicc.err"; then
  have_mpi=1
fi

calls=(sendmsg sendto recvmsg recvfrom read write readv writev poll ppoll
  epoll_wait epoll_pwait sched_yield futex)
events=raw_syscalls:sys_enter,context-switches,task-clock
for c in "${calls[@]}"; do events=$events,syscalls:sys_enter_$c; done
# Switches out of a thread that was still runnable: preemptions.
preempt="-e sched:sched_switch --filter prev_state==0"
# The socket calls whose bytes BYTES=1 counts: read and write are left out,
# both libraries use them on their wakeup descriptors (eventfd) too.
txcalls=(sendmsg sendto writev)
rxcalls=(recvmsg recvfrom readv)
exits=
for c in "${txcalls[@]}" "${rxcalls[@]}"; do
  exits=$exits${exits:+,}syscalls:sys_exit_$c
done

# Each rank under perf stat, its counts in $work/stat.<rank>.
cat >"$work/wrap.sh" <<EOF
#!/bin/sh
r=\${RANK:-\${OMPI_COMM_WORLD_RANK:-0}}
if [ -n "\${PERF_RECORD:-}" ] && [ "\$r" = 0 ]; then
  exec perf record -q -e cpu-clock -g -o "$work/rec.data" -- \\
    perf stat -x, -o "$work/stat.\$r" -e "$events" $preempt -- "\$@"
fi
if [ -n "\${BYTES:-}" ] && [ "\$r" = 0 ]; then
  exec perf record -q -e "$exits" -o "$work/io.data" -- \\
    perf stat -x, -o "$work/stat.\$r" -e "$events" $preempt -- "\$@"
fi
exec perf stat -x, -o "$work/stat.\$r" -e "$events" $preempt -- "\$@"
EOF
chmod +x "$work/wrap.sh"

run() { # variant bytes
  export BENCH_SIZES=$2
  case $1 in
    coll:*)
      mapfile -t assigns < <(printf '%s\n' "${1#coll:}" |
        sed -E 's/:([A-Za-z_][A-Za-z0-9_]*=)/\n\1/g')
      env "${assigns[@]}" timeout 600 "$build/tools/coll-run" -n "$n" \
        "$work/wrap.sh" "$work/coll_allreduce" "$1" ;;
    mpi_tcp)
      [ $have_mpi = 1 ] || return 3
      timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$n" \
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
        -x BENCH_SECONDS -x BENCH_SIZES -x PERF_RECORD -x BYTES \
        "$work/wrap.sh" "$work/mpi_allreduce" mpi_tcp ;;
    *) die "unknown variant '$1'" ;;
  esac
}

# The calls of one run: the timed ones rank 0 reported, plus the warm-up
# (2 x 20 up to 1 MiB, else 2 x 2), the four one-float ones and the check.
ncalls() { # stderr bytes
  awk -v b="$2" '/calls,/ { for (i = 1; i <= NF; i++) if ($i == "calls,") k = $(i-1) }
    END { w = b <= 1048576 ? 20 : 2; print k + 2 * w + 5 }' "$1"
}

printf '%s ranks, BENCH_SECONDS=%s, %s CPUs, load %s\n\n' "$n" \
  "$BENCH_SECONDS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
# Rank 0's bytes per send and receive call, from the exits it recorded.
io_bytes() { # perf.data calls
  perf script -i "$1" -F event,trace 2>/dev/null | python3 -c '
import sys
k = int(sys.argv[1]); tx = set(sys.argv[2].split()); acc = {}
for line in sys.stdin:
    f = line.split()
    if len(f) < 2 or not f[0].startswith("syscalls:sys_exit_"):
        continue
    name = f[0][len("syscalls:sys_exit_"):].rstrip(":")
    v = int(f[-1], 16)
    if v >= 1 << 63:
        v -= 1 << 64
    d = acc.setdefault("tx" if name in tx else "rx", [0, 0, 0])
    if v > 0:
        d[0] += 1; d[1] += v
    else:
        d[2] += 1
out = []
for w in ("tx", "rx"):
    n, b, z = acc.get(w, [0, 0, 0])
    out.append("%s %.1f calls of %.0f B, %.1f empty" % (
        "send" if w == "tx" else "recv", n / k, b / n if n else 0, z / k))
print("; ".join(out))
' "$2" "${txcalls[*]}"
}

printf '| variant | bytes | calls | us/call (rough) | syscalls | switches | preempted | CPU us |'
for c in "${calls[@]}"; do printf ' %s |' "$c"; done
printf '\n|---|---|---|---|---|---|---|---|'
for c in "${calls[@]}"; do printf -- '---|'; done
echo
failed=0
for s in $sizes; do
  for v in $variants; do
    rm -f "$work"/stat.*
    rc=0
    run "$v" "$s" >"$work/out" 2>"$work/err" || rc=$?
    if [ $rc != 0 ]; then
      if [ $rc = 3 ]; then
        echo "| $v | $s | skipped: no mpicc or mpirun |"
      else
        echo "| $v | $s | failed: $(tail -n 2 "$work/err" | tr '\n' ' ') |"
        failed=1
      fi
      continue
    fi
    k=$(ncalls "$work/err" "$s")
    us=$(sed -E 's/^\[[0-9]+\] //' "$work/out" | awk -v b="$s" '$1 == b { print $2 }')
    printf '| %s | %s | %s | %s |' "$v" "$s" "$k" "${us:-?}"
    # Per call and rank: the sum over ranks / (calls * ranks).
    awk -F, -v k="$k" -v n="$n" -v list="raw_syscalls:sys_enter context-switches sched:sched_switch task-clock ${calls[*]}" '
      $3 != "" { v[$3] += $1 }
      END {
        m = split(list, names, " ")
        for (i = 1; i <= m; i++) {
          e = names[i]
          if (i > 4) e = "syscalls:sys_enter_" e
          x = v[e] / (k * n)
          if (names[i] == "task-clock") x *= 1000 # ms -> us
          printf " %.1f |", x
        }
        printf "\n"
      }' "$work"/stat.*
    if [ -n "${BYTES:-}" ] && [ -s "$work/io.data" ]; then
      echo "$v $s: $(io_bytes "$work/io.data" "$k")" >>"$work/bytes"
      rm -f "$work/io.data"
    fi
    if [ -n "${PERF_RECORD:-}" ] && [ -s "$work/rec.data" ]; then
      perf report -i "$work/rec.data" --no-children --stdio 2>/dev/null |
        grep -E '^ +[0-9.]+%' | head -n 15 >"$work/top.$v.$s" || true
      mv "$work/rec.data" "$work/rec.$(echo "$v" | tr -c 'A-Za-z0-9_.-' _).$s"
    fi
  done
done
if [ -s "$work/bytes" ]; then
  echo
  echo "rank 0's send and receive calls per allreduce:"
  cat "$work/bytes"
fi
if [ -n "${PERF_RECORD:-}" ]; then
  for f in "$work"/top.*; do
    [ -e "$f" ] || continue
    echo
    echo "rank 0's CPU, ${f##*/top.}:"
    cat "$f"
  done
fi
exit $failed
