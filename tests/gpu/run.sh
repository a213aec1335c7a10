#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run.sh: builds libcoll with its NCCL backend and runs the real-GPU checks.
#
# For a single-GPU (or larger) machine that has the CUDA toolkit, NCCL inside
# its Python packages (nvidia-nccl-cu*), CMake and a C compiler, but perhaps
# no internet and no libuv or CMocka. Finishes in well under five minutes.
#
#   tests/gpu/run.sh [BUILD_DIR]          (default: <repo>/build-gpu)
#
# libuv and CMocka: used from the system when installed; otherwise from a
# folder of unpacked Debian packages, <repo>/.deb or $COLL_DEB_DIR. Prepare
# it on a machine with internet and the same distribution release:
#
#   mkdir .deb && cd .deb
#   apt-get download libuv1 libuv1-dev libcmocka0 libcmocka-dev
#   for f in *.deb; do dpkg -x "$f" .; done
#
# and copy the folder into the repository as .deb/ (it is git-ignored).
# COLL_FORCE_DEB=1 uses the folder even when the system has both.
# Without pkg-config the script answers CMake's questions about those two
# packages itself.
#
# NCCL: libnccl.so.2 is looked up under the Python packages
# (site-packages/nvidia/nccl/lib) and handed over as COLL_NCCL_LIBRARY; its
# nccl.h (nvidia/nccl/include) is used when the toolkit has none. Set
# COLL_NCCL_LIBRARY yourself to use another one.
#
# Output: one "PASS <check>" / "FAIL <check>: <why>" / "SKIP <check>: <why>"
# line per check, then a summary. Exit code 0 when nothing failed.
set -u

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build-gpu}
DEB=${COLL_DEB_DIR:-$REPO/.deb}
LOGS=$BUILD/gpu-logs
JOBS=$(nproc 2>/dev/null || echo 4)
PASSED=0
FAILED=0
SKIPPED=0

say() { printf '%s\n' "$*"; }
pass() { say "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { say "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { say "SKIP $1: $2"; SKIPPED=$((SKIPPED + 1)); }

summary() {
  say "SUMMARY: $PASSED passed, $FAILED failed, $SKIPPED skipped (logs in $LOGS)"
  [ "$FAILED" -eq 0 ]
  exit $?
}

mkdir -p "$BUILD" "$LOGS" || exit 1

# --- libuv and CMocka from unpacked .deb files ------------------------------
have_pc() { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$1"; }

DEB_LIB=
if [ -n "${COLL_FORCE_DEB:-}" ] || ! have_pc libuv || ! have_pc cmocka; then
  if [ -d "$DEB/usr/include" ]; then
    DEB_LIB=$(dirname "$(find "$DEB" -name 'libuv.so*' | head -n 1)")
    PCDIR=$BUILD/pkgconfig
    mkdir -p "$PCDIR"
    for m in libuv:uv cmocka:cmocka; do
      mod=${m%%:*}
      lib=${m#*:}
      cat > "$PCDIR/$mod.pc" <<EOF
prefix=$DEB/usr
includedir=$DEB/usr/include
libdir=$DEB_LIB
Name: $mod
Description: $mod from $DEB
Version: 1.0
Cflags: -I$DEB/usr/include
Libs: -L$DEB_LIB -l$lib
EOF
    done
    export PKG_CONFIG_PATH="$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$DEB_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if ! command -v pkg-config >/dev/null 2>&1; then
      # A pkg-config that knows just the files written above.
      mkdir -p "$BUILD/bin"
      cat > "$BUILD/bin/pkg-config" <<'EOF'
#!/bin/sh
q=; mods=
for a in "$@"; do
  case "$a" in
    --version) echo 0.29.2; exit 0 ;;
    --*) q="$q $a" ;;
    *) mods="$mods $a" ;;
  esac
done
out=
for m in $mods; do
  f=
  for d in $(echo "$PKG_CONFIG_PATH" | tr ':' ' '); do
    [ -f "$d/$m.pc" ] && f="$d/$m.pc" && break
  done
  [ -n "$f" ] || { echo "Package $m was not found" >&2; exit 1; }
  field() { sed -n "s/^$1: *//p" "$f"; }
  var() { sed -n "s/^$1=//p" "$f"; }
  for o in $q; do
    case "$o" in
      --modversion) out="$out $(field Version)" ;;
      --variable=*) out="$out $(var "${o#--variable=}")" ;;
      --cflags|--cflags-only-I) out="$out $(field Cflags)" ;;
      --libs) out="$out $(field Libs)" ;;
      --libs-only-L) out="$out $(field Libs | tr ' ' '\n' | grep '^-L' | tr '\n' ' ')" ;;
      --libs-only-l) out="$out $(field Libs | tr ' ' '\n' | grep '^-l' | tr '\n' ' ')" ;;
    esac
  done
done
echo $out
EOF
      chmod +x "$BUILD/bin/pkg-config"
      export PATH="$BUILD/bin:$PATH"
    fi
  else
    fail "dependencies" "libuv or CMocka is missing and $DEB has no unpacked .deb files (see the header of $0)"
    summary
  fi
fi

# --- NCCL from the Python packages -----------------------------------------
NCCL_INC=
if [ -z "${COLL_NCCL_LIBRARY:-}" ]; then
  dirs=$(python3 -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null)
  for d in $dirs; do
    if [ -f "$d/nvidia/nccl/lib/libnccl.so.2" ]; then
      COLL_NCCL_LIBRARY=$d/nvidia/nccl/lib/libnccl.so.2
      break
    fi
  done
  if [ -z "${COLL_NCCL_LIBRARY:-}" ]; then
    COLL_NCCL_LIBRARY=$(find /usr /opt "$HOME" -maxdepth 9 \
      -path '*nvidia/nccl/lib/libnccl.so.2' 2>/dev/null | head -n 1)
  fi
