#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_symbols.sh: checks what libcoll.so exports: only coll_* names (no
# internal coll__*), every function coll.h declares with COLL_API, and the
# soname libcoll.so.<major>.
# Usage: test_symbols.sh <libcoll.so> <coll.h> <major>
set -u
lib=$1
header=$2
major=${3:-0}
fail=0

if ! command -v nm >/dev/null 2>&1 || ! command -v readelf >/dev/null 2>&1; then
  echo "SKIP: nm or readelf not found"
  exit 0
fi

# Defined dynamic symbols: "address type name" (versioned names carry @...).
syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $2, $3 }')
if [ -z "$syms" ]; then
  echo "FAIL: $lib exports no symbols"
  exit 1
fi

bad=$(printf '%s\n' "$syms" | awk '$2 !~ /^coll_/ { print $2 }')
if [ -n "$bad" ]; then
  echo "FAIL: exported symbols without the coll_ prefix:"
  printf '  %s\n' $bad
  fail=1
fi
internal=$(printf '%s\n' "$syms" | awk '$2 ~ /^coll__/ { print $2 }')
if [ -n "$internal" ]; then
  echo "FAIL: internal coll__ symbols exported:"
  printf '  %s\n' $internal
  fail=1
fi

# Every COLL_API function of the header is exported as a function.
funcs=$(printf '%s\n' "$syms" | awk '$1 == "T" || $1 == "t" || $1 == "W" || $1 == "i" { print $2 }')
declared=$(sed -n 's/^COLL_API[^(]*[ *]\(coll_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u)
if [ -z "$declared" ]; then
  echo "FAIL: found no COLL_API declarations in $header"
  fail=1
fi
for f in $declared; do
  if ! printf '%s\n' "$funcs" | grep -qx "$f"; then
    echo "FAIL: $f is declared in coll.h but not exported as a function"
    fail=1
  fi
done

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ "$soname" != "libcoll.so.$major" ]; then
  echo "FAIL: soname is '$soname', expected 'libcoll.so.$major'"
  fail=1
fi

if [ "$fail" -eq 0 ]; then
  n=$(printf '%s\n' "$declared" | wc -l)
  echo "OK: $n declared functions exported, only coll_* names, soname $soname"
fi
exit $fail
