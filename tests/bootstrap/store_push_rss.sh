#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# store_push_rss.sh: a stranger pushes into the rendezvous store of a real
# job and rank 0's memory is measured. Three ranks of a job of four wait for
# the fourth (so rank 0 keeps serving the store) while store_push, a client
# from outside the job, offers MIB MiB of values. The job has no token (with
# one, the stranger is refused at its first message): the store's caps
# alone must keep rank 0's resident memory from growing by 64 MiB or more. Prints the figures and rank 0's
# warnings about the refused client.
#
#   store_push_rss.sh ENV_RANK STORE_PUSH [MIB]
#
# MIB defaults to 1024, or 256 with TEST_QUICK set (sanitizer builds).
set -u

ENV_RANK=${1:?usage: store_push_rss.sh ENV_RANK STORE_PUSH [MIB]}
PUSH=${2:?usage: store_push_rss.sh ENV_RANK STORE_PUSH [MIB]}
if [ -n "${TEST_QUICK:-}" ]; then MIB=${3:-256}; else MIB=${3:-1024}; fi
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/collpush.XXXXXX") || exit 2
PIDS=""

cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$LOGDIR"
}
trap cleanup EXIT
trap 'exit 2' INT TERM HUP

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
  exit 2
for r in 0 1 2; do
  env RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" \
    COLL_BACKEND=cpu COLL_TIMEOUT_MS=600000 \
    "$ENV_RANK" >"$LOGDIR/rank$r.log" 2>&1 &
  PIDS="$PIDS $!"
done
PID0=${PIDS# }
PID0=${PID0%% *}
# Rank 0 serves the store once it started; store_push retries until then,
# but the first reading of rank 0's memory should come after it.
sleep 1
"$PUSH" 127.0.0.1 "$PORT" --mib "$MIB" --pid "$PID0" --max-growth-mib 64
rc=$?
echo "rank 0's warnings about the stranger (the first lines):"
grep -m 3 "refus" "$LOGDIR/rank0.log" | sed 's/^/  /'
exit $rc
