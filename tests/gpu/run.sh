#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh: builds libcoll with its NCCL backend and runs the real-GPU checks
# that can fail on ONE GPU (tests/gpu/review_gpu.c), following the outline
# "Proposed GPU check script" of the NCCL backend review of 2026-11-30.
#
# Meant for a machine with one NVIDIA GPU (or more), the CUDA toolkit
# (headers and libcudart; nvcc is not needed), NCCL inside the Python
# packages (site-packages/nvidia/nccl/lib/libnccl.so.2), CMake and a C
# compiler, but no internet, no apt, no libuv and no CMocka.
#
# 1. Prepare the carried folder once, on a Debian 12 machine with internet,
#    in the repository root:
#
#      mkdir -p .deb && cd .deb
#      apt-get download libuv1 libuv1-dev libcmocka0 libcmocka-dev
#      cd ..
#
#    .deb/ is git-ignored: copy it along with the tree. The four .deb files
#    are enough; this script unpacks them into BUILD_DIR/deb-root with
#    `dpkg -x`, or `ar x` + `tar` where dpkg is missing, or Python where both
#    are (tests/gpu/env.sh). A folder unpacked beforehand (`for f in *.deb;
#    do dpkg -x "$f" .; done`, so .deb/usr/include/uv.h exists) is used as
#    it is. COLL_DEB_DIR names another folder; COLL_FORCE_DEB=1 takes the
#    packages even when the system has both libraries. The Debian 12
#    libraries run on newer glibc releases too.
#
# 2. Run it from the repository root:
#
#      bash tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu)
#
#    One "PASS|FAIL|SKIP name: detail" line per check, "note:" lines saying
#    what was found, and last a line "N passed, N failed, N skipped". The
#    exit code is 0 only when nothing failed. Every step runs under
#    `timeout` and is cut to what is left of a 420 s budget
#    (COLL_GPU_BUDGET_S), so even with every timeout reached the run ends
#    after about 7 minutes; a healthy run takes 2-3 minutes, most of it the
#    build. Each step's full output: BUILD_DIR/gpu-logs/.
#
# Steps and what they expect (NCCL comms nonblocking, p2p requests fused
# into one NCCL group at the first wait, tags other than 0 refused, premul
# for f16/bf16/f32/f64, i8/u8 AVG refused):
#   probe             nvidia-smi -L, tools, the NCCL wheel; libcoll.so needs
#                     no libnccl/libcudart/libcuda; COLL_DEBUG=INFO logs the
#                     CUDA runtime and the NCCL path; NCCL >= 2.14
#   world1            world-1 comm, out of place into poisoned buffers, read
#                     on a second stream: every dtype x op bitwise equal to
#                     the input (i8/u8 avg: ERR_UNSUPPORTED); allgather,
#                     reduce_scatter, reduce copy it; premul 0.25 on
#                     f16/bf16/f32/f64 gives exactly x*0.25
#   stream-order      an allreduce behind a 300 ms host function returns
#                     after it (blocking) / completes after it (coll_wait)
#   buffers           malloc and pinned memory refused (ERR_INVALID_ARG),
#                     managed and cudaMallocAsync memory taken, correct
#   watchdog          comm timeout 200 ms, stream held 1 s: ERR_TIMEOUT in
#                     [200, 900] ms, coll_is_aborted 1
#   abort-thread      coll_abort from a thread at 100 ms ends coll_wait with
#                     ERR_ABORTED within 300 ms (the latency is printed)
#   abort-race        20 rounds of coll_abort racing coll_comm_destroy
#   init-timeout      world 2, rank 1 missing, timeout_ms 2000: ERR_TIMEOUT
#                     after 2-3 s
#   init-abort        the same ended by coll_abort: ERR_ABORTED < 1 s after
#   cpu-rank          coll-run -n 4, COLL_BACKEND=cpu, device buffers staged
#   cpu-abort         coll_gpu_check abort: a CPU comm with device buffers
#                     released by coll_abort
#   rank2-*           coll-run -n 2, COLL_BACKEND=nccl, NCCL_HOSTID=h$RANK so
#                     NCCL takes two ranks on one GPU (SKIP with NCCL's
#                     message if it does not): collectives, a 64 MiB
#                     isend+irecv exchange waited send-first, and an abort
#                     of a rank whose peer never calls (within 2 s)
#   2 GPUs            group over two devices, example multi_gpu_group: SKIP
#                     on one GPU
#   ctest             the stand-in tests (ctest -R '^test_nccl') and the
#                     example, skipped by ctest on one GPU
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build-gpu}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
LOGS=$BUILD/gpu-logs
JOBS=$(nproc 2>/dev/null || echo 4)
BUDGET=${COLL_GPU_BUDGET_S:-420}
START=$SECONDS
PASSED=0
FAILED=0
SKIPPED=0

