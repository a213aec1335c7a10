#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl-cost.sh: the per-call cost of NCCL comms on the stand-in (no GPU
# needed), libcoll at two commits side by side, in one run so that both see
# the same machine: coll-perf-standin --cost (tests/nccl/perf_standin.c),
# alternated ROUNDS times, each row the median over the rounds.
#
#   tools/nccl-cost.sh --build-before COMMIT DIR
#       unpacks COMMIT's libcoll into DIR and builds coll-perf-standin there
#       with this tree's stand-in, coll-perf and NCCL table (so an older
#       libcoll is measured on the same stand-in and harness)
#   tools/nccl-cost.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#       runs both (default 5 rounds) and prints, per size, each one's issue
#       and done times (us, until coll_iallreduce returned and until
#       coll_wait returned) and what each adds to NCCL's own done time (the
#       stand-in's NCCL driven as torch drives a nonblocking comm, measured
#       call by call beside it in the same binary, so a busy machine shows
#       in both); those two differences are the figures to compare.
#
# COST_ARGS overrides the coll-perf arguments (default: 2 ranks, 8 B and
# 1 MiB, 500 calls after 20 of warm-up).
set -euo pipefail

if [ "${1:-}" = "--build-before" ]; then
  commit=$2 dir=$3
  repo=$(cd "$(dirname "$0")/.." && pwd)
  rm -rf "$dir" && mkdir -p "$dir"
  git -C "$repo" archive "$commit" | tar -x -C "$dir"
  cp "$repo"/tests/nccl/*.[ch] "$repo"/tests/nccl/CMakeLists.txt "$dir/tests/nccl/"
  cp -r "$repo"/tools/coll-perf "$repo"/tools/CMakeLists.txt "$dir/tools/"
  cp "$repo"/src/cuda/gpu_table.h "$repo"/src/cuda/gpu_load.c "$dir/src/cuda/"
  cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$dir/build" -j"$(nproc)" --target coll-perf-standin >/dev/null
  echo "$dir/build/tests/nccl/coll-perf-standin"
  exit 0
fi

before=${1:?usage: nccl-cost.sh BEFORE_BIN AFTER_BIN [ROUNDS]}
after=${2:?usage: nccl-cost.sh BEFORE_BIN AFTER_BIN [ROUNDS]}
rounds=${3:-5}
args=${COST_ARGS:---threads 2 --nccl --cost -b 8 -e 1M -f 131072 -n 500 -w 20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  # shellcheck disable=SC2086 # args is a word list
  "$before" $args | awk '!/^#/ && $1 ~ /^[0-9]+$/ {print "before", $0}' >>"$out"
  # shellcheck disable=SC2086
  "$after" $args | awk '!/^#/ && $1 ~ /^[0-9]+$/ {print "after", $0}' >>"$out"
done
echo "# $(uname -n), $(nproc) cores, $rounds rounds of: coll-perf-standin $args"
echo "# us per call (medians over the rounds of each round's slowest-rank median)"
printf '%10s %8s %8s %9s %8s %8s %9s %9s\n' size b-issue b-done \
  b-over-raw a-issue a-done a-over-raw a-b-over
sort -k2,2n "$out" | awk -v n="$rounds" '
  function med(arr, k,   m, i, j, t) {
    m = k
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
      if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
    return m % 2 ? arr[(m + 1) / 2] : (arr[m / 2] + arr[m / 2 + 1]) / 2
  }
  {
    w = $1; s = $2
    sizes[s] = 1
    k = ++cnt[w, s]
    issue[w, s, k] = $4; done[w, s, k] = $5; over[w, s, k] = $9
  }
  END {
    for (s in sizes) {
      delete a; for (k = 1; k <= cnt["before", s]; k++) a[k] = issue["before", s, k]; bi = med(a, cnt["before", s])
      delete a; for (k = 1; k <= cnt["before", s]; k++) a[k] = done["before", s, k]; bd = med(a, cnt["before", s])
      delete a; for (k = 1; k <= cnt["after", s]; k++) a[k] = issue["after", s, k]; ai = med(a, cnt["after", s])
      delete a; for (k = 1; k <= cnt["after", s]; k++) a[k] = done["after", s, k]; ad = med(a, cnt["after", s])
      delete a; for (k = 1; k <= cnt["before", s]; k++) a[k] = over["before", s, k]; bo = med(a, cnt["before", s])
      delete a; for (k = 1; k <= cnt["after", s]; k++) a[k] = over["after", s, k]; ao = med(a, cnt["after", s])
      printf "%10d %8.1f %8.1f %9.1f %8.1f %8.1f %9.1f %9.1f\n",
        s, bi, bd, bo, ai, ad, ao, ao - bo
    }
  }' | sort -k1,1n
