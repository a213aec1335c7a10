#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# netns_faults.sh: a network cut in the middle of a job, between hosts
# simulated by network namespaces (tests/bootstrap/netns_lib.sh). Ranks
# stream checked allreduces (fault_tool rank) with a heartbeat timeout of
# T; once every rank streams, one namespace loses the network silently:
#   - four namespaces, one rank each (TCP between all): namespace 2 is cut;
#     ranks 0, 1 and 3 must name rank 2 unresponsive, rank 2 one of them;
#   - two namespaces, two ranks each (shared memory within a namespace, TCP
#     between: the two-level path): namespace 1 (ranks 1 and 3) is cut;
#     every rank must name a rank of the other namespace unresponsive.
# Every rank must end with COLL_ERR_PEER_LOST no sooner than T after the
# cut and within 1.1 T plus SLACK ms (a loaded machine), and never report
# a wrong sum. Prints when each rank ended and why. Exits 77 (skip) where
# namespaces cannot be made (not root, no iproute2, no veth or bridge).
#
#   netns_faults.sh /path/to/fault_tool [T_MS]
set -u

TOOL=${1:?usage: netns_faults.sh /path/to/fault_tool [T_MS]}
T=${2:-2000}
SLACK=${SLACK:-2000}
. "$(dirname "$0")/../bootstrap/netns_lib.sh"
[ -x "$TOOL" ] || fail "$TOOL is not an executable"
netns_init 4

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start_ranks PORT NSLIST: rank i in the i-th namespace of NSLIST (names may
# repeat: ranks of one namespace share its host), the store on the first.
start_ranks() {
  port=$1
  shift
  world=$#
  PIDS=""
  i=0
  for n in "$@"; do
    in_ns "$n" env RANK=$i WORLD_SIZE="$world" MASTER_ADDR=10.77.0.1 \
      MASTER_PORT="$port" COLL_SOCKET_IFNAME=coll0 COLL_TIMEOUT_MS=60000 \
      COLL_HEARTBEAT_TIMEOUT_MS="$T" COLL_BACKEND=cpu \
      COLL_AUTH_TOKEN=netns-faults COLL_DEBUG=NONE \
      timeout 120 "$TOOL" rank 60 >"$LOGDIR/rank$i.log" 2>&1 &
    PIDS="$PIDS $!"
    i=$((i + 1))
  done
}

# wait_streaming N: until every rank's log says it streams (60 s at most).
wait_streaming() {
  k=0
  while [ $k -lt 600 ]; do
    n=$(cat "$LOGDIR"/rank*.log 2>/dev/null | grep -c '^streaming')
    [ "$n" -ge "$1" ] && return 0
    sleep 0.1
    k=$((k + 1))
  done
  return 1
}

# check NAME CUT WORLD WANT...: every rank ended PEER_LOST naming one of
# the ranks its pattern allows, within the bounds after CUT (ms).
# WANT_i is a grep -E pattern for rank i's origin.
check() {
  name=$1
  cut=$2
  world=$3
  shift 3
  for p in $PIDS; do wait "$p"; done
  PIDS=""
  ok=1
  lo=$T
  hi=$((T * 11 / 10 + SLACK))
  i=0
  for want in "$@"; do
    f=$LOGDIR/rank$i.log
    line=$(grep -E '^(ended|ok|WRONG|init)' "$f" | tail -n 1)
    wall=$(echo "$line" | sed -n 's/.*wall \([0-9]*\).*/\1/p')
    took=$(( ${wall:-0} - cut ))
    echo "  $name: rank $i after $took ms (T $T): $line"
    echo "$line" | grep -q '^ended ERR_PEER_LOST' || ok=0
    echo "$line" | grep -Eq "rank ($want) unresponsive" || ok=0
    [ "$took" -ge "$lo" ] && [ "$took" -le "$hi" ] || ok=0
    i=$((i + 1))
  done
  [ $ok = 1 ] || fail "$name: a rank ended wrong or out of its bounds"
  echo "PASS: $name"
}

set -- $NS
N0=$1 N1=$2 N2=$3 N3=$4

# Four hosts, one rank each; host 2 is cut.
start_ranks 29610 "$N0" "$N1" "$N2" "$N3"
wait_streaming 4 || fail "the four-host job never streamed"
sleep 0.3
cut=$(now_ms)
netns_cut 2
check "four hosts, host 2 cut" "$cut" 4 2 2 "0|1|3" 2

# Two hosts, two ranks each (even ranks on host 0); host 1 is cut. The cut
# namespace's interface is put back first.
ip -n "$HUB" link set "${TAG}p2" master br0
start_ranks 29611 "$N0" "$N1" "$N0" "$N1"
wait_streaming 4 || fail "the two-host job never streamed"
sleep 0.3
cut=$(now_ms)
netns_cut 1
check "two hosts of two ranks, host 1 cut" "$cut" 4 "1|3" "0|2" "1|3" "0|2"
exit 0
