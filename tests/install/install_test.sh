#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh BUILD_DIR CONSUMER_SRC CC: install, then build and run the
# consumer (coll.h) and the provider (coll_transport.h) both ways (CMake
# package and pkg-config).
set -euo pipefail
build=$1 src=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib* | head -n1)
test -f "$tmp/prefix/include/coll.h"
test -f "$tmp/prefix/include/coll_transport.h"
test -L "$libdir/libcoll.so"
test -e "$libdir/libcoll.so.0"

echo "== find_package(coll CONFIG)"
cmake -S "$src" -B "$tmp/b1" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$tmp/b1" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/b1/consumer"
LD_LIBRARY_PATH="$libdir" "$tmp/b1/provider"

echo "== pkg-config"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
"$cc" -std=c11 -o "$tmp/consumer_pc" "$src/consumer.c" \
  $(pkg-config --cflags --libs coll)
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_pc"
"$cc" -std=c11 -o "$tmp/provider_pc" "$src/provider.c" \
  $(pkg-config --cflags --libs coll)
LD_LIBRARY_PATH="$libdir" "$tmp/provider_pc"
echo "install_consumer: OK"
