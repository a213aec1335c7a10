# SPDX-License-Identifier: Apache-2.0
# env.sh: where tests/gpu/run.sh finds what the build needs on a machine
# with no internet and no package manager: libuv and CMocka (the system's,
# or Debian packages carried in <repo>/.deb and unpacked here), NCCL inside
# the Python packages, and the CUDA toolkit.
#
# Sourced by run.sh (bash), with REPO and BUILD set. Each gpu_env_* function
# prints "note: ..." lines saying what it found, adds to GPU_ENV_CMAKE_ARGS,
# exports what the build and the checks need (PKG_CONFIG_PATH, PATH,
# LD_LIBRARY_PATH, COLL_NCCL_LIBRARY), and returns non-zero with the reason
# in GPU_ENV_WHY when the build cannot go on.
#
# Knobs: COLL_DEB_DIR (default <repo>/.deb), COLL_FORCE_DEB=1 (the carried
# packages even when the system has both libraries), COLL_NCCL_LIBRARY (this
# libnccl.so.2, no search), COLL_DEB_UNPACK=dpkg|ar|python (one way of
# unpacking only, to test the fallbacks).

GPU_ENV_CMAKE_ARGS=()
GPU_ENV_WHY=

gpu_env_note() { printf 'note: %s\n' "$*"; }

gpu_env_python() { command -v python3 2>/dev/null || command -v python 2>/dev/null; }

# Prints the paths of files named $1 (a find -path pattern) under the
# usual software roots, the first one only; bounded to 30 s.
gpu_env_find() {
  local roots=(/usr /opt /home /root)
  [ -n "${VIRTUAL_ENV:-}" ] && roots=("$VIRTUAL_ENV" "${roots[@]}")
  [ -n "${CONDA_PREFIX:-}" ] && roots=("$CONDA_PREFIX" "${roots[@]}")
  timeout 30 find "${roots[@]}" -maxdepth 9 -path "$1" 2>/dev/null | head -n 1
}

gpu_env_have_pc() {
  command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$1" 2>/dev/null
}

# Unpacks the files of one .deb into $2 and prints how: `dpkg -x`, else
# `ar x` + `tar`, else Python (an ar reader plus tarfile, which also reads
# the xz data member without an xz program).
gpu_env_unpack_deb() {
  local deb=$1 dest=$2 how=${COLL_DEB_UNPACK:-} tmp data py
  if { [ -z "$how" ] || [ "$how" = dpkg ]; } && command -v dpkg >/dev/null 2>&1 &&
     dpkg -x "$deb" "$dest" 2>/dev/null; then
    echo "dpkg -x"
    return 0
  fi
  if { [ -z "$how" ] || [ "$how" = ar ]; } && command -v ar >/dev/null 2>&1 &&
     command -v tar >/dev/null 2>&1; then
    tmp=$(mktemp -d) || return 1
    if (cd "$tmp" && ar x "$deb") 2>/dev/null; then
      data=$(ls "$tmp"/data.tar* 2>/dev/null | head -n 1)
      if [ -n "$data" ] && tar -xf "$data" -C "$dest" 2>/dev/null; then
        rm -rf "$tmp"
        echo "ar x + tar"
        return 0
      fi
    fi
    rm -rf "$tmp"
  fi
  py=$(gpu_env_python)
  if { [ -z "$how" ] || [ "$how" = python ]; } && [ -n "$py" ] &&
     "$py" - "$deb" "$dest" <<'PY'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
blob = open(deb, "rb").read()
if blob[:8] != b"!<arch>\n":
    sys.exit("not an ar archive: " + deb)
pos = 8
while pos + 60 <= len(blob):
    name = blob[pos:pos + 16].decode().strip().rstrip("/")
    size = int(blob[pos + 48:pos + 58].decode().strip())
    body = blob[pos + 60:pos + 60 + size]
    pos += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as t:
            extra = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            t.extractall(dest, **extra)
        sys.exit(0)
sys.exit("no data.tar member in " + deb)
PY
  then
    echo "Python (ar + tarfile)"
    return 0
  fi
  return 1
}

