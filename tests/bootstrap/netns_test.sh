#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# netns_test.sh: env:// across hosts, simulated by network namespaces. Three
# namespaces, each with one interface (coll0) on a bridge that lives in a
# fourth namespace, run one env_rank each with COLL_SOCKET_IFNAME=coll0:
# once over IPv4, once over IPv6. Also checks that an interface without an
# address is refused with a clear message. Every namespace is removed
# afterwards, also when a step fails. Exits 77 (skip) where namespaces
# cannot be made.
#
#   netns_test.sh /path/to/env_rank
set -u

ENV_RANK=${1:?usage: netns_test.sh /path/to/env_rank}
. "$(dirname "$0")/netns_lib.sh"
[ -x "$ENV_RANK" ] || fail "$ENV_RANK is not an executable"
netns_init 3

# run_job MASTER_ADDR PORT: one env_rank per namespace; all must pass.
run_job() {
  master=$1
  port=$2
  PIDS=""
  i=0
  for n in $NS; do
    in_ns "$n" env RANK=$i WORLD_SIZE=3 MASTER_ADDR="$master" \
      MASTER_PORT="$port" COLL_SOCKET_IFNAME=coll0 COLL_TIMEOUT_MS=30000 \
      timeout 90 "$ENV_RANK" >"$LOGDIR/rank$i.log" 2>&1 &
    PIDS="$PIDS $!"
    i=$((i + 1))
  done
  ok=1
  i=0
  for p in $PIDS; do
    if ! wait "$p"; then
      echo "rank $i over $master failed:"
      ok=0
    fi
    sed "s/^/  rank $i: /" "$LOGDIR/rank$i.log"
    i=$((i + 1))
  done
  PIDS=""
  [ $ok = 1 ] || return 1
  [ "$(cat "$LOGDIR"/rank*.log | grep -c ' ok ')" = 3 ] || return 1
}

run_job 10.77.0.1 29500 || fail "env:// over IPv4 between namespaces"
echo "PASS: env:// over IPv4 (10.77.0.0/24), 3 namespaces"
run_job fd77::1 29501 || fail "env:// over IPv6 between namespaces"
echo "PASS: env:// over IPv6 (fd77::/64), 3 namespaces"

# An interface that exists but has no address is refused by name (a dummy
# interface, or a veth pair where the dummy driver is missing).
first=${NS%% *}
if ip -n "$first" link add bare0 type dummy 2>/dev/null ||
  ip -n "$first" link add bare0 type veth peer name bare1 2>/dev/null; then
  ip -n "$first" link set bare0 up
  in_ns "$first" env RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.77.0.2 \
    MASTER_PORT=29502 COLL_SOCKET_IFNAME=bare0 COLL_TIMEOUT_MS=2000 \
    timeout 30 "$ENV_RANK" --expect-fail "bare0: the interface has no IPv4" ||
    fail "an interface without an address was not refused clearly"
  echo "PASS: an interface without an address is refused"
else
  echo "NOTE: cannot add an interface here; the no-address check was not run"
fi
exit 0
