#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# uninstall_test.sh BUILD_DIR: cmake --install into a fresh prefix, then the
# uninstall target: every file the install wrote is gone, libcoll's CMake
# package folder too, and a second uninstall reports the files as already
# gone without failing.
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
n=$(find "$tmp/prefix" \( -type f -o -type l \) | wc -l)
[ "$n" -gt 5 ] || { echo "install wrote only $n files" >&2; exit 1; }
cmake --build "$build" --target uninstall >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
left=$(find "$tmp/prefix" \( -type f -o -type l \))
if [ -n "$left" ]; then
  echo "left after uninstall:" >&2
  echo "$left" >&2
  exit 1
fi
if [ -n "$(find "$tmp/prefix" -type d -path '*/cmake/coll')" ]; then
  echo "lib/cmake/coll was left behind" >&2
  exit 1
fi
grep -q "files removed" "$tmp/log"
cmake --build "$build" --target uninstall >"$tmp/log2" 2>&1 || { cat "$tmp/log2"; exit 1; }
grep -q "Already gone" "$tmp/log2"
echo "uninstall: OK ($n files installed and removed)"