fi
if [ -n "${COLL_NCCL_LIBRARY:-}" ]; then
  export COLL_NCCL_LIBRARY
  say "NCCL: $COLL_NCCL_LIBRARY"
  inc=$(dirname "$(dirname "$COLL_NCCL_LIBRARY")")/include
  [ -f "$inc/nccl.h" ] && NCCL_INC=$inc
  # The CUDA runtime of the same wheel set, if the toolkit's is not found.
  rt=$(dirname "$(dirname "$(dirname "$COLL_NCCL_LIBRARY")")")/cuda_runtime/lib
  [ -d "$rt" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$rt"
else
  say "NCCL: not found under the Python packages; trying libnccl.so.2 from the loader path"
fi

# --- build -----------------------------------------------------------------
# Another compiler may warn where CI's does not: there, warnings stay
# warnings (a launcher appends -Wno-error after the project's -Werror).
mkdir -p "$BUILD/bin"
printf '#!/bin/sh\nexec "$@" -Wno-error\n' > "$BUILD/bin/no-werror"
chmod +x "$BUILD/bin/no-werror"
cmake_args="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLL_WITH_CUDA=ON"
cmake_args="$cmake_args -DCMAKE_C_COMPILER_LAUNCHER=$BUILD/bin/no-werror"
[ -n "$NCCL_INC" ] && cmake_args="$cmake_args -DCOLL_NCCL_INCLUDE_DIR=$NCCL_INC"
[ -d /usr/local/cuda ] && cmake_args="$cmake_args -DCUDAToolkit_ROOT=/usr/local/cuda"
[ -n "$DEB_LIB" ] && cmake_args="$cmake_args -DCMAKE_PREFIX_PATH=$DEB/usr"
# Only what the checks run is built, so a half-finished part of the tree
# elsewhere cannot stop them.
build() { cmake --build "$BUILD" -j "$JOBS" --target "$@" >> "$LOGS/build.log" 2>&1; }
: > "$LOGS/build.log"
# shellcheck disable=SC2086
if cmake -S "$REPO" -B "$BUILD" $cmake_args > "$LOGS/configure.log" 2>&1 &&
   build coll coll_gpu_check; then
  pass "build with the NCCL backend"
else
  tail -n 30 "$LOGS/configure.log" "$LOGS/build.log" 2>/dev/null
  fail "build with the NCCL backend" "see $LOGS/build.log"
  summary
fi
for t in coll-run coll-perf multi_gpu_group test_nccl_group test_nccl_comm \
         test_nccl_abort test_nccl_staging; do
  build "$t" || say "note: target $t did not build (see $LOGS/build.log)"
done

CHECK=$BUILD/tests/nccl/coll_gpu_check
RUN=$BUILD/tools/coll-run
PERF=$BUILD/tools/coll-perf

# Runs a command with a time limit; relays its PASS/FAIL/SKIP lines, and
# fails the step if it exits non-zero without saying why.
step() {
  name=$1
  limit=$2
  shift 2
  log=$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9-' '_').log
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  # coll-run prefixes each line with "[rank] ".
  sed -n -E 's/^(\[[0-9]+\] )?((PASS|FAIL|SKIP) )/\2/p' "$log" > "$log.results"
  while IFS= read -r line; do say "$line"; done < "$log.results"
  p=$(grep -c '^PASS ' "$log.results")
  f=$(grep -c '^FAIL ' "$log.results")
  s=$(grep -c '^SKIP ' "$log.results")
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  SKIPPED=$((SKIPPED + s))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    tail -n 20 "$log"
    if [ "$rc" -eq 124 ]; then fail "$name" "timed out after ${limit}s"
    else fail "$name" "exit code $rc"; fi
  fi
}

step "nccl world-1 comm" 120 "$CHECK" world1
step "nccl group" 120 "$CHECK" group
if [ -x "$RUN" ]; then
  export COLL_BACKEND=cpu # 4 ranks share one GPU: the CPU ring, staged
  step "tcp ring, 4 ranks, device buffers" 180 \
    "$RUN" -n 4 --timeout 170 "$CHECK" tcp-rank
  unset COLL_BACKEND
else
  skip "tcp ring, 4 ranks, device buffers" "coll-run was not built"
fi
step "abort" 120 "$CHECK" abort
if [ -x "$PERF" ]; then
  if timeout 120 "$PERF" --threads 2 -b 1M -e 16M -f 4 -n 5 -w 1 > "$LOGS/coll-perf.log" 2>&1; then
    pass "coll-perf (2 ranks, 1M..16M)"
    cat "$LOGS/coll-perf.log"
  else
    tail -n 20 "$LOGS/coll-perf.log"
    fail "coll-perf (2 ranks, 1M..16M)" "see $LOGS/coll-perf.log"
  fi
else
  skip "coll-perf" "coll-perf was not built"
fi
if [ -x "$BUILD/examples/multi_gpu_group" ]; then
  if timeout 120 "$BUILD/examples/multi_gpu_group" --steps 5 > "$LOGS/example.log" 2>&1; then
    pass "example multi_gpu_group: $(tail -n 1 "$LOGS/example.log")"
  else
    fail "example multi_gpu_group" "$(tail -n 1 "$LOGS/example.log")"
  fi
fi
if (cd "$BUILD" && timeout 120 ctest -R '^test_nccl' --output-on-failure > "$LOGS/ctest.log" 2>&1); then
  pass "stand-in unit tests (ctest -R ^test_nccl)"
else
  tail -n 30 "$LOGS/ctest.log"
  fail "stand-in unit tests (ctest -R ^test_nccl)" "see $LOGS/ctest.log"
fi
summary
