#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# multihost.sh: allreduce across hosts on one machine. Each host is a
# network namespace with one interface (coll0) on a bridge; both ends of
# every link are shaped with tbf to RATE_MBIT, so a host sends and receives
# at most the link rate. Each layout HxM runs M ranks in each of H hosts,
# every library in bench/'s timing loop (bench_loop.h): libcoll's driver
# (bench/coll_allreduce.c) for each libcoll variant and Open MPI's
# (bench/mpi_allreduce.c); then one table of busbw against the link rate.
#
#   bench/multihost.sh [HxM ...]        (default: 4x1 2x2)
#
# RATE_MBIT   link rate in Mbit/s (default 1000)
# ORDER       block (ranks 0..M-1 on host 0, ...; default) or interleave
#             (rank r on host r mod H: the numbering the host order undoes)
# VARIANTS    what to run (default "coll coll:COLL_ALGO=ring mpi"); coll:N=V
#             runs libcoll with that variable; coll:COLL_ALGO=ring is the flat
#             host-ordered ring, auto picks the two-level allreduce when every
#             host holds several ranks
# TCP_CC      TCP congestion control inside every host (default: what the
#             machine has; e.g. cubic or bbr, from
#             net.ipv4.tcp_available_congestion_control). It matters for
#             long transfers over tbf: see docs/performance.md, across hosts.
#             For libcoll's connections alone, the variant
#             coll:COLL_TCP_CONGESTION=cubic chooses without it.
# REPS        runs of each variant (default 1; medians when more)
# BENCH_SECONDS  timed loop per size (default 0.5)
# BUILD       libcoll's build folder (default: build)
# OUT         keep each run's table there (<layout>.<variant>.r<rep>.txt, the
#             variant with anything but [A-Za-z0-9_.=:-] as _)
#
# Needs root and iproute2 (ip netns, tc); refuses clearly without them.
# Open MPI needs openmpi-bin and libopenmpi-dev (mpirun, mpicc); without
# them the mpi variant's cells read "skipped" with the reason, and the exit
# code is 3; a run that fails reads "failed" and makes it 1.
# Every namespace is removed afterwards, also after a failure or Ctrl-C.
# A run killed outright (SIGKILL, a lost session) cannot clean up: its
# namespaces and its link in this namespace (cm<pid>r, 10.78.0.254) would
# shadow the next run's addresses. So a run first removes every cm<pid>
# set whose run is gone (no process <pid>, or one that is not this script),
# killing what still runs inside them. Runs on one machine take turns
# (they share 10.78.0.0/24): a run waits up to 150 s for the one before.
# Open MPI (mpi) runs one daemon per host, started by an rsh stand-in that
# enters the host's namespace, so it sees one node per host as on separate
# machines; over TCP only (--mca btl tcp,self): its shared-memory btl
# (vader) crashed at startup here with two daemons on one machine, so
# within a host it uses loopback TCP, where libcoll (unless
# COLL_TRANSPORT=tcp) uses shared memory.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
rate=${RATE_MBIT:-1000}
order=${ORDER:-block}
reps=${REPS:-1}
variants=${VARIANTS:-coll coll:COLL_ALGO=ring mpi}
tcp_cc=${TCP_CC:-}
layouts=${*:-4x1 2x2}
export BENCH_SECONDS=${BENCH_SECONDS:-0.5}

die() {
  echo "multihost: $*" >&2
  exit 2
}

[ "$(id -u)" = 0 ] || die "network namespaces need root (run it as root, or in a container with CAP_NET_ADMIN and CAP_SYS_ADMIN)"
command -v ip >/dev/null 2>&1 || die "iproute2's ip is not installed (apt-get install iproute2)"
command -v tc >/dev/null 2>&1 || die "iproute2's tc is not installed (apt-get install iproute2)"

