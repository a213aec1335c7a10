#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-ddp.sh: DistributedDataParallel with backend coll against gloo at 2
# and 4 local processes on three model sizes: step time, compute and
# allreduce alone, and how much of the allreduce hides behind backward
# (tools/bench-ddp.py says how each is measured). Medians of 5 runs per
# backend, interleaved in one sitting. Run it on a quiet machine.
#
#   tools/bench-ddp.sh [BUILD_DIR] [bench-ddp.py options...]
#
# BUILD_DIR (default: build) holds libcoll.so and the torch extension;
# PYTHON (default /usr/bin/python3) is the interpreter torch is installed
# for. Options pass on, e.g. --nproc 2 --sizes large --runs 3 --json f.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
export COLL_LIBRARY=${COLL_LIBRARY:-$build/src/libcoll.so}
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHON=$python
if [ ! -f "$(dirname "$COLL_LIBRARY")/_coll_torch.so" ]; then
  echo "bench-ddp: no _coll_torch.so beside $COLL_LIBRARY (build with COLL_BUILD_TORCH)" >&2
  exit 1
fi
exec "$python" "$root/tools/bench-ddp.py" "$@"
