#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# embed_test.sh SOURCE_DIR EMBED_SRC CC: configures, builds and runs a
# project that embeds libcoll with add_subdirectory, with CMocka hidden from
# pkg-config: an embedded libcoll must not need it.
set -euo pipefail
src=$1 embed=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/no-pc"
PKG_CONFIG_LIBDIR="$tmp/no-pc" PKG_CONFIG_PATH="" \
  cmake -S "$embed" -B "$tmp/b" -DLIBCOLL_SOURCE_DIR="$src" \
  -DCMAKE_C_COMPILER="$cc" >"$tmp/configure.log" 2>&1 || {
  cat "$tmp/configure.log"
  echo "embed_consumer: configuring the embedding project failed"
  exit 1
}
cmake --build "$tmp/b" -j2 >"$tmp/build.log" 2>&1 || {
  tail -n 40 "$tmp/build.log"
  echo "embed_consumer: building the embedding project failed"
  exit 1
}
"$tmp/b/consumer"
echo "embed_consumer: OK"
