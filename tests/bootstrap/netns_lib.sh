# SPDX-License-Identifier: Apache-2.0
# netns_lib.sh: hosts simulated by network namespaces, for the tests that
# source it. N namespaces ($NS), each with one interface (coll0, 10.77.0.i+1
# and fd77::i+1) on a bridge that lives in a hub namespace ($HUB). Every
# namespace is removed on exit, also when a step fails; where namespaces
# cannot be made, the test is skipped (exit 77).
#
#   . netns_lib.sh; netns_init 3; ...   (before: set -u)

PIDS=""
LOGDIR=""

skip() {
  echo "SKIP: $*"
  [ -n "$LOGDIR" ] && rm -rf "$LOGDIR"
  exit 77
}

fail() {
  echo "FAIL: $*"
  exit 1
}

netns_cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
  for n in $NS $HUB; do ip netns del "$n" 2>/dev/null; done
  # veth ends left in this namespace if a move failed halfway
  i=0
  for n in $NS; do
    ip link del "${TAG}v$i" 2>/dev/null
    i=$((i + 1))
  done
  rm -rf "$LOGDIR"
}

in_ns() {
  ns=$1
  shift
  ip netns exec "$ns" "$@"
}

netns_build() {
  ip -n "$HUB" link add br0 type bridge || return 1
  ip -n "$HUB" link set br0 type bridge forward_delay 0 2>/dev/null
  ip -n "$HUB" link set br0 up || return 1
  i=0
  for n in $NS; do
    ip netns add "$n" || return 1
    ip link add "${TAG}v$i" type veth peer name "${TAG}p$i" || return 1
    ip link set "${TAG}v$i" netns "$n" || return 1
    ip link set "${TAG}p$i" netns "$HUB" || return 1
    ip -n "$n" link set "${TAG}v$i" name coll0 || return 1
    ip -n "$n" link set lo up || return 1
    ip -n "$n" link set coll0 up || return 1
    ip -n "$HUB" link set "${TAG}p$i" master br0 up || return 1
    ip -n "$n" addr add "10.77.0.$((i + 1))/24" dev coll0 || return 1
    # nodad: the address is usable at once, no duplicate detection wait
    ip -n "$n" addr add "fd77::$((i + 1))/64" dev coll0 nodad || return 1
    i=$((i + 1))
  done
}

# netns_init N: N namespaces $TAG-0 .. $TAG-(N-1) and the hub.
netns_init() {
  TAG=cb$$
  HUB=$TAG-hub
  NS=""
  i=0
  while [ $i -lt "$1" ]; do
    NS="$NS $TAG-$i"
    i=$((i + 1))
  done
  NS=${NS# }
  LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/collnetns.XXXXXX") || exit 1
  [ "$(id -u)" = 0 ] || skip "creating network namespaces needs root"
  command -v ip >/dev/null 2>&1 || skip "iproute2 (ip) is not installed"
  ip netns add "$HUB" 2>/dev/null ||
    skip "cannot create network namespaces here (ip netns add failed)"
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP
  # A kernel without veth or bridge support is a limit of this machine, not
  # a failure of libcoll.
  netns_build || skip "cannot build veth pairs and a bridge here (kernel modules?)"
}

# netns_cut I: namespace I loses the network silently: its interface stays
# up, but nothing it sends reaches the bridge and nothing comes back.
netns_cut() {
  ip -n "$HUB" link set "${TAG}p$1" nomaster
}
