#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_symbols.sh: checks what libcoll.so exports: only the coll_* functions
# the public headers (coll.h, coll_transport.h) declare with COLL_API (no
# internal coll__*, nothing undeclared),
# every one of them, and the soname libcoll.so.<major>. Exits 77 (ctest's
# SKIP_RETURN_CODE) when nm or readelf is missing: a check that cannot run
# is reported as skipped, not passed.
# Usage: test_symbols.sh <libcoll.so> <major> <header>...
set -u
lib=$1
major=$2
shift 2
fail=0

if ! command -v nm >/dev/null 2>&1 || ! command -v readelf >/dev/null 2>&1; then
  echo "SKIP: nm or readelf not found (binutils)"
  exit 77
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

# The functions the headers declare with COLL_API, also where a
# declaration spans lines: each header as one line, each "COLL_API ... name("
# up to its parenthesis.
declared=$(for h in "$@"; do tr '\n' ' ' < "$h"; echo; done | grep -o 'COLL_API [^;(){}#]*(' |
  sed -n 's/.*[ *]\(coll_[a-zA-Z0-9_]*\) *($/\1/p' | sort -u)
if [ -z "$declared" ]; then
  echo "FAIL: found no COLL_API declarations in $*"
  fail=1
fi

# Every one of them is exported as a function ...
funcs=$(printf '%s\n' "$syms" | awk '$1 == "T" || $1 == "t" || $1 == "W" || $1 == "i" { print $2 }')
for f in $declared; do
  if ! printf '%s\n' "$funcs" | grep -qx "$f"; then
    echo "FAIL: $f is declared in a public header but not exported as a function"
    fail=1
  fi
done
# ... and nothing else is exported: no undeclared coll_ function, no data.
for s in $(printf '%s\n' "$syms" | awk '{ print $2 }' | sort -u); do
  if ! printf '%s\n' "$declared" | grep -qx "$s"; then
    echo "FAIL: $lib exports $s, which no public header declares with COLL_API"
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
  echo "OK: exactly the $n functions the public headers declare are exported, soname $soname"
fi
exit $fail