say() { printf '%s\n' "$*"; }
pass() { say "PASS $1: $2"; PASSED=$((PASSED + 1)); }
fail() { say "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { say "SKIP $1: $2"; SKIPPED=$((SKIPPED + 1)); }

finish() {
  say "note: logs in $LOGS; $((SECONDS - START)) s in all"
  say "$PASSED passed, $FAILED failed, $SKIPPED skipped"
  [ "$FAILED" -eq 0 ]
  exit $?
}

# The step's own limit, cut to what is left of the budget; fails (and the
# step is skipped) when less than 5 s are left.
clip() {
  local left=$((BUDGET - (SECONDS - START)))
  [ "$left" -ge 5 ] || return 1
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# step NAME LIMIT COMMAND...: runs COMMAND under timeout, relays its result
# and note lines (coll-run's "[rank] " prefixes dropped) and counts them.
# Exit 77 without a SKIP line becomes one; any other failing exit without a
# FAIL line becomes a FAIL. Returns the exit code.
step() {
  local name=$1 limit log rc p f s
  shift
  if ! limit=$(clip "$1"); then
    skip "$name" "not started: the ${BUDGET} s budget is spent"
    return 77
  fi
  shift
  log=$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9-' '_').log
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  sed -n -E 's/^(\[[0-9]+\] )?((PASS|FAIL|SKIP) |note: )/\2/p' "$log" > "$log.lines"
  while IFS= read -r line; do say "$line"; done < "$log.lines"
  p=$(grep -c '^PASS ' "$log.lines")
  f=$(grep -c '^FAIL ' "$log.lines")
  s=$(grep -c '^SKIP ' "$log.lines")
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  SKIPPED=$((SKIPPED + s))
  if [ "$rc" -eq 77 ] && [ "$s" -eq 0 ] && [ "$f" -eq 0 ]; then
    skip "$name" "$(grep '^note: ' "$log.lines" | tail -n 1 | cut -c7-)"
  elif [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ "$f" -eq 0 ]; then
    tail -n 15 "$log" | sed 's/^/  | /'
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      fail "$name" "timed out after ${limit} s (log: $log)"
    else
      fail "$name" "exit code $rc (log: $log)"
    fi
  fi
  return "$rc"
}

mkdir -p "$BUILD" "$LOGS" || exit 1
say "note: libcoll GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -n), $JOBS cores"

# --- 0. what the machine has ----------------------------------------------
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi -L > "$LOGS/nvidia-smi.log" 2>&1
  NGPU=$(grep -c '^GPU ' "$LOGS/nvidia-smi.log")
  while IFS= read -r line; do say "note: $line"; done < "$LOGS/nvidia-smi.log"
else
  say "note: no nvidia-smi on PATH"
fi
say "note: tools: $(for t in nvcc cmake pkg-config cc gcc dpkg ar tar python3 readelf; do
  printf '%s=%s ' "$t" "$(command -v "$t" >/dev/null 2>&1 && echo yes || echo no)"; done)"
say "note: ldconfig: $(timeout 10 ldconfig -p 2>/dev/null | grep -E 'cudart|nccl|libuv|cmocka' |
  awk '{print $1}' | sort -u | tr '\n' ' ')"