# A pkg-config that knows just the .pc files in PKG_CONFIG_PATH, for a
# machine without one: enough for CMake's FindPkgConfig.
gpu_env_fake_pkg_config() {
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
}

# libuv and CMocka: the system's when pkg-config knows both, else the
# Debian packages in COLL_DEB_DIR (unpacked there already, or unpacked now
# into $BUILD/deb-root).
gpu_env_deps() {
  local deb_dir=${COLL_DEB_DIR:-$REPO/.deb} root how='' f lib pcdir m mod name version
  if [ -z "${COLL_FORCE_DEB:-}" ] && gpu_env_have_pc libuv && gpu_env_have_pc cmocka; then
    gpu_env_note "libuv $(pkg-config --modversion libuv) and CMocka $(pkg-config --modversion cmocka) from the system"
    return 0
  fi
  if [ -f "$deb_dir/usr/include/uv.h" ] && [ -f "$deb_dir/usr/include/cmocka.h" ]; then
    root=$deb_dir
    how="unpacked already"
  else
    set -- "$deb_dir"/*.deb
    if [ ! -e "$1" ]; then
      GPU_ENV_WHY="libuv or CMocka is missing from the system and $deb_dir holds no .deb files (see the header of tests/gpu/run.sh)"
      return 1
    fi
    root=$BUILD/deb-root
    rm -rf "$root"
    if ! mkdir -p "$root"; then
      GPU_ENV_WHY="cannot create $root"
      return 1
    fi
    for f in "$@"; do
      f=$(cd "$(dirname "$f")" && pwd)/$(basename "$f")
      if ! how=$(gpu_env_unpack_deb "$f" "$root"); then
        GPU_ENV_WHY="cannot unpack $f: no dpkg, no ar + tar, no Python that could"
        return 1
      fi
    done
    how="$# packages unpacked with $how into $root"
  fi
  for m in uv.h:libuv1-dev cmocka.h:libcmocka-dev; do
    if [ ! -f "$root/usr/include/${m%%:*}" ]; then
      GPU_ENV_WHY="$root has no usr/include/${m%%:*}: is ${m#*:} among the carried packages?"
      return 1
    fi
  done
  lib=$(find "$root" -name 'libuv.so.1*' 2>/dev/null | head -n 1)
  if [ -z "$lib" ] || [ -z "$(find "$root" -name 'libcmocka.so.0*' 2>/dev/null)" ]; then
    GPU_ENV_WHY="$root lacks libuv.so.1 or libcmocka.so.0: are libuv1 and libcmocka0 among the carried packages?"
    return 1
  fi
  lib=$(dirname "$lib")
  # Own .pc files: the packages' say prefix=/usr.
  pcdir=$BUILD/pkgconfig
  mkdir -p "$pcdir"
  for m in libuv:uv cmocka:cmocka; do
    mod=${m%%:*}
    name=${m#*:}
    version=$(sed -n 's/^Version: *//p' "$lib/pkgconfig/$mod.pc" 2>/dev/null)
    cat > "$pcdir/$mod.pc" <<EOF
prefix=$root/usr
includedir=$root/usr/include
libdir=$lib
Name: $mod
Description: $mod from $root
Version: ${version:-1.0}
Cflags: -I$root/usr/include
Libs: -L$lib -l$name
EOF
  done
  export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  command -v pkg-config >/dev/null 2>&1 || gpu_env_fake_pkg_config
  GPU_ENV_CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$root/usr")
  gpu_env_note "libuv and CMocka from the Debian packages in $deb_dir ($how)"
}