# The cm<pid> sets of runs that are gone (see the top).
run_alive() { # pid
  [ "$1" != $$ ] && [ -r "/proc/$1/cmdline" ] &&
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -q 'multihost\.sh'
}
netns_names() { ip netns list 2>/dev/null | awk '{print $1}'; }
link_names() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'; }
sweep_stale() {
  for p in $({ netns_names; link_names; } | sed -n 's/^cm\([0-9][0-9]*\)[-a-z].*/\1/p' | sort -u); do
    run_alive "$p" && continue
    for n in $(netns_names | grep "^cm$p-"); do
      for q in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$q" 2>/dev/null; done
      ip netns del "$n" 2>/dev/null
    done
    for d in $(link_names | grep "^cm${p}[a-z]"); do ip link del "$d" 2>/dev/null; done
    echo "multihost: removed the namespaces and links of run $p, which is gone" >&2
  done
}
sweep_stale
# One run at a time: the lock goes with this process, also when it is
# killed (what it starts does not inherit fd 9).
exec 9>/tmp/coll-multihost.lock
flock -w 150 9 || die "another run of multihost.sh held /tmp/coll-multihost.lock for 150 s (runs share 10.78.0.0/24 and take turns)"

[ -e "$build/src/libcoll.so" ] || die "no $build/src/libcoll.so (build libcoll first, or set BUILD)"
case $rate in '' | *[!0-9]*) die "RATE_MBIT='$rate' is not a number of Mbit/s" ;; esac
case $order in block | interleave) ;; *) die "ORDER='$order' is neither block nor interleave" ;; esac
for l in $layouts; do
  case $l in [1-9]*x[1-9]*) ;; *) die "layout '$l' is not HOSTSxRANKS (4x1, 2x2)" ;; esac
done
if [ -n "$tcp_cc" ]; then
  case " $(cat /proc/sys/net/ipv4/tcp_available_congestion_control) " in
    *" $tcp_cc "*) ;;
    *) die "TCP_CC='$tcp_cc' is not in net.ipv4.tcp_available_congestion_control ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control))" ;;
  esac
fi

tag=cm$$
hub=$tag-hub
nsmax=0
pids=""
work=$(mktemp -d "${TMPDIR:-/tmp}/multihost.XXXXXX") || die "mktemp failed"
out=${OUT:-$work/runs}
mkdir -p "$out"
# libcoll's driver, in bench/'s timing loop like Open MPI's.
"${CC:-cc}" -O2 -I"$root/bench" -I"$root/include" -o "$work/coll_allreduce" \
  "$root/bench/coll_allreduce.c" -L"$build/src" -lcoll -Wl,-rpath,"$build/src" ||
  die "cannot build bench/coll_allreduce.c"

cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  i=0
  while [ $i -lt $nsmax ]; do
    ip netns del "$tag-$i" 2>/dev/null
    ip link del "${tag}v$i" 2>/dev/null
    i=$((i + 1))
  done
  ip netns del "$hub" 2>/dev/null
  ip link del "${tag}r" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$hub" 2>/dev/null || die "cannot create network namespaces here (ip netns add failed)"
ip -n "$hub" link add br0 type bridge || die "cannot create a bridge (kernel module?)"
ip -n "$hub" link set br0 type bridge forward_delay 0 2>/dev/null
ip -n "$hub" link set br0 up

# tbf on one end of a link: rate, a burst of 1/250 s at that rate (at least
# 64 KiB, so a TSO segment passes), and a queue of 20 ms.
shape() { # netns dev
  burst=$((rate * 1000000 / 8 / 250))
  [ $burst -ge 65536 ] || burst=65536
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "${rate}mbit" \
    burst "$burst" latency 20ms
}

# Hosts 0..n-1 (made once, reused by later layouts).
hosts() { # n
  while [ $nsmax -lt "$1" ]; do
    i=$nsmax
    n=$tag-$i
    ip netns add "$n" || die "ip netns add $n failed"
    nsmax=$((nsmax + 1))
    ip link add "${tag}v$i" type veth peer name "${tag}p$i" || die "cannot create a veth pair"
    ip link set "${tag}v$i" netns "$n" && ip link set "${tag}p$i" netns "$hub" &&
      ip -n "$n" link set "${tag}v$i" name coll0 && ip -n "$n" link set lo up &&
      ip -n "$n" link set coll0 up &&
      ip -n "$hub" link set "${tag}p$i" master br0 up &&
      ip -n "$n" addr add "10.78.0.$((i + 1))/24" dev coll0 ||
      die "cannot set up host $i"
    shape "$n" coll0 && shape "$hub" "${tag}p$i" || die "tc tbf failed on host $i's link"
    # A namespace starts with the machine's congestion control; TCP_CC sets
    # this host's alone.
    [ -z "$tcp_cc" ] || ip netns exec "$n" sysctl -qw net.ipv4.tcp_congestion_control="$tcp_cc" ||
      die "cannot set the congestion control of host $i to $tcp_cc"
  done
}