# --- 1. dependencies, NCCL and the build ----------------------------------
. "$REPO/tests/gpu/env.sh"
if ! gpu_env_cuda || ! gpu_env_deps || ! gpu_env_nccl; then
  fail "dependencies" "$GPU_ENV_WHY"
  finish
fi

# Another compiler may warn where CI's does not: here warnings stay warnings
# (a launcher appends -Wno-error after the project's -Werror).
mkdir -p "$BUILD/bin"
printf '#!/bin/sh\nexec "$@" -Wno-error\n' > "$BUILD/bin/no-werror"
chmod +x "$BUILD/bin/no-werror"
t0=$SECONDS
: > "$LOGS/build.log"
if limit=$(clip 150) &&
   timeout "$limit" cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DCOLL_WITH_CUDA=ON -DCMAKE_C_COMPILER_LAUNCHER="$BUILD/bin/no-werror" \
     "${GPU_ENV_CMAKE_ARGS[@]}" > "$LOGS/configure.log" 2>&1 &&
   limit=$(clip $((150 - (SECONDS - t0)))) &&
   timeout "$limit" cmake --build "$BUILD" -j "$JOBS" --target coll review_gpu \
     >> "$LOGS/build.log" 2>&1; then
  # The rest is not needed by every step; build what builds.
  if ! { limit=$(clip $((150 - (SECONDS - t0)))) &&
         timeout "$limit" cmake --build "$BUILD" -j "$JOBS" --target coll-run \
           coll_gpu_check multi_gpu_group test_nccl_group test_nccl_comm \
           test_nccl_abort test_nccl_staging >> "$LOGS/build.log" 2>&1; }; then
    say "note: some of coll-run, coll_gpu_check, multi_gpu_group, test_nccl_* did not build (see $LOGS/build.log)"
  fi
  pass "build" "libcoll with -DCOLL_WITH_CUDA=ON and review_gpu in $((SECONDS - t0)) s ($(grep -m1 'NCCL backend' "$LOGS/configure.log" | sed 's/^-- //'))"
else
  tail -n 25 "$LOGS/configure.log" "$LOGS/build.log" 2>/dev/null | sed 's/^/  | /'
  fail "build" "configure or build failed or timed out after $((SECONDS - t0)) s (logs: $LOGS/configure.log, build.log)"
  finish
fi

REVIEW=$BUILD/tests/gpu/review_gpu
CHECK=$BUILD/tests/nccl/coll_gpu_check
RUN=$BUILD/tools/coll-run
LIB=$(ls "$BUILD"/src/libcoll.so.*.* 2>/dev/null | head -n 1)

# --- 2. probe ----------------------------------------------------------------
if command -v readelf >/dev/null 2>&1 && [ -n "$LIB" ]; then
  needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  case $needed in
    *libnccl*|*libcudart*|*libcuda*) fail "probe-needed" "libcoll.so links to CUDA/NCCL: NEEDED $needed" ;;
    *) pass "probe-needed" "libcoll.so NEEDED: $needed(no libnccl, libcudart or libcuda)" ;;
  esac
else
  skip "probe-needed" "no readelf or no libcoll.so.*"
fi
COLL_DEBUG=INFO step probe 20 "$REVIEW" probe
if [ $? -ne 0 ] && grep -q 'no usable CUDA device' "$LOGS/probe.log"; then
  say "note: no usable GPU: the other steps would only repeat that"
  finish
fi
rt_line=$(grep -m1 -o 'CUDA runtime: .*' "$LOGS/probe.log")
nccl_line=$(grep -m1 -o 'NCCL loaded from .*' "$LOGS/probe.log")
if [ -n "$rt_line" ] && [ -n "$nccl_line" ]; then
  pass "probe-log" "COLL_DEBUG=INFO: '$rt_line', '$nccl_line'"
else
  fail "probe-log" "COLL_DEBUG=INFO did not log both 'CUDA runtime:' and 'NCCL loaded from' (log: $LOGS/probe.log)"
