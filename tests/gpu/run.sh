#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh: builds libcoll with its NCCL backend and runs the real-GPU checks
# that can fail on ONE GPU (tests/gpu/review_gpu.c), following the outlines
# of the NCCL backend reviews of 2026-11-30 and 2026-12-03 (the second
# review's section "A one-GPU check that would catch these").
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
#      bash tests/gpu/run.sh --dry-run [BUILD_DIR]
#
#    One "PASS|FAIL|SKIP name: detail" line per check, "note:" lines saying
#    what was found, and last a line "N passed, N failed, N skipped". The
#    exit code is 0 only when nothing failed. Every step runs under
#    `timeout` and is cut to what is left of a 290 s budget
#    (COLL_GPU_BUDGET_S), so even with every timeout reached the run ends
#    within 5 minutes; a healthy run takes about 3, a third of it the
#    build (150 s at most, COLL_GPU_BUILD_S; a 16-core machine needs
#    about 60). Each step's full output: BUILD_DIR/gpu-logs/.
#
#    --dry-run needs no GPU: it builds what the GPU run builds (and the
#    NCCL stand-in), then runs the two-rank steps' launch lines with
#    gpu_dryrun (the stand-in with one device) in place of review_gpu, so
#    each rank shows the environment it gets and that NCCL is selected
#    under it; init-blocking and the ctest step run as on a GPU; the steps
#    that need a GPU are SKIPped.
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
#                     [400, 1100] ms (twice the timeout: the work never
#                     started), coll_is_aborted 1
#   abort-thread      coll_abort from a thread at 100 ms ends coll_wait with
#                     ERR_ABORTED within 300 ms (the latency is printed)
#   abort-race        20 rounds of coll_abort racing coll_comm_destroy
#   init-timeout      world 2, rank 1 missing, timeout_ms 2000: ERR_TIMEOUT
#                     after 2-3 s
#   init-abort        the same ended by coll_abort: ERR_ABORTED < 1 s after
#   cpu-rank          coll-run -n 4, COLL_BACKEND=cpu, device buffers staged
#   cpu-abort         coll_gpu_check abort: a CPU comm with device buffers
#                     released by coll_abort
#   shrink            coll_gpu_check shrink: a world-1 comm split while
#                     healthy, and after coll_abort (N3)
#   init-blocking     NCCL_COMM_BLOCKING=1: a world-2 init refused at once
#                     (N7)
#   m6-probe          a process with the driver initialised and no context
#                     runs a CPU allreduce: no context made (M6)
#   rank2-*           coll-run -n 2, COLL_BACKEND=nccl, each rank with
#                     LOCAL_WORLD_SIZE=1 LOCAL_RANK=0 and NCCL_HOSTID=h$RANK,
#                     so NCCL takes two ranks on one GPU (SKIP with NCCL's
#                     message if it does not): collectives, a 64 MiB
#                     isend+irecv exchange waited send-first, an abort of a
#                     rank whose peer never calls (within 2 s), 200 rounds
#                     read back on the stream without coll_wait (N1), an
#                     abort while the stream is held 3 s (N4), a request
#                     queued behind a stuck one (N5), a split and a shrink
#                     after an abort (N2, N3), and libcoll's per-call time
#                     beside NCCL's own from 8 B to 64 MiB
#   2 GPUs            group over two devices, example multi_gpu_group: SKIP
#                     on one GPU
#   ctest             the stand-in tests (test_nccl_*, nccl_cost_standin),
#                     every one built first, and the example, skipped by
#                     ctest on one GPU
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

DRY=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY=1
  shift
fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build-gpu}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
LOGS=$BUILD/gpu-logs
JOBS=$(nproc 2>/dev/null || echo 4)
BUDGET=${COLL_GPU_BUDGET_S:-290}
BUILD_S=${COLL_GPU_BUILD_S:-150} # the build's share of it
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
say "note: libcoll GPU check$([ "$DRY" = 1 ] && echo ' (dry run: no GPU, the NCCL stand-in)'), $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -n), $JOBS cores"

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

