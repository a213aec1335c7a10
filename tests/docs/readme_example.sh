#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# readme_example.sh SOURCE_DIR BUILD_DIR CC: the README's first program (its
# first C block) builds with the project's warnings as errors against the
# build tree, and runs to the answer it prints.
set -euo pipefail
src=$1 build=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/ { on = 1; next } on && /^```/ { exit } on' "$src/README.md" \
  >"$tmp/first.c"
test -s "$tmp/first.c" || { echo "README.md has no C block" >&2; exit 1; }
"$cc" -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror \
  -I"$src/include" "$tmp/first.c" -L"$build/src" -lcoll -pthread \
  -o "$tmp/first"
out=$(LD_LIBRARY_PATH="$build/src" "$tmp/first")
echo "$out"
case $out in
  *"average 1.50 (expected 1.50)"*) echo "readme_example: OK" ;;
  *) echo "readme_example: the program did not print the expected average" >&2
     exit 1 ;;
esac
