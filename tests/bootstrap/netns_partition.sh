#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# netns_partition.sh: a silent network cut during setup, between hosts
# simulated by network namespaces (netns_lib.sh). A job of four ranks with
# ranks 0, 1 and 2 in three namespaces and rank 3 never started:
#   - rank 2 is cut off after it joined, while every rank waits for rank 3;
#   - rank 2 is cut off before it starts.
# Every rank must fail with COLL_ERR_TIMEOUT, no earlier than the timeout
# and no later than the timeout plus 2 s (and a margin for a loaded
# machine). Prints when each rank ended and why. Exits 77 (skip) where
# namespaces cannot be made.
#
#   netns_partition.sh /path/to/env_rank [TIMEOUT_MS]
set -u

ENV_RANK=${1:?usage: netns_partition.sh /path/to/env_rank [TIMEOUT_MS]}
T=${2:-4000}
SLACK=1000 # ms beyond the promised 2 s, for a loaded machine
. "$(dirname "$0")/netns_lib.sh"
[ -x "$ENV_RANK" ] || fail "$ENV_RANK is not an executable"
netns_init 3

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# run_cut PORT WHEN: ranks 0-2 of 4 on 10.77.0.1:PORT; rank 2 is cut off
# WHEN ("after 1500" ms, or "before" it starts). Checks every rank's end.
run_cut() {
  port=$1
  when=$2
  PIDS=""
  [ "$when" = before ] && netns_cut 2
  t0=$(now_ms)
  i=0
  for n in $NS; do
    in_ns "$n" env RANK=$i WORLD_SIZE=4 MASTER_ADDR=10.77.0.1 \
      MASTER_PORT="$port" COLL_SOCKET_IFNAME=coll0 COLL_TIMEOUT_MS="$T" \
      COLL_BACKEND=cpu COLL_AUTH_TOKEN=netns-partition \
      sh -c '"$1" --expect-fail "" >"$2" 2>&1; echo $? >"$2.rc"; date +%s%N >"$2.end"' \
      - "$ENV_RANK" "$LOGDIR/rank$i.log" &
    PIDS="$PIDS $!"
    i=$((i + 1))
  done
  if [ "$when" != before ]; then
    sleep "$(echo "$when" | awk '{ print $2 / 1000 }')"
    netns_cut 2
  fi
  for p in $PIDS; do wait "$p"; done
  PIDS=""
  ok=1
  for i in 0 1 2; do
    f=$LOGDIR/rank$i.log
    end=$(($(cat "$f.end") / 1000000))
    took=$((end - t0))
    echo "  rank $i ended after $took ms (timeout $T): $(tail -n 1 "$f")"
    grep -q "failed as expected: ERR_TIMEOUT: " "$f" || ok=0
    [ "$(cat "$f.rc")" = 0 ] || ok=0
    [ $took -ge $((T - 200)) ] || ok=0
    [ $took -le $((T + 2000 + SLACK)) ] || ok=0
  done
  [ $ok = 1 ]
}

run_cut 29610 "after 1500" || fail "rank 2 cut off after it joined"
echo "PASS: rank 2 cut off after it joined: every rank by the timeout + 2 s"
ip -n "$HUB" link set "${TAG}p2" master br0
run_cut 29611 before || fail "rank 2 cut off before it started"
echo "PASS: rank 2 cut off before it started: every rank by the timeout + 2 s"
exit 0
