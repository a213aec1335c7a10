#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-ddp.sh: DistributedDataParallel step time with backend coll against
# gloo on the same model (examples/python/ddp_train.py), 2 and 4 local
# processes, as a ratio. Run it on a quiet machine for figures.
#
#   tools/bench-ddp.sh [BUILD_DIR] [ddp_train.py options...]
#
# BUILD_DIR (default: build) holds libcoll.so and the torch extension.
# STEPS (default 200), HIDDEN (layer width, default 1024) and BATCH
# (samples per rank, default 8: small, so communication weighs) size the run;
# PYTHON (default /usr/bin/python3) is the interpreter torch is installed
# for.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
export COLL_LIBRARY=${COLL_LIBRARY:-$build/src/libcoll.so}
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
if [ ! -f "$(dirname "$COLL_LIBRARY")/_coll_torch.so" ]; then
  echo "bench-ddp: no _coll_torch.so beside $COLL_LIBRARY (build with COLL_BUILD_TORCH)" >&2
  exit 1
fi

step_ms() { # backend nproc: the mean step time ddp_train.py reports
  "$python" "$root/examples/python/ddp_train.py" --backend "$1" --nproc "$2" \
    --steps "${STEPS:-200}" --hidden "${HIDDEN:-1024}" \
    --batch "${BATCH:-8}" "${@:3}" |
    sed -n 's/^mean step time \([0-9.]*\) ms.*/\1/p'
}

printf '%-6s %12s %12s %12s\n' ranks "coll ms" "gloo ms" "gloo/coll"
for n in 2 4; do
  echo "bench-ddp: $n ranks, coll ($SECONDS s so far)" >&2
  coll=$(step_ms coll "$n" "$@")
  echo "bench-ddp: $n ranks, gloo ($SECONDS s so far)" >&2
  gloo=$(step_ms gloo "$n" "$@")
  if [ -z "$coll" ] || [ -z "$gloo" ]; then
    echo "bench-ddp: a run at $n ranks reported no step time" >&2
    exit 1
  fi
  printf '%-6s %12s %12s %12s\n' "$n" "$coll" "$gloo" \
    "$(awk -v c="$coll" -v g="$gloo" 'BEGIN { printf "%.2f", g / c }')"
done