host_of() { # rank H M
  if [ "$order" = interleave ]; then echo $(($1 % $2)); else echo $(($1 / $3)); fi
}

port=29600
run_coll() { # H M variant logfile
  H=$1 M=$2 v=$3 log=$4
  world=$((H * M))
  port=$((port + 1))
  # One assignment per NAME=VALUE: split at each ':' that starts one. They
  # come last, so a variant may override the defaults before them.
  assigns=()
  case $v in
    coll:*) mapfile -t assigns < <(printf '%s\n' "${v#coll:}" |
      sed -E 's/:([A-Za-z_][A-Za-z0-9_]*=)/\n\1/g') ;;
  esac
  pids=""
  r=0
  while [ $r -lt $world ]; do
    h=$(host_of $r "$H" "$M")
    ip netns exec "$tag-$h" env RANK=$r WORLD_SIZE=$world LOCAL_RANK=0 \
      MASTER_ADDR=10.78.0.1 MASTER_PORT=$port COLL_SOCKET_IFNAME=coll0 \
      COLL_TIMEOUT_MS=120000 "${assigns[@]}" \
      timeout 900 "$work/coll_allreduce" "$v" \
      >"$work/rank$r.out" 2>"$work/rank$r.err" 9>&- &
    pids="$pids $!"
    r=$((r + 1))
  done
  ok=0
  for p in $pids; do wait "$p" || ok=1; done
  pids=""
  cp "$work/rank0.out" "$log"
  [ $ok = 0 ] || { tail -n 3 "$work"/rank*.err >&2; return 1; }
}

mpi_ready=0 mpi_skip=""
mpi_prepare() {
  [ $mpi_ready = 0 ] || return 0
  mpi_ready=2
  if ! command -v mpirun >/dev/null 2>&1; then
    mpi_skip="no mpirun (Debian: apt-get install openmpi-bin)"
    return 1
  fi
  if ! command -v mpicc >/dev/null 2>&1 ||
    ! mpicc -O3 -I"$root/bench" -o "$work/mpi_allreduce" "$root/bench/mpi_allreduce.c" 2>"$work/mpicc.err"; then
    mpi_skip="no working mpicc (Debian: apt-get install libopenmpi-dev) $(head -c 200 "$work/mpicc.err" 2>/dev/null)"
    return 1
  fi
  # mpirun stays here and reaches its daemons over an unshaped link of
  # this namespace to the bridge (10.78.0.254); each host's daemon is
  # started inside the host by an rsh stand-in (ip netns exec), so Open MPI
  # sees one node per host, as on real machines.
  ip link add "${tag}r" type veth peer name "${tag}q" &&
    ip link set "${tag}q" netns "$hub" &&
    ip -n "$hub" link set "${tag}q" master br0 up &&
    ip addr add 10.78.0.254/24 dev "${tag}r" && ip link set "${tag}r" up ||
    { mpi_skip="cannot link this namespace to the bridge"; return 1; }
  cat >"$work/netns_rsh" <<EOF
#!/bin/sh
# rsh stand-in: "netns_rsh [options] 10.78.0.K command..." runs the command
# in host K-1's namespace.
while [ \$# -gt 0 ]; do
  case \$1 in -*) shift ;; *) break ;; esac
done
h=\${1##*.}
shift
exec ip netns exec $tag-\$((h - 1)) /bin/sh -c "\$*"
EOF
  chmod +x "$work/netns_rsh"
  mpi_ready=1
}