fi

# --- 3. one process, world 1 -------------------------------------------------
step world1 25 "$REVIEW" world1
step stream-order 12 "$REVIEW" stream-order
step buffers 12 "$REVIEW" buffers
step watchdog 15 "$REVIEW" watchdog
step abort-thread 12 "$REVIEW" abort-thread
NCCL_DEBUG=WARN step abort-race 30 "$REVIEW" abort-race
if grep -E -i 'already been destroyed|WARN.*abort' "$LOGS/abort-race.log" > "$LOGS/abort-race.warn"; then
  fail "abort-race-warnings" "NCCL warned: $(head -n 2 "$LOGS/abort-race.warn" | tr '\n' ' ')"
else
  pass "abort-race-warnings" "no NCCL warning about a destroyed or aborted comm (NCCL_DEBUG=WARN)"
fi
step init-timeout 10 "$REVIEW" init-timeout
step init-abort 10 "$REVIEW" init-abort

# --- 4. CPU comms with device buffers, several ranks on one GPU ---------------
if [ -x "$RUN" ]; then
  COLL_BACKEND=cpu step cpu-rank 30 "$RUN" -n 4 --timeout 25 "$REVIEW" cpu-rank
else
  skip cpu-rank "coll-run was not built"
fi
if [ -x "$CHECK" ]; then
  step cpu-abort 12 "$CHECK" abort
else
  skip cpu-abort "coll_gpu_check was not built"
fi

# --- 5. two NCCL ranks on one GPU through NCCL_HOSTID -------------------------
# Ranks with different host ids look like two nodes to NCCL, which then
# allows both on one GPU and connects them through its socket transport.
# $RANK is expanded by each rank's own sh, where coll-run has set it.
rank2() {
  local name=$1 limit=$2
  step "$name" "$limit" "$RUN" -n 2 --timeout $((limit - 5)) env \
    COLL_BACKEND=nccl NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN \
    sh -c 'NCCL_HOSTID=h$RANK exec "$0" "$1"' "$REVIEW" "$name"
}
if [ ! -x "$RUN" ]; then
  skip rank2 "coll-run was not built"
else
  rank2 rank2-colls 30
  if [ $? -eq 77 ]; then
    why="NCCL did not take two ranks on one GPU (see rank2-colls)"
    skip rank2-exchange "$why"
    skip rank2-abort "$why"
  else
    rank2 rank2-exchange 25
    rank2 rank2-abort 25
  fi
fi

# --- 6. two GPUs -------------------------------------------------------------
if [ "$NGPU" -ge 2 ]; then
  [ -x "$CHECK" ] && step group-2gpu 20 "$CHECK" group
  if [ -x "$BUILD/examples/multi_gpu_group" ]; then
    step example-multi-gpu 30 "$BUILD/examples/multi_gpu_group" --steps 5 &&
      pass example-multi-gpu "$(tail -n 1 "$LOGS/example-multi-gpu.log")"
  fi
else
  skip group-2gpu "needs two GPUs; nvidia-smi -L lists $NGPU"
  skip example-multi-gpu "needs two GPUs; nvidia-smi -L lists $NGPU"
fi

# --- 7. the stand-in tests and the example under ctest ----------------------
if limit=$(clip 20); then
  if (cd "$BUILD" && timeout "$limit" ctest -R '^test_nccl|^example_multi_gpu_group$' \
        --output-on-failure > "$LOGS/ctest.log" 2>&1); then
    detail=$(grep -m1 'tests passed' "$LOGS/ctest.log")
    skipped=$(sed -n 's/.* - \(.*\) (Skipped)$/\1/p' "$LOGS/ctest.log" | tr '\n' ' ')
    pass ctest "$detail${skipped:+; skipped by ctest: $skipped}"
  else
    tail -n 20 "$LOGS/ctest.log" | sed 's/^/  | /'
    fail ctest "see $LOGS/ctest.log"
  fi
else
  skip ctest "not started: the ${BUDGET} s budget is spent"
fi
finish