# NCCL: libnccl.so.2 of the Python packages (nvidia-nccl-cu12/cu13 keep it in
# site-packages/nvidia/nccl/lib) becomes COLL_NCCL_LIBRARY; its nccl.h, when
# the wheel has one, is the header the backend is built against, else the
# toolkit's or the system's, else any nccl.h found. Call after gpu_env_cuda.
gpu_env_nccl() {
  local lib=${COLL_NCCL_LIBRARY:-} py d inc='' nvroot rt h
  if [ -z "$lib" ]; then
    for py in python3 python; do
      command -v "$py" >/dev/null 2>&1 || continue
      for d in $("$py" -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null); do
        if [ -f "$d/nvidia/nccl/lib/libnccl.so.2" ]; then
          lib=$d/nvidia/nccl/lib/libnccl.so.2
          break 2
        fi
      done
    done
  fi
  if [ -z "$lib" ]; then
    lib=$(gpu_env_find '*nvidia/nccl/lib/libnccl.so.2')
  fi
  if [ -z "$lib" ]; then
    gpu_env_note "NCCL: no libnccl.so.2 under the Python packages; libcoll will try the loader path"
  else
    export COLL_NCCL_LIBRARY=$lib
    gpu_env_note "NCCL: $lib"
    inc=$(dirname "$(dirname "$lib")")/include
    [ -f "$inc/nccl.h" ] || inc=
    # cu12 wheels keep the CUDA runtime in nvidia/cuda_runtime/lib, cu13
    # wheels in nvidia/cu13/lib: a fallback for a machine whose toolkit has
    # none (LD_LIBRARY_PATH would otherwise shadow the toolkit's).
    nvroot=$(dirname "$(dirname "$(dirname "$lib")")")
    if ! ls "${GPU_ENV_CUDA_ROOT:-/nonexistent}"/lib64/libcudart.so.* >/dev/null 2>&1; then
      for rt in "$nvroot/cu13/lib" "$nvroot/cuda_runtime/lib"; do
        [ -d "$rt" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$rt"
      done
    fi
  fi
  if [ -n "$inc" ]; then
    gpu_env_note "nccl.h: $inc (the wheel's)"
  else
    for d in "${GPU_ENV_CUDA_ROOT:-/nonexistent}/include" /usr/include /usr/local/include; do
      if [ -f "$d/nccl.h" ]; then
        gpu_env_note "nccl.h: $d"
        return 0
      fi
    done
    h=$(gpu_env_find '*include*/nccl.h')
    if [ -z "$h" ]; then
      GPU_ENV_WHY="no nccl.h: not in the NCCL wheel (nvidia/nccl/include), the CUDA toolkit, /usr/include or under /usr, /opt, /home, /root"
      return 1
    fi
    inc=$(dirname "$h")
    gpu_env_note "nccl.h: $inc (found by searching)"
  fi
  GPU_ENV_CMAKE_ARGS+=("-DCOLL_NCCL_INCLUDE_DIR=$inc")
}

# The CUDA toolkit (headers and libcudart; nvcc is not needed): nvcc's,
# else CUDA_HOME, else /usr/local/cuda. Sets GPU_ENV_CUDA_ROOT.
gpu_env_cuda() {
  local nvcc root=
  nvcc=$(command -v nvcc 2>/dev/null)
  if [ -n "$nvcc" ]; then
    root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  elif [ -n "${CUDA_HOME:-}" ]; then
    root=$CUDA_HOME
  elif [ -d /usr/local/cuda ]; then
    root=/usr/local/cuda
  fi
  if [ -z "$root" ] || [ ! -f "$root/include/cuda_runtime_api.h" ]; then
    GPU_ENV_WHY="no CUDA toolkit found (nvcc on PATH, CUDA_HOME or /usr/local/cuda with include/cuda_runtime_api.h)"
    return 1
  fi
  GPU_ENV_CUDA_ROOT=$root
  GPU_ENV_CMAKE_ARGS+=("-DCUDAToolkit_ROOT=$root")
  gpu_env_note "CUDA toolkit: $root${nvcc:+ ($("$nvcc" --version 2>/dev/null | tail -n 1))}"
}