run_mpi() { # H M logfile
  mpi_prepare || return 2
  [ $mpi_ready = 1 ] || return 2
  : >"$work/hostfile"
  i=0
  while [ $i -lt "$1" ]; do
    echo "10.78.0.$((i + 1)) slots=$2" >>"$work/hostfile"
    i=$((i + 1))
  done
  map=slot
  [ "$order" = interleave ] && map=node
  # Every "host" is a namespace of this machine, so all ranks share its
  # cores, but each daemon sees a node of its own with a free core per
  # rank, and Open MPI's ranks busy-poll without yielding: with more ranks
  # than cores, each step waited for a scheduler slice (4.2-5.5 ms per
  # 4 KiB allreduce at 4x1 on 2 cores, 70 us with yielding). Real hosts
  # have their own cores; mpi_yield_when_idle gives Open MPI here what it
  # would have there.
  timeout 900 mpirun --allow-run-as-root --oversubscribe -np $(($1 * $2)) \
    --hostfile "$work/hostfile" --map-by $map -x BENCH_SECONDS -x BENCH_SIZES="${BENCH_SIZES:-}" \
    --mca plm_rsh_agent "$work/netns_rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include 10.78.0.0/24 --mca pml ob1 \
    --mca mpi_yield_when_idle 1 \
    --mca btl tcp,self --mca btl_tcp_if_include 10.78.0.0/24 \
    "$work/mpi_allreduce" mpi >"$3" 2>"$work/mpi.err" 9>&- ||
    { grep -v "^ *$" "$work/mpi.err" | head -${MH_ERR_LINES:-8} >&2; return 1; }
}

# A variant's file name: its text with anything but [A-Za-z0-9_.=:-] as _
# (a setting may hold a path).
fname() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.=:-' '_'; }
for v in $variants; do
  case $v in mpi | coll | coll:*) ;; *) die "unknown variant '$v' (coll, coll:NAME=VALUE, mpi)" ;; esac
done
total=$(($(echo $layouts | wc -w) * reps * $(echo $variants | wc -w)))
step=0 start=$(date +%s) failed=0
for l in $layouts; do
  H=${l%x*} M=${l#*x}
  hosts "$H"
  for rep in $(seq "$reps"); do
    for v in $variants; do
      step=$((step + 1))
      log=$out/$l.$(fname "$v").r$rep.txt
      echo "[$step/$total] $l ($order) rep $rep $v ($(($(date +%s) - start)) s so far)" >&2
      case $v in
        mpi)
          run_mpi "$H" "$M" "$log"
          rc=$?
          if [ $rc = 2 ]; then
            echo "   skipped: $mpi_skip" >&2
          elif [ $rc != 0 ]; then
            echo "   failed" >&2
            failed=1
            rm -f "$log"
          fi ;;
        *) run_coll "$H" "$M" "$v" "$log" || { echo "   failed" >&2; failed=1; rm -f "$log"; } ;;
      esac
    done
  done
done

med() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "n/a"; else printf "%.4g", (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { { cat "$out/$1.$(fname "$2")".r*.txt 2>/dev/null || true; } | awk -v s="$3" -v f="$4" '$1 == s && !/VERIFY/ {print $f}' | med; }
link=$(awk -v r="$rate" 'BEGIN {printf "%.4g", r / 8000}')
echo "date: $(date -u +%FT%TZ)  nproc: $(nproc)  link: $rate Mbit/s = $link GB/s  order: $order  reps: $reps  BENCH_SECONDS: $BENCH_SECONDS  congestion control: $(ip netns exec "$tag-0" cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo '?')"
for l in $layouts; do
  echo
  echo "### $l: busbw GB/s (x link rate); 4 KiB: time us"
  printf "| bytes |"; for v in $variants; do printf " %s |" "$v"; done; echo
  printf "|---|"; for v in $variants; do printf -- "---|"; done; echo
  for s in $(echo "${BENCH_SIZES:-4096,65536,1048576,16777216,67108864}" | tr , " "); do
    printf "| %s |" $s
    for v in $variants; do
      b=$(col "$l" "$v" $s 4)
      t=$(col "$l" "$v" $s 2)
      if [ "$v" = mpi ] && [ -n "$mpi_skip" ]; then printf " skipped |"
      elif [ "$b" = n/a ]; then printf " failed |"
      elif [ $s = 4096 ]; then printf " %s us |" "$t"
      else printf " %s (%sx) |" "$b" "$(awk -v b="$b" -v k="$link" 'BEGIN {printf "%.2f", b / k}')"
      fi
    done
    echo
  done
done
code=0
[ "$failed" = 0 ] || { echo; echo "some runs failed (see above)"; code=1; }
if grep -l VERIFY-FAILED "$out"/*.txt >/dev/null 2>&1; then
  echo "VERIFY FAILED in: $(grep -l VERIFY-FAILED "$out"/*.txt | xargs -n1 basename)"
  code=1
fi
if [ -n "$mpi_skip" ]; then
  echo
  echo "skipped (mpi): $mpi_skip"
  [ $code != 0 ] || code=3
fi
exit $code