# What the ctest step runs (tests/nccl/CMakeLists.txt), built before it.
# (Before: only 4 of them were built and ctest -R '^test_nccl' ran all 11,
# 7 "Not Run": the step always failed.)
CTEST_TARGETS="test_nccl_group test_nccl_comm test_nccl_env test_nccl_store
  test_nccl_abort test_nccl_promises test_nccl_staging test_nccl_numerics
  test_nccl_numerics_api test_nccl_staged_p2p test_nccl_shrink
  test_nccl_stream test_nccl_faults test_nccl_standin coll-perf-standin"

# Another compiler may warn where CI's does not: here warnings stay warnings
# (a launcher appends -Wno-error after the project's -Werror).
mkdir -p "$BUILD/bin"
printf '#!/bin/sh\nexec "$@" -Wno-error\n' > "$BUILD/bin/no-werror"
chmod +x "$BUILD/bin/no-werror"
t0=$SECONDS
: > "$LOGS/build.log"
if limit=$(clip "$BUILD_S") &&
   timeout "$limit" cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DCOLL_WITH_CUDA=ON -DCMAKE_C_COMPILER_LAUNCHER="$BUILD/bin/no-werror" \
     "${GPU_ENV_CMAKE_ARGS[@]}" > "$LOGS/configure.log" 2>&1 &&
   limit=$(clip $((BUILD_S - (SECONDS - t0)))) &&
   timeout "$limit" cmake --build "$BUILD" -j "$JOBS" --target coll review_gpu \
     >> "$LOGS/build.log" 2>&1; then
  # The rest is not needed by every step; build what builds.
  # shellcheck disable=SC2086 # one target per word
  if ! { limit=$(clip $((BUILD_S - (SECONDS - t0)))) &&
         timeout "$limit" cmake --build "$BUILD" -j "$JOBS" --target coll-run \
           coll_gpu_check multi_gpu_group gpu_dryrun $CTEST_TARGETS \
           >> "$LOGS/build.log" 2>&1; }; then
    say "note: some of coll-run, coll_gpu_check, multi_gpu_group, gpu_dryrun, the ctest targets did not build (see $LOGS/build.log)"
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
DRYRUN=$BUILD/tests/gpu/gpu_dryrun
LIB=$(ls "$BUILD"/src/libcoll.so.*.* 2>/dev/null | head -n 1)

# In a dry run the two-rank steps run gpu_dryrun, which needs no GPU.
RANK_PROG=$REVIEW
if [ "$DRY" = 1 ]; then
  RANK_PROG=$DRYRUN
  if [ ! -x "$DRYRUN" ]; then
    fail "dry-run" "gpu_dryrun was not built (see $LOGS/build.log)"
    finish
  fi
fi
gpu_only() {
  [ "$DRY" = 1 ] || return 1
  local s
  for s in "$@"; do skip "$s" "dry run: needs a GPU"; done
  return 0
}

# --- 2. probe ----------------------------------------------------------------
if gpu_only probe probe-log world1 stream-order buffers watchdog abort-thread \
    abort-race abort-race-warnings init-timeout init-abort cpu-rank cpu-abort \
    shrink m6-probe; then
  :
else
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
# Predicted before N5's fix: the allreduce counted its timeout from its
# start on the stream only, so it waited for the hold and completed (FAIL).
step watchdog 15 "$REVIEW" watchdog
# World 1 only: NCCL's single-rank path (synchronous, no device stream), so
# this cannot show N4; rank2-abort-held-stream does.
step abort-thread 12 "$REVIEW" abort-thread
NCCL_DEBUG=WARN step abort-race 30 "$REVIEW" abort-race
if grep -E -i 'already been destroyed|WARN.*abort' "$LOGS/abort-race.log" > "$LOGS/abort-race.warn"; then
  fail "abort-race-warnings" "NCCL warned: $(head -n 2 "$LOGS/abort-race.warn" | tr '\n' ' ')"
else
  pass "abort-race-warnings" "no NCCL warning about a destroyed or aborted comm (NCCL_DEBUG=WARN)"
