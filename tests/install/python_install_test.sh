#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# python_install_test.sh BUILD_DIR SOURCE_DIR PYTHON WITH_TORCH: libcoll
# installed the ways a user installs it, the package installed with pip into
# a fresh virtual environment, then `import coll` (and, WITH_TORCH=1,
# `import coll.distributed` and a one-rank all_reduce) outside the source
# tree with no COLL_* variable set:
#   prefix  cmake --install --prefix P, the loader told by LD_LIBRARY_PATH
#   venv    cmake --install --prefix into the virtual environment itself
#   system  cmake --install --prefix /usr/local and ldconfig, in a mount
#           namespace of its own (root and unshare(1) only; else skipped):
#           the loader finds libcoll.so.0 through its cache, by name.
set -euo pipefail
build=$1 src=$2 python=$3 with_torch=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The package, installed offline into a venv that sees Debian's numpy/torch.
if ! "$python" -c 'import numpy' 2>/dev/null ||
  ! "$python" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
  echo "skipped: $python lacks numpy or venv (Debian: python3-numpy python3-venv)"
  exit 77
fi
cp -r "$src/python" "$tmp/pysrc"
rm -rf "$tmp/pysrc/coll/__pycache__"
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$tmp/venv/bin/python" -m pip install -q "$tmp/pysrc" >/dev/null

cat >"$tmp/probe.py" <<'EOF'
import os, sys
import coll
where = sys.argv[1]
assert os.path.isabs(coll.library_path), coll.library_path
assert coll.library_path.startswith(where), (coll.library_path, where)
print("libcoll:", coll.library_path)
if sys.argv[2] == "1":
    import torch, torch.distributed as dist
    import coll.distributed
    ext = sys.modules["_coll_torch"].__file__
    assert ext.startswith(where), (ext, where)
    dist.init_process_group("coll", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.arange(4, dtype=torch.float32)
    dist.all_reduce(t)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
    dist.destroy_process_group()
    print("_coll_torch:", ext)
print("OK")
EOF

# Runs the probe with the venv's interpreter, outside the source tree, with
# no COLL_* (nor PYTHONPATH) in the environment: $1 is where the files must
# come from; the rest are NAME=VALUE for the environment.
probe() {
  local where=$1
  shift
  (cd "$tmp" && env -u PYTHONPATH $(env | sed -n 's/^\(COLL_[A-Z_]*\)=.*/-u \1/p') \
    PYTHONDONTWRITEBYTECODE=1 "$@" \
    "$tmp/venv/bin/python" "$tmp/probe.py" "$where" "$with_torch")
}

echo "== prefix, LD_LIBRARY_PATH"
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(dirname "$(find "$tmp/prefix" -name 'libcoll.so.0' | head -n 1)")
probe "$libdir" LD_LIBRARY_PATH="$libdir"

echo "== the virtual environment's own prefix"
cmake --install "$build" --prefix "$tmp/venv" >/dev/null
probe "$tmp/venv/lib" LD_LIBRARY_PATH=
rm -f "$tmp"/venv/lib*/libcoll.so* "$tmp"/venv/lib*/_coll_torch.so

echo "== system: /usr/local and ldconfig (a mount namespace of its own)"
if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
  echo "skipped: needs root and unshare(1)"
else
  DESTDIR="$tmp/stage" cmake --install "$build" --prefix /usr/local >/dev/null
  sys_lib=$(dirname "$(find "$tmp/stage" -name 'libcoll.so.0' | head -n 1)")
  sys_lib=${sys_lib#"$tmp/stage"}
  # In the namespace: the staged lib folder over the real one, and the
  # loader's cache rebuilt with it, bound over /etc/ld.so.cache. Nothing
  # outside the namespace sees either.
  export -f probe
  export tmp with_torch sys_lib
  unshare -m --propagation private bash -euo pipefail -c '
    mount --bind "$tmp/stage$sys_lib" "$sys_lib"
    ldconfig -C "$tmp/ld.so.cache"
    mount --bind "$tmp/ld.so.cache" /etc/ld.so.cache
    probe "$sys_lib" LD_LIBRARY_PATH='
fi
echo "python_install: OK"