fi
step init-timeout 10 "$REVIEW" init-timeout
step init-abort 10 "$REVIEW" init-abort
# N3: both checks of coll_gpu_check shrink pass no rank to exclude. Before
# the fix: "FAIL nccl shrink ...: NCCL error 4" (ncclCommShrink refuses an
# empty list, init.cc:2562); now ncclCommSplit makes that comm.
if [ -x "$CHECK" ]; then
  step shrink 15 "$CHECK" shrink
else
  skip shrink "coll_gpu_check was not built"
fi
# M6: never run before; expected to PASS (no context made).
step m6-probe 15 "$REVIEW" m6-probe

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
fi # gpu_only

# N7: predicted before the fix: blocks in ncclCommInitRankConfig, which
# NCCL_COMM_BLOCKING=1 made blocking, until the step's timeout (FAIL timed
# out); now INVALID_ARG at once. A dry run shows it on the stand-in.
if [ "$DRY" = 1 ]; then
  step init-blocking 10 "$DRYRUN" init-blocking
else
  step init-blocking 10 "$REVIEW" init-blocking
fi

# --- 5. two NCCL ranks on one GPU through NCCL_HOSTID -------------------------
# Ranks with different host ids look like two nodes to NCCL, which then
# allows both on one GPU and connects them through its socket transport.
# coll-run sets LOCAL_WORLD_SIZE=2; each rank gets LOCAL_WORLD_SIZE=1
# LOCAL_RANK=0 (one host each, as NCCL_HOSTID says). Before that, every
# rank2 step SKIPped: COLL_BACKEND=nccl refused two local ranks on one GPU
# before NCCL was asked (N10). $RANK is expanded by each rank's own sh,
# where coll-run has set it.
rank2() {
  local name=$1 limit=$2
  step "$name" "$limit" "$RUN" -n 2 --timeout $((limit - 5)) env \
    COLL_BACKEND=nccl NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN \
    LOCAL_WORLD_SIZE=1 LOCAL_RANK=0 \
    sh -c 'NCCL_HOSTID=h$RANK exec "$0" "$1"' "$RANK_PROG" "$name"
}
RANK2_STEPS="rank2-exchange rank2-abort rank2-order rank2-abort-held-stream
  rank2-queued-timeout rank2-shrink rank2-latency"
if [ ! -x "$RUN" ]; then
  skip rank2 "coll-run was not built"
else
  rank2 rank2-colls 30
  if [ $? -eq 77 ]; then
    why="NCCL did not take two ranks on one GPU (see rank2-colls)"
    for n in $RANK2_STEPS; do skip "$n" "$why"; done
  else
    rank2 rank2-exchange 25
    rank2 rank2-abort 25
    # N1, predicted before the fix: round 0 reads the poison (the first
    # use connects in NCCL's thread), later rounds now and then.
    rank2 rank2-order 25
    # N4, predicted before the fix: coll_abort returns after about 2.9 s
    # (ncclCommAbort waits for the held stream, under the issue guard).
    rank2 rank2-abort-held-stream 25
    # N5, predicted before the fix: the wait never ends; the 6 s aborter
    # ends it with ERR_ABORTED (FAIL).
    rank2 rank2-queued-timeout 20
    # N2/N3, predicted before the fix: the split is NCCL's invalid argument
    # (an empty exclude list), and the shrink after the abort polls a NULL
    # comm (NCCL error 4) while NCCL later writes a dead stack slot.
    rank2 rank2-shrink 30
    # Never run before: figures only (note lines), PASS when every size ran.
    rank2 rank2-latency 40
  fi
fi

# --- 6. two GPUs -------------------------------------------------------------
if gpu_only group-2gpu example-multi-gpu; then
  :
elif [ "$NGPU" -ge 2 ]; then
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
missing=""
for t in $CTEST_TARGETS; do
  [ -x "$BUILD/tests/nccl/$t" ] || missing="$missing $t"
done
if [ -n "$missing" ]; then
  fail ctest "not built:$missing (see $LOGS/build.log)"
elif limit=$(clip 30); then
  if (cd "$BUILD" && timeout "$limit" ctest -j "$JOBS" \
        -R '^test_nccl_|^nccl_cost_standin$|^example_multi_gpu_group$' \
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
